"""transform/fuse_clear.py: a zero fill of a wgmma accumulator folded into the gemm that follows
it; Lowerer._unswitch_select's uniform branch for either side of a mask (the side a length mask
stores where it holds nowhere)."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang.engine.lower import lower

from test_lowering import lowered_text

ROOT = Path(__file__).resolve().parents[2]
ZERO_FILL = re.compile(r'acc(_s)?\[v(_\d+)?\] = (T\.float32\(0\.0\)|T\.Cast\("float32", 0\))')
sys.path.insert(0, str(ROOT / "examples"))
import flash_attention as fa  # noqa: E402


def _scores(n, masked="none", threads=256, clear="parallel", valid=None):
    """A loop of S = Q K^T into a fragment re-initialised before every gemm: by T.clear, a
    T.Parallel store of 0, or a length mask (-inf past ``valid``, default ``n``, 0 inside:
    ``masked`` "length"), then rows summed into Out. ``n`` may be a symbol (the mask then stays in
    the kernel)."""
    M, N, D = 128, 64, 64
    valid = n if valid is None else valid

    @T.prim_func
    def main(Q: T.Tensor((M, D), T.float16), K: T.Tensor((n, D), T.float16), Out: T.Tensor((M,), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            Q_s = T.alloc_shared((M, D), T.float16)
            K_s = T.alloc_shared((N, D), T.float16)
            acc = T.alloc_fragment((M, N), T.float32)
            row = T.alloc_fragment((M,), T.float32)
            total = T.alloc_fragment((M,), T.float32)
            T.copy(Q[0:M, :], Q_s)
            T.fill(total, 0)
            for k in T.Pipelined(T.ceildiv(n, N), num_stages=2):
                T.copy(K[k * N:(k + 1) * N, :], K_s)
                if masked == "length":
                    for i, j in T.Parallel(M, N):
                        acc[i, j] = T.if_then_else(k * N + j >= valid, -T.infinity(T.float32), 0)
                elif clear == "clear":
                    T.clear(acc)
                else:
                    for i, j in T.Parallel(M, N):
                        acc[i, j] = 0
                T.gemm(Q_s, K_s, acc, transpose_B=True)
                T.reduce_sum(acc, row, dim=1)
                for i in T.Parallel(M):
                    total[i] += row[i]
            T.copy(total, Out[0:M])

    return main


@pytest.mark.parametrize("clear", ["parallel", "clear"])
def test_an_unconditional_fill_stays_for_ptxas(clear):
    """ptxas sees the zeros of an unconditional fill and issues the first HGMMA with RZ itself: the
    pass leaves it (folded, the template's fence would keep the stale values live instead)."""
    text = lowered_text(_scores(512, clear=clear), "sm_90a")
    assert ZERO_FILL.search(text) and "tl::wgmma_gemm_ss<128, 64, 64, 2, false, true, false>" in text
    assert "T.Select" not in text


def test_mma_sync_keeps_its_fill():
    text = lowered_text(_scores(512), "sm_80")
    assert "tl::gemm_ss<" in text and "wgmma" not in text
    assert ZERO_FILL.search(text)


def test_a_length_mask_stores_zero_uniformly_where_it_bites_nowhere():
    """``if_then_else(k * N + j >= n, -inf, 0)`` with n a symbol: the tile stores 0 everywhere when
    ``n - k * N >= N`` (every column inside), the mask as written otherwise. This kernel (a symbolic
    length: cp.async, no warp specialisation) keeps that fill: without setmaxnreg the register count
    decides occupancy, and the stale accumulator a run-time scale-d keeps live costs registers
    (upstream's varlen attention: 127 -> 138, a block per SM)."""
    n = T.dynamic("n")
    text = lowered_text(_scores(n, masked="length"), "sm_90a")
    assert "T.Select" not in text and "tl::setmaxnreg" not in text
    loop = text[text.index("for k in range((n + 63) // 64):"):]
    branch = loop.index("if 64 <= n - k * 64:")
    assert branch < loop.index("T.float32(0.0)") < loop.index("T.if_then_else(") < loop.index("wgmma_gemm")
    static = lowered_text(_scores(512, masked="length"), "sm_90a")    # folds: no mask at all
    assert "T.if_then_else" not in static and "-inf" not in static


def test_a_fill_under_a_branch_is_a_run_time_scale_d_in_a_warp_specialised_kernel():
    """Causal attention (warp-specialised, setmaxnreg): ``if 0 < bx - k: acc_s = 0 else: mask``
    becomes ``if not 0 < bx - k: mask`` and the gemm's ``scale_d0`` argument ``0 < bx - k ? 0 : 1``;
    the CUDA compiles and the first HGMMA of S = Q K^T takes that predicate."""
    causal = fa.flashattn.get_prim_func(2, 4, 512, 128, True, 1, "bhsd", block_M=128, block_N=128, num_stages=2)
    src = lower(causal, target="sm_90a", out_idx=[3]).source
    assert "(&(acc_s[0])), ((0 < (" in src and "? 0 : 1))" in src
    if not shutil.which("nvcc"):
        pytest.skip("nvcc not found")
    from tilelang.jit.nvcc import compile_cubin

    assert compile_cubin(src, "sm_90a")


def test_an_accumulator_read_between_the_fill_and_the_gemm_keeps_the_fill():
    M, N, D = 128, 64, 64

    @T.prim_func
    def main(Q: T.Tensor((M, D), T.float16), K: T.Tensor((N, D), T.float16), Out: T.Tensor((M, N), T.float32),
             Peek: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=256) as bx:
            Q_s = T.alloc_shared((M, D), T.float16)
            K_s = T.alloc_shared((N, D), T.float16)
            acc = T.alloc_fragment((M, N), T.float32)
            T.copy(Q, Q_s)
            T.copy(K, K_s)
            T.clear(acc)
            T.copy(acc, Peek)
            T.gemm(Q_s, K_s, acc, transpose_B=True)
            T.copy(acc, Out)

    text = lowered_text(main, "sm_90a")
    assert ", false, true, false>" in text and ZERO_FILL.search(text)


def test_a_fill_of_part_of_the_accumulator_is_not_a_clear():
    from tilelang.transform import fuse_clear
    from tvm import tirx

    acc = tirx.decl_buffer((64,), "float32", "acc", scope="local")
    v = tirx.Var("v", "int32")
    half = tirx.For(v, 0, 32, tirx.ForKind.SERIAL, tirx.BufferStore(acc, tirx.FloatImm("float32", 0.0), [v]))
    whole = tirx.For(v, 0, 64, tirx.ForKind.SERIAL, tirx.BufferStore(acc, tirx.FloatImm("float32", 0.0), [v]))
    strided = tirx.For(v, 0, 64, tirx.ForKind.SERIAL, tirx.BufferStore(acc, tirx.FloatImm("float32", 0.0), [v // 2]))
    assert not fuse_clear._whole_zero_fill(half, acc, 64)
    assert fuse_clear._whole_zero_fill(whole, acc, 64)
    assert not fuse_clear._whole_zero_fill(strided, acc, 64)


def test_both_uniform_sides_of_a_mask_under_the_key():
    """``tl.enable_mask_unswitch_both`` (session 58, an experiment): a length mask shorter than the
    loop (``valid = n // 2`` of ``n`` rows) also gets its all-masked branch (-inf everywhere where no
    column is inside), between the zero side and the per-element select; without the key only the
    zero side is unswitched. Masked at ``n`` itself, the loop (``k < ceildiv(n, 64)``) never reaches
    an all-masked tile, and no branch is made for it even under the key."""
    n = T.dynamic("n")
    plain = lowered_text(_scores(n, masked="length", valid=n // 2), "sm_90a")
    key = {"tl.enable_mask_unswitch_both": True}
    both = lowered_text(_scores(n, masked="length", valid=n // 2), "sm_90a", pass_configs=key)
    assert plain.count("T.if_then_else(") == both.count("T.if_then_else(") == 1
    loop = both[both.index("for k in range((n + 63) // 64):"):]
    zero, inf, select = loop.index("T.float32(0.0)"), loop.index('T.float32("-inf")'), loop.index("T.if_then_else(")
    assert loop.index("if 64 <= n // 2 - k * 64:") < zero < loop.index("if 0 <= k * 64 - n // 2:") < inf < select
    assert "if 0 <= k * 64 - n // 2:" not in plain
    whole = lowered_text(_scores(n, masked="length"), "sm_90a", pass_configs=key)
    assert "if 0 <= k * 64 - n:" not in whole and "if 64 <= n - k * 64:" in whole

def _diagonal_onward(start_at_diagonal):
    """Causal attention's backward form: for a 128-row block of keys ``by``, a loop over 32-row query
    tiles whose mask keeps ``by * 128 + i <= k * 32 + j``; the loop starts at the diagonal tile
    (upstream's example_gqa_sink_bwd_bhsd) or at 0."""
    M, N, D, S = 128, 32, 64, 1024

    @T.prim_func
    def main(K: T.Tensor((S, D), T.float16), Q: T.Tensor((S, D), T.float16), Out: T.Tensor((S, N), T.float32)):
        with T.Kernel(S // M, threads=256) as by:
            K_s = T.alloc_shared((M, D), T.float16)
            Q_s = T.alloc_shared((N, D), T.float16)
            qkT = T.alloc_fragment((M, N), T.float32)
            total = T.alloc_fragment((M, N), T.float32)
            T.copy(K[by * M:(by + 1) * M, :], K_s)
            T.clear(total)
            for k in T.Pipelined(T.floordiv(by * M, N) if start_at_diagonal else 0, S // N, num_stages=2):
                T.copy(Q[k * N:(k + 1) * N, :], Q_s)
                T.clear(qkT)
                T.gemm(K_s, Q_s, qkT, transpose_B=True)
                for i, j in T.Parallel(M, N):
                    qkT[i, j] = T.if_then_else(by * M + i <= k * N + j, qkT[i, j], 0)
                for i, j in T.Parallel(M, N):
                    total[i, j] += qkT[i, j]
            T.copy(total, Out[by * M:(by + 1) * M, :])

    return main


def test_a_mask_side_the_loop_never_reaches_gets_no_branch():
    """From the diagonal onward the all-masked side (``by * 4 - k >= 1``) never occurs: the branch
    goes to the all-kept side instead (no select past the diagonal); from 0 the zero side stays
    first (its store folds into the gemm)."""
    kept, zero = re.compile(r"if 127 < k \* 32 - by\w* \* 128:"), re.compile(r"if 1 <= by\w* \* 4 - k:")
    onward = lowered_text(_diagonal_onward(True), "sm_90a")
    assert kept.search(onward) and not zero.search(onward) and onward.count("T.if_then_else(") == 1
    from_zero = lowered_text(_diagonal_onward(False), "sm_90a")
    assert zero.search(from_zero) and not kept.search(from_zero)
