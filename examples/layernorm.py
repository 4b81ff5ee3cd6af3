"""LayerNorm over the last dimension: y = (x - mean) / sqrt(var + eps) * w + b."""

import torch
import torch.nn.functional as F

import tilelang
import tilelang.language as T

from _harness import copy_bandwidth, has_gpu, report


@tilelang.jit(out_idx=[-1])
def layernorm(M, N, block_M=1, eps=1e-5, dtype="float16", accum_dtype="float32", threads=256):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Bias: T.Tensor((N,), dtype),
               Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), accum_dtype)
            d = T.alloc_fragment((block_M, N), accum_dtype)
            mean = T.alloc_fragment((block_M,), accum_dtype)
            var = T.alloc_fragment((block_M,), accum_dtype)
            T.copy(X[bx * block_M, 0], x)
            T.reduce_sum(x, mean, dim=1)
            for i in T.Parallel(block_M):
                mean[i] = mean[i] / N
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] - mean[i]
                d[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(d, var, dim=1)
            for i in T.Parallel(block_M):
                var[i] = T.rsqrt(var[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * var[i] * T.cast(W[j], accum_dtype) + T.cast(Bias[j], accum_dtype)
            T.copy(x, Y[bx * block_M, 0])

    return kernel


def ref_program(x, w, b, eps=1e-5):
    return F.layer_norm(x.float(), (x.shape[-1],), w.float(), b.float(), eps).to(x.dtype)


def kernels():
    return [layernorm.get_prim_func(4096, 4096), layernorm.get_prim_func(1001, 1024)]


def main():
    if not has_gpu():
        print("no CUDA device: nothing to run")
        return
    for M, N in ((1001, 1024), (4096, 4096), (16384, 8192)):
        x = torch.randn(M, N, device="cuda", dtype=torch.float16)
        w = torch.randn(N, device="cuda", dtype=torch.float16)
        b = torch.randn(N, device="cuda", dtype=torch.float16)
        k = layernorm(M, N)
        torch.testing.assert_close(k(x, w, b), ref_program(x, w, b), rtol=1e-2, atol=1e-2)
        if M == 16384:
            r = report(f"layernorm fp16 {M}x{N}", lambda: k(x, w, b),
                       lambda: F.layer_norm(x, (N,), w, b), nbytes=4 * M * N)
            gbs = 4 * M * N / r["ours_ms"] / 1e6
            print(f"  {gbs:.0f} GB/s = {gbs / copy_bandwidth(4 * M * N):.2f}x of a device copy")
    print("layernorm: all checks passed")


if __name__ == "__main__":
    main()
