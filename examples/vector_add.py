"""Vector add with explicit thread indexing (the seed document's kernel), checked against torch."""

import torch

import tilelang
import tilelang.language as T

from _harness import has_gpu, report


@tilelang.jit(out_idx=[-1])
def vector_add(N, BLOCK_SIZE=1024):
    @T.prim_func
    def kernel(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, BLOCK_SIZE), threads=BLOCK_SIZE) as (bx):
            tx = T.get_thread_binding(0)
            idx = bx * BLOCK_SIZE + tx
            if idx < N:
                C[idx] = A[idx] + B[idx]

    return kernel


@tilelang.jit(out_idx=[-1])
def vector_add_tiled(N, block=4096, threads=256, dtype="float16"):
    @T.prim_func
    def kernel(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            a = T.alloc_fragment((block,), dtype)
            b = T.alloc_fragment((block,), dtype)
            T.copy(A[bx * block], a)
            T.copy(B[bx * block], b)
            for i in T.Parallel(block):
                a[i] = a[i] + b[i]
            T.copy(a, C[bx * block])

    return kernel


def kernels():
    return [vector_add.get_prim_func(1 << 20), vector_add.get_prim_func(1000),
            vector_add_tiled.get_prim_func(1 << 20), vector_add_tiled.get_prim_func(5000)]


def main():
    if not has_gpu():
        print("no CUDA device: nothing to run")
        return
    for n in (1000, 1 << 20, 1 << 24):
        a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        k = vector_add(n)
        torch.testing.assert_close(k(a, b), a + b)
        if n == 1 << 24:
            report(f"vector_add fp32 n={n}", lambda: k(a, b), lambda: a + b, nbytes=12 * n)
        a16, b16 = a.half(), b.half()
        kt = vector_add_tiled(n)
        torch.testing.assert_close(kt(a16, b16), a16 + b16)
        if n == 1 << 24:
            report(f"vector_add_tiled fp16 n={n}", lambda: kt(a16, b16), lambda: a16 + b16, nbytes=6 * n)
    print("vector_add: all checks passed")


if __name__ == "__main__":
    main()
