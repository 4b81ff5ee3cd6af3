"""GEMM on tensor cores (fp16 / bf16, every transpose combination), checked against torch.matmul."""

import argparse

import torch

import tilelang
import tilelang.language as T

from _harness import has_gpu, report


@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M=128, block_N=128, block_K=32, trans_A=False, trans_B=False,
           dtype="float16", accum_dtype="float32", num_stages=3, threads=128, smem_epilogue=False):
    A_shape = (K, M) if trans_A else (M, K)
    B_shape = (N, K) if trans_B else (K, N)
    A_shared_shape = (block_K, block_M) if trans_A else (block_M, block_K)
    B_shared_shape = (block_N, block_K) if trans_B else (block_K, block_N)
    # Blocks run in panels of `panel` block rows: the ~132 blocks in flight on an H100 / H200 then
    # cover r rows and 132 / r columns of tiles and, per K step, read (r * block_M + 132 / r *
    # block_N) * block_K elements from L2, fewest at r = sqrt(132 * block_N / block_M): 16 for
    # 128x256 tiles (1-2 % faster than 10 at 4096^3 and 8192^3, benchmarks/RESULTS.md, session 8).
    panel = max(1, round((132 * block_N / block_M) ** 0.5))

    @T.prim_func
    def kernel(A: T.Tensor(A_shape, dtype), B: T.Tensor(B_shape, dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared(A_shared_shape, dtype)
            B_shared = T.alloc_shared(B_shared_shape, dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(panel)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                if trans_A:
                    T.copy(A[k * block_K, by * block_M], A_shared)
                else:
                    T.copy(A[by * block_M, k * block_K], A_shared)
                if trans_B:
                    T.copy(B[bx * block_N, k * block_K], B_shared)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_A=trans_A, transpose_B=trans_B)
            if smem_epilogue:   # through shared memory: on sm_90a a swizzled tile and TMA stores
                C_shared = T.alloc_shared((block_M, block_N), dtype)
                T.copy(C_local, C_shared)
                T.copy(C_shared, C[by * block_M, bx * block_N])
            else:
                T.copy(C_local, C[by * block_M, bx * block_N])

    return kernel


def ref_program(A, B, trans_A=False, trans_B=False):
    A = A.T if trans_A else A
    B = B.T if trans_B else B
    return (A.float() @ B.float()).to(A.dtype)


def kernels():
    out = []
    for dtype in ("float16", "bfloat16"):
        for ta in (False, True):
            for tb in (False, True):
                out.append(matmul.get_prim_func(256, 256, 256, trans_A=ta, trans_B=tb, dtype=dtype))
    out.append(matmul.get_prim_func(1000, 1000, 1000))
    return out


def run(M, N, K, trans_A=False, trans_B=False, dtype="float16", bench=True, **cfg):
    tdtype = getattr(torch, dtype)
    kernel = matmul(M, N, K, trans_A=trans_A, trans_B=trans_B, dtype=dtype, **cfg)
    a = torch.randn(*((K, M) if trans_A else (M, K)), device="cuda", dtype=tdtype)
    b = torch.randn(*((N, K) if trans_B else (K, N)), device="cuda", dtype=tdtype)
    c = kernel(a, b)
    torch.testing.assert_close(c, ref_program(a, b, trans_A, trans_B), rtol=1e-2, atol=1e-2)
    if bench:
        aa = a.T if trans_A else a
        bb = b.T if trans_B else b
        return report(f"gemm {dtype} {M}x{N}x{K} tA={int(trans_A)} tB={int(trans_B)}",
                      lambda: kernel(a, b), lambda: aa @ bb, flops=2.0 * M * N * K)
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=4096)
    args = parser.parse_args()
    if not has_gpu():
        print("no CUDA device: nothing to run (the CPU check compiles kernels() instead)")
        return
    for dtype in ("float16", "bfloat16"):
        for ta in (False, True):
            for tb in (False, True):
                run(args.size, args.size, args.size, ta, tb, dtype)
    print("gemm: all checks passed")


if __name__ == "__main__":
    main()
