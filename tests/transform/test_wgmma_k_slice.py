"""Plain ``T.gemm`` on column slices of a shared buffer takes wgmma on sm_90a (deepseek_v32's
sparse_mla_fwd: ``Q_shared[:, :512]`` and ``Q_shared[:, 512:]`` of a 64 x 576 tile).

A slice of every row and of columns ``[c0, c0 + n)`` is read as slabs as wide as the swizzle of
its ``n`` columns; starting at a multiple of that width, it is laid out byte for byte as a buffer
of its own shape, so ``tl::wgmma_gemm_ss`` gets the address of its first slab. Every gemm on the
buffer must read the same slabs (one buffer, one layout); where they disagree, or a slice is cut
along the rows, the kernel keeps mma.sync as before."""

import pytest

import tilelang
import tilelang.language as T


def _body(src):
    return src[src.index("__global__"):]


def _mla_scores(D=512, tail=64, H=64, BI=64, threads=256):
    """S = Q[:, :D] K^T + Q[:, D:] K_tail^T, then O = P V with V = K: sparse_mla_fwd's gemms."""

    @T.prim_func
    def kernel(Q: T.Tensor((H, D + tail), T.bfloat16), KV: T.Tensor((BI, D + tail), T.bfloat16),
               O: T.Tensor((H, D), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            q_s = T.alloc_shared((H, D + tail), T.bfloat16)
            kv_s = T.alloc_shared((BI, D), T.bfloat16)
            kt_s = T.alloc_shared((BI, tail), T.bfloat16)
            p_s = T.alloc_shared((H, BI), T.bfloat16)
            acc_s = T.alloc_fragment((H, BI), T.float32)
            acc_o = T.alloc_fragment((H, D), T.float32)
            T.copy(Q[:, :D], q_s[:, :D])
            T.copy(Q[:, D:], q_s[:, D:])
            T.copy(KV[:, :D], kv_s)
            T.copy(KV[:, D:], kt_s)
            T.fill(acc_s, 0)
            T.fill(acc_o, 0)
            T.gemm(q_s[:, :D], kv_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
            T.gemm(q_s[:, D:], kt_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
            T.copy(acc_s, p_s)
            T.gemm(p_s, kv_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            T.copy(acc_o, O)

    return kernel


def test_k_slices_of_a_shared_tile_take_wgmma():
    src = _body(tilelang.lower(_mla_scores(), "sm_90a").source)
    assert "tl::gemm_ss<" not in src
    # M=64 over two warpgroups: they split N. q_s[:, :512] starts at q_s (element 0); q_s[:, 512:]
    # is its ninth slab of 64 rows x 64 columns: 8 * 64 * 64 = 32768 elements further
    assert ("tl::wgmma_gemm_ss<64, 64, 512, tl::Warpgroups<1, 2>, false, true, false>"
            "((&(((nv_bfloat16*)smem)[0]))") in src
    assert ("tl::wgmma_gemm_ss<64, 64, 64, tl::Warpgroups<1, 2>, false, true, false>"
            "((&(((nv_bfloat16*)smem)[32768]))") in src
    assert "tl::wgmma_gemm_ss<64, 512, 64, tl::Warpgroups<1, 2>, false, false, false>" in src


def test_copy_into_a_slice_uses_the_slab_layout():
    src = _body(tilelang.lower(_mla_scores(), "sm_90a").source)
    # the tail copy writes q_s's ninth slab (elements 32768 ..), rows of 64 elements
    tail = [ln for ln in src.splitlines() if "+ 32768)]" in ln and "Q[" in ln]
    assert tail, "the copy of Q[:, 512:] does not write the ninth slab"


def test_n_major_column_slice_of_b_takes_wgmma():
    @T.prim_func
    def kernel(P: T.Tensor((64, 64), T.bfloat16), Q: T.Tensor((64, 320), T.bfloat16),
               O: T.Tensor((64, 256), T.float32), Ot: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            p_s = T.alloc_shared((64, 64), T.bfloat16)
            q_s = T.alloc_shared((64, 320), T.bfloat16)
            acc = T.alloc_fragment((64, 256), T.float32)
            acc_t = T.alloc_fragment((64, 64), T.float32)
            T.copy(P, p_s)
            T.copy(Q, q_s)
            T.gemm(p_s, q_s[:, :256], acc, clear_accum=True)
            T.gemm(p_s, q_s[:, 256:], acc_t, clear_accum=True)
            T.copy(acc, O)
            T.copy(acc_t, Ot)

    src = _body(tilelang.lower(kernel, "sm_90a").source)
    assert "tl::gemm_ss<" not in src
    # p_s (4096 elements) first, then q_s: its fifth slab of 64 x 64 is 16384 elements further
    assert ("tl::wgmma_gemm_ss<64, 256, 64, 1, false, false, true>"
            "((&(((nv_bfloat16*)smem)[0])), (&(((nv_bfloat16*)smem)[4096]))") in src
    assert ("tl::wgmma_gemm_ss<64, 64, 64, 1, false, false, true>"
            "((&(((nv_bfloat16*)smem)[0])), (&(((nv_bfloat16*)smem)[20480]))") in src


def _narrow(cols=192, first=32, whole_too=False):
    """A 64 x cols tile read as K slices [0, first) and [first, cols); with ``whole_too`` a third
    gemm reads the whole tile."""

    @T.prim_func
    def kernel(A: T.Tensor((64, cols), T.bfloat16), B: T.Tensor((64, cols), T.bfloat16),
               C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((64, cols), T.bfloat16)
            b0 = T.alloc_shared((64, first), T.bfloat16)
            b1 = T.alloc_shared((64, cols - first), T.bfloat16)
            b2 = T.alloc_shared((64, cols), T.bfloat16)
            acc = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, a_s)
            T.copy(B[:, :first], b0)
            T.copy(B[:, first:], b1)
            T.fill(acc, 0)
            T.gemm(a_s[:, :first], b0, acc, transpose_B=True)
            T.gemm(a_s[:, first:], b1, acc, transpose_B=True)
            if whole_too:
                T.copy(B, b2)
                T.gemm(a_s, b2, acc, transpose_B=True)
            T.copy(acc, C)

    return kernel


def test_slices_narrower_than_the_row_swizzle_set_the_slab_width():
    # rows of 384 bytes would be 128-byte slabs; both slices (64 and 320 bytes) want 64-byte ones,
    # so a_s is laid out in 32-column slabs and a_s[:, 32:] is its second: 64 * 32 elements in
    src = _body(tilelang.lower(_narrow(), "sm_90a").source)
    assert "tl::gemm_ss<" not in src
    assert ("tl::wgmma_gemm_ss<64, 64, 32, 1, false, true, false>((&(((nv_bfloat16*)smem)[0]))") in src
    assert ("tl::wgmma_gemm_ss<64, 64, 160, 1, false, true, false>((&(((nv_bfloat16*)smem)[2048]))") in src


def test_gemms_disagreeing_on_the_slabs_keep_mma():
    # the whole tile (K=192: 128-byte slabs) and its 32-column slice (64-byte slabs) cannot share
    # one layout: the kernel keeps mma.sync, as before
    src = _body(tilelang.lower(_narrow(whole_too=True), "sm_90a").source)
    assert "wgmma" not in src
    assert src.count("tl::gemm_ss<") == 3


def test_row_slice_keeps_mma():
    @T.prim_func
    def kernel(A: T.Tensor((128, 64), T.bfloat16), B: T.Tensor((64, 64), T.bfloat16),
               C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((128, 64), T.bfloat16)
            b_s = T.alloc_shared((64, 64), T.bfloat16)
            acc = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.gemm(a_s[64:, :], b_s, acc, transpose_B=True, clear_accum=True)
            T.copy(acc, C)

    src = _body(tilelang.lower(kernel, "sm_90a").source)
    assert "wgmma" not in src and "tl::gemm_ss<" in src


def test_k_slices_at_a_smaller_split():
    # q_s 64 x 192: q_s[:, :128] is slabs 0-1, q_s[:, 128:] slab 2 (2 * 64 * 64 elements in)
    src = _body(tilelang.lower(_mla_scores(D=128, tail=64), "sm_90a").source)
    assert "tl::gemm_ss<" not in src
    assert ("tl::wgmma_gemm_ss<64, 64, 128, tl::Warpgroups<1, 2>, false, true, false>"
            "((&(((nv_bfloat16*)smem)[0]))") in src
    assert ("tl::wgmma_gemm_ss<64, 64, 64, tl::Warpgroups<1, 2>, false, true, false>"
            "((&(((nv_bfloat16*)smem)[8192]))") in src


@pytest.mark.parametrize("make", [_mla_scores, _narrow])
def test_sliced_wgmma_kernels_compile_with_nvcc(make):
    from tilelang.jit import nvcc

    art = tilelang.lower(make(), "sm_90a")
    try:
        nvcc.compile_cubin(art.source, art.arch, art.compile_flags)
    except FileNotFoundError:
        pytest.skip("no nvcc")


def test_summary_says_why_disagreeing_slices_keep_mma():
    # the hover's "not wgmma on sm_90a" line (analysis.summary._explain_mma): every gemm fits wgmma
    # on its own, so the reason is the slab conflict
    from tilelang.analysis.summary import summarize

    gemms = summarize(_narrow(whole_too=True), "sm_90a")["gemms"]
    assert len(gemms) == 3
    assert all("need different wgmma slab widths" in g["why_not_wgmma"] for g in gemms)
    assert "'a_s'" in gemms[0]["why_not_wgmma"]
    assert all("why_not_wgmma" not in g for g in summarize(_narrow(), "sm_90a")["gemms"])
