"""Split-K GEMM: each K slice is its own thread block, partial tiles meet through T.atomic_add."""

import torch

import tilelang
import tilelang.language as T

from _harness import has_gpu, report


@tilelang.jit
def matmul_splitk(M, N, K, split_k=4, block_M=128, block_N=128, block_K=32, dtype="float16",
                  accum_dtype="float32"):
    # Each split covers a whole number of block_K tiles so that splits never overlap; the last
    # one may run past K, where the copies read zeros.
    k_per_split = T.ceildiv(T.ceildiv(K, split_k), block_K) * block_K

    @T.prim_func
    def kernel(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=128) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(k_per_split, block_K), num_stages=3):
                T.copy(A[by * block_M, bz * k_per_split + k * block_K], A_shared)
                T.copy(B[bz * k_per_split + k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.atomic_add(C[by * block_M, bx * block_N], C_local)

    return kernel


def kernels():
    return [matmul_splitk.get_prim_func(512, 512, 4096), matmul_splitk.get_prim_func(256, 384, 2048, split_k=8)]


def main():
    if not has_gpu():
        print("no CUDA device: nothing to run")
        return
    for M, N, K, s in ((512, 512, 4096, 4), (256, 384, 2048, 8), (128, 128, 16384, 16)):
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        kernel = matmul_splitk(M, N, K, s)
        c = torch.zeros(M, N, device="cuda")
        kernel(a, b, c)
        torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=5e-2)
        if K == 16384:
            report(f"gemm split-k={s} {M}x{N}x{K}", lambda: (c.zero_(), kernel(a, b, c)), lambda: a @ b,
                   flops=2.0 * M * N * K)
    print("gemm_splitk: all checks passed")


if __name__ == "__main__":
    main()
