"""wgmma beside mma.sync in one kernel (CPU: planning, generated source, the slab addressing of
``tl::gemm_ss`` / ``gemm_rs`` evaluated on the host, ptxas; GPU: tests/gpu/test_wgmma_mix_gpu.py).

On sm_90a each gemm that fits wgmma takes it and the others take mma.sync, as upstream plans each
gemm on its own: attention backward's dQ gemm has M = block_N = 32 rows, which no warpgroup
split covers, beside four 128-row gemms. A shared tile that a wgmma gemm reads is in the wgmma
slab layout (columns cut into 128-byte slabs); the mma.sync gemm reading it too is told the slab
width and stride (``tl::gemm_ss<..., LDA, LDB, CA, CB, SA, SB>``)."""

from __future__ import annotations

import re

import pytest

import tilelang
import tvm
import tilelang.language as T
from tilelang.layout import SharedLayout

from host_cuda import NVCC, run_host_program


def mixed_kernel(D=192, N=32, M=128, threads=256, dtype="float16"):
    """S = K Q^T (M x N: wgmma), dQ = G^T K (N x D, 32 rows: mma.sync reading K's slabs as B,
    N-major), R = Q Q^T (N x N: mma.sync reading Q's slabs as A and as K-major B)."""

    @T.prim_func
    def main(K: T.Tensor((M, D), dtype), Q: T.Tensor((N, D), dtype), G: T.Tensor((M, N), dtype),
             S: T.Tensor((M, N), "float32"), dQ: T.Tensor((N, D), "float32"), R: T.Tensor((N, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            K_s = T.alloc_shared((M, D), dtype)
            Q_s = T.alloc_shared((N, D), dtype)
            G_s = T.alloc_shared((M, N), dtype)
            s = T.alloc_fragment((M, N), "float32")
            dq = T.alloc_fragment((N, D), "float32")
            r = T.alloc_fragment((N, N), "float32")
            T.copy(K, K_s)
            T.copy(Q, Q_s)
            T.copy(G, G_s)
            T.gemm(K_s, Q_s, s, transpose_B=True, clear_accum=True)
            T.gemm(G_s, K_s, dq, transpose_A=True, clear_accum=True)
            T.gemm(Q_s, Q_s, r, transpose_B=True, clear_accum=True)
            T.copy(s, S)
            T.copy(dq, dQ)
            T.copy(r, R)

    return main


def shared_accumulator_kernel(dtype="float16"):
    """Two gemms into one accumulator, the second on a column slice that starts inside a slab
    (no wgmma): mixing would give the accumulator both kinds' layouts, so both take mma.sync."""

    @T.prim_func
    def main(A: T.Tensor((128, 64), dtype), A2: T.Tensor((128, 64), dtype), B: T.Tensor((64, 64), dtype),
             C: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=256) as bx:
            A_s = T.alloc_shared((128, 64), dtype)
            A2_s = T.alloc_shared((128, 64), dtype)
            B_s = T.alloc_shared((64, 64), dtype)
            B2_s = T.alloc_shared((32, 64), dtype)
            c = T.alloc_fragment((128, 64), "float32")
            T.copy(A, A_s)
            T.copy(A2, A2_s)
            T.copy(B, B_s)
            T.copy(B[0:32, :], B2_s)
            T.gemm(A_s, B_s, c, clear_accum=True)
            T.gemm(A2_s[:, 16:48], B2_s, c)
            T.copy(c, C)

    return main


def tf32_beside_wgmma_kernel(M=128, N=32, K=64, threads=128, tf32="float32"):
    """gdn's chunk_delta_bwd in small: a tf32 gemm with A in registers and a bf16 gemm that alone
    would take wgmma, whose accumulators one T.Parallel loop adds. ``tf32``: the tf32 gemm's
    operand type, float32 (no wgmma: rounded on mma.sync) or T.tfloat32 (as the example declares
    them: wgmma, tests/test_tf32_wgmma.py)."""

    @T.prim_func
    def main(Q: T.Tensor((K, M), "float32"), D: T.Tensor((N, K), "float32"), W: T.Tensor((K, M), "bfloat16"),
             V: T.Tensor((K, N), "bfloat16"), Out: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            q_s = T.alloc_shared((K, M), "float32")
            d_s = T.alloc_shared((N, K), tf32)
            w_s = T.alloc_shared((K, M), "bfloat16")
            v_s = T.alloc_shared((K, N), "bfloat16")
            q_f = T.alloc_fragment((K, M), "float32")
            q_t = T.alloc_fragment((M, K), tf32)
            acc1 = T.alloc_fragment((M, N), "float32")
            acc2 = T.alloc_fragment((M, N), "float32")
            T.copy(Q, q_s)
            T.copy(D, d_s)
            T.copy(W, w_s)
            T.copy(V, v_s)
            T.copy(q_s, q_f)
            for i, k in T.Parallel(M, K):
                q_t[i, k] = q_f[k, i]
            T.clear(acc1)
            T.clear(acc2)
            T.gemm(q_t, d_s, acc1, transpose_B=True)
            T.gemm(w_s, v_s, acc2, transpose_A=True)
            for i, j in T.Parallel(M, N):
                acc2[i, j] = acc2[i, j] + acc1[i, j]
            T.copy(acc2, Out)

    return main


def _calls(src):
    return re.findall(r"tl::(\w*gemm_[sr]s\w*)<([^>]*)>", src)


def _layouts(func, configs=None):
    from tilelang.transform.kernel import analyze_kernel
    from tilelang.transform.layout_inference import infer_layouts

    return infer_layouts(analyze_kernel(func), "sm_90a", configs)


# ----- planning ----------------------------------------------------------------------------------
def test_each_gemm_takes_the_instruction_it_fits():
    layouts = _layouts(mixed_kernel())
    kinds = [p.kind for p in layouts.gemms.values()]
    assert kinds == ["wgmma", "mma", "mma"]
    assert layouts.wgmma and layouts.mixed
    by_name = {b.name: lay for b, lay in layouts.shared.items()}
    # the tiles the wgmma gemm reads are in its slab layout: 192 columns = 3 slabs of 64
    assert isinstance(by_name["K_s"], SharedLayout) and by_name["K_s"].slab and by_name["K_s"].slab_width == 64
    assert by_name["Q_s"].slab and by_name["Q_s"].slab_width == 64


def test_mixing_can_be_turned_off():
    layouts = _layouts(mixed_kernel(), {"tl.disable_wgmma_mix": True})
    assert [p.kind for p in layouts.gemms.values()] == ["mma"] * 3 and not layouts.wgmma and not layouts.mixed


def test_a_fragment_both_kinds_would_write_keeps_one_kind():
    layouts = _layouts(shared_accumulator_kernel())
    assert [p.kind for p in layouts.gemms.values()] == ["mma", "mma"] and not layouts.mixed


def test_a_tf32_gemm_keeps_every_gemm_of_its_kernel_on_mma_sync():
    """A tf32 gemm (no wgmma: float32 operands) beside a bf16 one, their accumulators added in a
    T.Parallel loop: the kernel stays on mma.sync. (Session 19 built the mix, the tf32 gemm's
    warps in the wgmma row order: correct, but gdn's chunk_delta_bwd went from 2.50 to 2.58 ms,
    so it was not kept; benchmarks/RESULTS.md.)"""
    layouts = _layouts(tf32_beside_wgmma_kernel())
    assert [p.kind for p in layouts.gemms.values()] == ["mma", "mma"] and not layouts.mixed
    assert "16-bit operands only" in layouts.unmixed
    src = tilelang.lower(tf32_beside_wgmma_kernel(), target="sm_90a").source
    assert [name for name, _ in _calls(src)] == ["gemm_rs", "gemm_ss"]


# ----- generated source --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_mma_sync_calls_name_the_slabs_they_read(dtype):
    art = tilelang.lower(mixed_kernel(dtype=dtype), "sm_90a")
    calls = _calls(art.source)
    assert [c[0] for c in calls] == ["wgmma_gemm_ss", "gemm_ss", "gemm_ss"], calls
    # dQ: A = G_s (32-column rows, one slab: plain), B = K_s in 64-wide slabs, 128 x 64 apart
    assert calls[1][1] == "32, 192, 128, 1, 8, true, false, true, 32, 64, 0, 0, 0, 8192"
    # R: A and B are Q_s, 32 rows x 64 per slab
    assert calls[2][1].endswith("false, true, true, 64, 64, 0, 0, 2048, 2048")


def test_sm80_and_unmixed_kernels_keep_their_calls():
    for art in (tilelang.lower(mixed_kernel(), "sm_80"),
                tilelang.lower(mixed_kernel(), "sm_90a", pass_configs={"tl.disable_wgmma_mix": True})):
        calls = _calls(art.source)
        assert [c[0] for c in calls] == ["gemm_ss"] * 3
        assert calls[1][1] == "32, 192, 128, 1, 8, true, false, true, 32, 192"   # no slab arguments


def test_hover_says_why_the_mma_sync_gemms_are_not_wgmma():
    from tilelang.analysis.summary import summarize

    gemms = summarize(mixed_kernel(), "sm_90a")["gemms"]
    assert [g["kind"] for g in gemms] == ["wgmma", "mma", "mma"]
    assert "why_not_wgmma" not in gemms[0]
    assert all("M=32" in g["why_not_wgmma"] for g in gemms[1:]), gemms
    off = summarize(mixed_kernel(), "sm_90a", pass_configs={"tl.disable_wgmma_mix": True})["gemms"]
    assert "tl.disable_wgmma_mix" in off[0]["why_not_wgmma"] and "line" in off[0]["why_not_wgmma"]


# ----- the slab addressing, on the host ----------------------------------------------------------
SLAB_CASES = [(128, 192, 2), (32, 128, 2), (64, 96, 2), (64, 256, 2), (64, 128, 4)]   # rows, cols, bytes


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_ldmatrix_chunk_addresses_follow_the_python_slab_layout(tmp_path):
    """``LdsmAddr<W, E, SS>`` (the per-lane ldmatrix address of tl::gemm_ss / gemm_rs) against
    ``SharedLayout(slab=True).offset``: every 16-byte chunk of every row."""
    lines = []
    for i, (rows, cols, e) in enumerate(SLAB_CASES):
        lay = SharedLayout((rows, cols), e, True, True)
        w = lay.slab_width
        lines.append(f"  dump<{w}, {e}, {rows * w}>({i}, {rows}, {cols * e // 16});")
    out = run_host_program(tmp_path, "slab", (
        "#include \"tl.h\"\n#include <cstdio>\n"
        "template <int W, int E, int SS> void dump(int id, int rows, int chunks) {\n"
        "  using A = tl::detail::LdsmAddr<W, E, SS>;\n"
        "  for (int r = 0; r < rows; ++r)\n"
        "    for (int c = 0; c < chunks; ++c)\n"
        "      std::printf(\"%d %d %d %u\\n\", id, r, c, r * W * E + A::chunk_offset(c, "
        "tl::detail::Swizzle<W, E>::xor_mask(r)));\n"
        "}\nint main() {\n" + "\n".join(lines) + "\n  return 0;\n}\n"))
    seen = {}
    for line in out:
        i, r, c, addr = map(int, line.split())
        rows, cols, e = SLAB_CASES[i]
        lay = SharedLayout((rows, cols), e, True, True)
        want = int(lay.offset([tvm.tirx.const(r, "int32"), tvm.tirx.const(c * 16 // e, "int32")]))
        assert addr == want * e, (SLAB_CASES[i], r, c)
        seen[i] = seen.get(i, 0) + 1
    assert seen == {i: rows * cols * e // 16 for i, (rows, cols, e) in enumerate(SLAB_CASES)}


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_mixed_kernel_passes_ptxas_without_spills():
    from tilelang.jit.nvcc import ptxas_info

    art = tilelang.lower(mixed_kernel(dtype="bfloat16"), "sm_90a")
    for info in ptxas_info(art.source, "sm_90a").values():
        assert info.spill_stores == 0 and info.spill_loads == 0, info


def test_an_mma_sync_gemm_in_a_later_warp_group_role_is_refused():
    """tl::gemm_ss places warps from warp 0: a T.ws(1) role holding an mma.sync gemm (beside a
    wgmma one, which runs on its own warpgroup) would index warps 4-7 into a 4-warp partition."""
    from tilelang.diagnostics.errors import TileLangCompileError

    @T.prim_func
    def k(A: T.Tensor((128, 64), T.float16), B: T.Tensor((64, 64), T.float16), C: T.Tensor((128, 64), T.float32),
          D: T.Tensor((32, 64), T.float32)):
        with T.Kernel(1, 1, threads=256):
            a_s = T.alloc_shared((128, 64), T.float16)
            a2 = T.alloc_shared((32, 64), T.float16)
            b_s = T.alloc_shared((64, 64), T.float16)
            c = T.alloc_fragment((128, 64), T.float32)
            d = T.alloc_fragment((32, 64), T.float32)
            bars = T.alloc_barrier([128, 128])
            with T.ws(0):
                T.copy(A[0, 0], a_s)
                T.copy(A[0:32, 0:64], a2)
                T.copy(B[0, 0], b_s)
                T.barrier_arrive(bars[0])
            with T.ws(1):
                T.mbarrier_wait_parity(bars[0], 0)
                T.clear(c)
                T.clear(d)
                T.gemm(a_s, b_s, c)
                T.gemm(a2, b_s, d)
                T.copy(c, C)
                T.copy(d, D)

    with pytest.raises(TileLangCompileError, match="give the computing role warp group 0"):
        tilelang.compile(k, target="cuda -arch=sm_90a")
