"""Narrow wgmma slabs (default; off with ``tl.disable_wgmma_narrow_slabs``): a T.gemm whose
warpgroups split N into columns that are not whole swizzle slabs of an N-major B's row takes
wgmma, B laid out in slabs as wide as one warpgroup's columns
(``layout_inference.narrow_b_slab_bytes``), the width passed to ``tl::wgmma_gemm_*`` through
``tl::Warpgroups<M, N, SWA, SWB>``; with the key it stays on mma.sync (GPU side:
tests/gpu/test_wgmma_narrow_slabs_gpu.py)."""

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc
from tilelang.transform.layout_inference import narrow_b_slab_bytes, wgmma_split

SM90 = "cuda -arch=sm_90a"
KEY = "tl.disable_wgmma_narrow_slabs"


def kernel(M=64, N=64, K=64, threads=256, trans_b=False, dtype=T.float16):
    b_shape = (N, K) if trans_b else (K, N)

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            A_s = T.alloc_shared((M, K), dtype)
            B_s = T.alloc_shared(b_shape, dtype)
            C_f = T.alloc_fragment((M, N), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_f, transpose_B=trans_b, clear_accum=True)
            T.copy(C_f, C)

    return main


def gemm_calls(func, **configs):
    src = tilelang.compile(func, target=SM90, pass_configs=configs).get_kernel_source()
    return src, re.findall(r"tl::(\w*gemm\w*)<([^(]*)>\(", src)


def test_slab_widths():
    assert narrow_b_slab_bytes(64, 2, False, 2) == 64      # 32 columns of 16-bit: 64-byte slabs
    assert narrow_b_slab_bytes(32, 2, False, 2) == 32
    assert narrow_b_slab_bytes(128, 2, False, 2) == 0      # 64 columns: the row's 128-byte slabs do
    assert narrow_b_slab_bytes(64, 2, True, 2) == 0        # K-major B: slabs run along K
    assert narrow_b_slab_bytes(64, 1, False, 2) == 0


def test_the_reason_for_mma_sync_names_the_key():
    assert KEY in wgmma_split(64, 64, 2, False, "float32", 2)       # (the hover's "why not wgmma")
    assert wgmma_split(64, 64, 2, False, "float32", 2, narrow=True) == (1, 2)


@pytest.mark.parametrize("N, width", [(64, 64), (32, 32)])
def test_wgmma_with_narrow_b_slabs_by_default(N, width):
    src, narrow = gemm_calls(kernel(N=N))
    assert narrow == [("wgmma_gemm_ss", f"64, {N}, 64, tl::Warpgroups<1, 2, 0, {width}>, false, false, true")]
    assert nvcc.compile_cubin(src, "sm_90a", [])
    _, off = gemm_calls(kernel(N=N), **{KEY: True})
    assert [name for name, _ in off] == ["gemm_ss"]          # mma.sync


def test_the_hover_says_why_mma_sync_with_the_key():
    from tilelang.analysis.summary import summarize

    gemms = summarize(kernel(N=64), "sm_90a", {KEY: True})["gemms"]
    assert gemms[0]["kind"] == "mma" and KEY in gemms[0]["why_not_wgmma"]
    assert summarize(kernel(N=64), "sm_90a")["gemms"][0]["kind"] == "wgmma"


def test_k_major_b_and_m_split_gemms_are_unchanged():
    for func in (kernel(trans_b=True), kernel(M=128)):
        assert gemm_calls(func) == gemm_calls(func, **{KEY: True})
