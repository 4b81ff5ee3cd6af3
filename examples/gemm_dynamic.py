"""GEMM whose M is symbolic (T.dynamic): one compiled kernel serves every batch size."""

import torch

import tilelang
import tilelang.language as T

from _harness import has_gpu, report


@tilelang.jit(out_idx=[-1])
def matmul_dynamic_m(N, K, block_M=128, block_N=128, block_K=32, dtype="float16", accum_dtype="float32"):
    M = T.dynamic("M")

    @T.prim_func
    def kernel(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return kernel


def kernels():
    return [matmul_dynamic_m.get_prim_func(1024, 1024)]


def main():
    if not has_gpu():
        print("no CUDA device: nothing to run")
        return
    kernel = matmul_dynamic_m(4096, 4096)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    for M in (1, 17, 128, 1000, 4096):
        a = torch.randn(M, 4096, device="cuda", dtype=torch.float16)
        torch.testing.assert_close(kernel(a, b), (a.float() @ b.float()).half(), rtol=1e-2, atol=1e-1)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    report("gemm dynamic M=4096 4096x4096", lambda: kernel(a, b), lambda: a @ b, flops=2.0 * 4096 ** 3)
    print("gemm_dynamic: all checks passed")


if __name__ == "__main__":
    main()
