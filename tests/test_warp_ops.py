"""Warp vote/shuffle/match calls under CUDA's names, T.__ffs of a 64-bit ballot, and T.cumsum
over a shared-memory sub-region (CPU: generated source)."""

import warnings

import tilelang
import tilelang.language as T


def _source(func):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(func).get_kernel_source()


def test_vote_shuffle_match_use_cuda_names():
    @T.prim_func
    def kernel(B: T.Tensor((32,), T.int32), M: T.Tensor((32,), T.uint64)):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            M[tx] = T.ballot_sync(tx >= 7) | T.activemask()
            B[tx] = (T.any_sync(tx == 0) + T.all_sync(1) + T.shfl_sync(B[tx], 3) + T.__ffs(T.ballot_sync(tx > 3))
                     + T.cast(T.match_any_sync(B[tx]), "int32") + T.cast(T.match_all_sync(B[tx]), "int32")
                     + T.cast(T.__fns(T.cast(T.ballot_sync(tx > 1), "uint32"), 0, 3), "int32"))

    src = _source(kernel)
    for name in ("tl::__ballot_sync(", "tl::__activemask()", "tl::__any_sync(", "tl::__all_sync(",
                 "tl::__shfl_sync(", "tl::__ffsll(", "tl::__match_any_sync(", "tl::__match_all_sync(",
                 "tl::__fns("):
        assert name in src, name


def test_cumsum_over_a_row_offset_shared_region():
    @T.prim_func
    def kernel(A: T.Tensor((128, 32), T.float32), B: T.Tensor((128, 32), T.float32)):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((128, 32), T.float32)
            T.copy(A, s)
            T.cumsum(src=s[64:128, :], dim=1)
            T.copy(s, B)

    src = _source(kernel)
    # rows 64..127: element offset 64 * 32 = 2048 past the buffer's start
    assert "if (((int)threadIdx.x) < 64)" in src and "+ 2048)" in src


def test_shuffles_of_types_cuda_has_no_overload_for_compile():
    """T.shfl_* of fp8 and 8/16-bit integers (upstream PR #3056's dtypes): CUDA's __shfl*_sync have
    no overloads for them, so they travel as the bits of a 32-bit word (src/tl/warp.h); nvcc builds
    each, for sm_90a and sm_80."""
    for dtype in (T.float8_e4m3, T.float8_e5m2, T.int8, T.uint8, T.int16, T.float16, T.bfloat16):
        @T.prim_func
        def kernel(A: T.Tensor((32,), dtype), B: T.Tensor((4, 32), dtype)):
            with T.Kernel(1, threads=32):
                tx = T.get_thread_binding()
                B[0, tx] = T.shfl_sync(A[tx], 0)
                B[1, tx] = T.shfl_xor(A[tx], 1)
                B[2, tx] = T.shfl_down(A[tx], 2)
                B[3, tx] = T.shfl_up(A[tx], 2)

        for target in ("cuda -arch=sm_90a", "cuda -arch=sm_80"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tilelang.compile(kernel, target=target).ensure_cubin()
