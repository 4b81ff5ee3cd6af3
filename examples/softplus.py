"""2-D elementwise softplus (the seed document's template), checked against torch."""

import torch
import torch.nn.functional as F

import tilelang
import tilelang.language as T

from _harness import has_gpu, report


@tilelang.jit(out_idx=[-1])
def softplus(M, N, block_M=64, block_N=128, dtype=T.float16, accum_dtype=T.float32):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            X_shared = T.alloc_shared((block_M, block_N), dtype)
            Y_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.copy(X[by * block_M, bx * block_N], X_shared)
            for i, j in T.Parallel(block_M, block_N):
                val = T.cast(X_shared[i, j], accum_dtype)
                Y_local[i, j] = T.log(T.cast(1.0, accum_dtype) + T.exp(val))
            T.copy(Y_local, Y[by * block_M, bx * block_N])

    return kernel


def kernels():
    return [softplus.get_prim_func(1024, 1024, 64, 128), softplus.get_prim_func(1000, 300, 64, 128)]


def main():
    if not has_gpu():
        print("no CUDA device: nothing to run")
        return
    for M, N in ((1024, 1024), (1000, 300), (8192, 8192)):
        x = torch.randn(M, N, device="cuda", dtype=torch.float16)
        k = softplus(M, N, 64, 128)
        torch.testing.assert_close(k(x), F.softplus(x.float()).half(), rtol=1e-2, atol=1e-2)
        if M == 8192:
            report(f"softplus fp16 {M}x{N}", lambda: k(x), lambda: F.softplus(x), nbytes=4 * M * N)
    print("softplus: all checks passed")


if __name__ == "__main__":
    main()
