"""Tensors of 2**31 elements or more index with 64-bit offsets (codegen/wide_index.py): upstream's
dsa_hisa/clean_and_maintain_logits at 65536 x 65536 (CPU: generated source)."""

import tilelang
import tilelang.language as T

SM90 = "cuda -arch=sm_90a"


def _src(func):
    return tilelang.compile(func, target=SM90).get_kernel_source()


def test_element_stores_into_a_2_to_the_32_tensor_use_int64_offsets():
    @T.prim_func
    def k(A: T.Tensor((65536, 65536), T.float32), S: T.Tensor((65536,), T.int32)):
        with T.Kernel(65536, threads=512) as bx:
            tx = T.get_thread_binding()
            s = S[bx]
            for n in T.serial(128):
                if n * 512 + tx < s:
                    A[bx, n * 512 + tx] = -T.infinity(T.float32)

    src = _src(k)
    assert "(((int64_t)((int)blockIdx.x)) * (int64_t)65536)" in src
    assert "S[((int)blockIdx.x)]" in src        # the small tensor keeps 32-bit indices


def test_tile_copies_of_a_wide_tensor_use_int64_offsets():
    M, N = 98304, 32768      # 3 * 2**30 elements: the 32-bit product of the extents wraps negative
    @T.prim_func
    def k(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // 128, M // 64, threads=128) as (bx, by):
            f = T.alloc_fragment((64, 128), T.float16)
            T.copy(A[by * 64, bx * 128], f)
            for i, j in T.Parallel(64, 128):
                f[i, j] = f[i, j] * 2.0
            T.copy(f, B[by * 64, bx * 128])

    src = _src(k)
    assert "(((int64_t)((int)blockIdx.y)) * (int64_t)2097152)" in src
    assert src.count("int64_t") >= 4


def test_offsets_that_fit_stay_32_bit():
    """2**31 elements exactly: the last offset, 2**31 - 1, fits in int32 (TVM narrows it back)."""
    @T.prim_func
    def k(A: T.Tensor((65536, 32768), T.float32)):
        with T.Kernel(65536, threads=128) as bx:
            tx = T.get_thread_binding()
            A[bx, tx] = 1.0

    assert "int64_t" not in _src(k).split("__global__")[-1]


def test_smaller_tensors_are_unchanged():
    @T.prim_func
    def k(A: T.Tensor((32768, 65535), T.float32)):
        with T.Kernel(32768, threads=128) as bx:
            tx = T.get_thread_binding()
            A[bx, tx] = 1.0

    assert "int64_t" not in _src(k).split("__global__")[-1]
