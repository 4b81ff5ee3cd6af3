"""RMSNorm: y = x / sqrt(mean(x^2) + eps) * w, one block of rows at a time."""

import torch

import tilelang
import tilelang.language as T

from _harness import copy_bandwidth, has_gpu, report


@tilelang.jit(out_idx=[-1])
def rmsnorm(M, N, block_M=1, eps=1e-6, dtype="float16", accum_dtype="float32", threads=256):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), accum_dtype)
            sq = T.alloc_fragment((block_M, N), accum_dtype)
            w = T.alloc_fragment((N,), accum_dtype)
            ss = T.alloc_fragment((block_M,), accum_dtype)
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(block_M):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * ss[i] * T.cast(W[j], accum_dtype)
            T.copy(x, Y[bx * block_M, 0])

    return kernel


def ref_program(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def kernels():
    return [rmsnorm.get_prim_func(4096, 4096), rmsnorm.get_prim_func(1001, 2048)]


def main():
    if not has_gpu():
        print("no CUDA device: nothing to run")
        return
    for M, N in ((1001, 2048), (4096, 4096), (16384, 4096)):
        x = torch.randn(M, N, device="cuda", dtype=torch.float16)
        w = torch.randn(N, device="cuda", dtype=torch.float16)
        k = rmsnorm(M, N)
        torch.testing.assert_close(k(x, w), ref_program(x, w), rtol=1e-2, atol=1e-2)
        if M == 16384:
            r = report(f"rmsnorm fp16 {M}x{N}", lambda: k(x, w), lambda: ref_program(x, w), nbytes=4 * M * N)
            gbs = 4 * M * N / r["ours_ms"] / 1e6
            print(f"  {gbs:.0f} GB/s = {gbs / copy_bandwidth(4 * M * N):.2f}x of a device copy")
    print("rmsnorm: all checks passed")


if __name__ == "__main__":
    main()
