"""Row reductions (sum and max over the last dimension) with T.reduce_*, checked against torch."""

import torch

import tilelang
import tilelang.language as T

from _harness import has_gpu, report


@tilelang.jit(out_idx=[-2, -1])
def row_reduce(M, N, block_M=8, block_N=1024, dtype="float16", accum_dtype="float32", threads=128):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), dtype), S: T.Tensor((M,), accum_dtype), Mx: T.Tensor((M,), accum_dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, block_N), accum_dtype)
            part = T.alloc_fragment((block_M,), accum_dtype)
            acc_sum = T.alloc_fragment((block_M,), accum_dtype)
            acc_max = T.alloc_fragment((block_M,), accum_dtype)
            T.clear(acc_sum)
            T.fill(acc_max, -T.infinity(accum_dtype))
            for k in T.serial(T.ceildiv(N, block_N)):
                T.copy(X[bx * block_M, k * block_N], x)
                T.reduce_sum(x, acc_sum, dim=1, clear=False)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = T.if_then_else(k * block_N + j < N, x[i, j], -T.infinity(accum_dtype))
                T.reduce_max(x, part, dim=1)
                for i in T.Parallel(block_M):
                    acc_max[i] = T.max(acc_max[i], part[i])
            T.copy(acc_sum, S[bx * block_M])
            T.copy(acc_max, Mx[bx * block_M])

    return kernel


def kernels():
    return [row_reduce.get_prim_func(4096, 4096), row_reduce.get_prim_func(1000, 3000)]


def main():
    if not has_gpu():
        print("no CUDA device: nothing to run")
        return
    for M, N in ((4096, 4096), (1000, 3000), (16384, 8192)):
        x = torch.randn(M, N, device="cuda", dtype=torch.float16)
        k = row_reduce(M, N)
        s, m = k(x)
        torch.testing.assert_close(s, x.float().sum(1), rtol=1e-3, atol=1e-2)
        torch.testing.assert_close(m, x.float().amax(1))
        if M == 16384:
            report(f"row_reduce sum+max fp16 {M}x{N}", lambda: k(x), lambda: (x.sum(1), x.amax(1)), nbytes=2 * M * N)
    print("row_reduce: all checks passed")


if __name__ == "__main__":
    main()
