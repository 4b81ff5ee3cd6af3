"""GEMM with fused ReLU and sigmoid epilogues on the accumulator fragment."""

import torch

import tilelang
import tilelang.language as T

from _harness import has_gpu, report


@tilelang.jit(out_idx=[-1])
def matmul_act(M, N, K, act="relu", block_M=128, block_N=128, block_K=32, dtype="float16", accum_dtype="float32"):
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
            for i, j in T.Parallel(block_M, block_N):
                if act == "relu":
                    C_local[i, j] = T.max(C_local[i, j], 0)
                else:
                    C_local[i, j] = T.sigmoid(C_local[i, j])
            T.copy(C_local, C[by * block_M, bx * block_N])

    return kernel


def ref_program(a, b, act):
    c = a.float() @ b.float()
    return (torch.relu(c) if act == "relu" else torch.sigmoid(c)).to(a.dtype)


def kernels():
    return [matmul_act.get_prim_func(512, 512, 512, "relu"), matmul_act.get_prim_func(512, 512, 512, "sigmoid")]


def main():
    if not has_gpu():
        print("no CUDA device: nothing to run")
        return
    for act in ("relu", "sigmoid"):
        for M, N, K in ((512, 512, 512), (1000, 1000, 1000), (4096, 4096, 4096)):
            a = torch.randn(M, K, device="cuda", dtype=torch.float16)
            b = torch.randn(K, N, device="cuda", dtype=torch.float16)
            k = matmul_act(M, N, K, act)
            torch.testing.assert_close(k(a, b), ref_program(a, b, act), rtol=1e-2, atol=1e-2)
            if M == 4096:
                fn = torch.relu if act == "relu" else torch.sigmoid
                report(f"gemm+{act} fp16 {M}x{N}x{K}", lambda: k(a, b), lambda: fn(a @ b), flops=2.0 * M * N * K)
    print("gemm_epilogue: all checks passed")


if __name__ == "__main__":
    main()
