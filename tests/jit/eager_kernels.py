"""Eager-style kernels shared by the CPU test (parse, spans) and the GPU test (run)."""

import tilelang
import tilelang.language as T


@tilelang.jit
def matmul(A, B, block_M: int = 64, block_N: int = 64, block_K: int = 32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((K, N), T.float16)
    C = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), T.float16)
        B_shared = T.alloc_shared((block_K, block_N), T.float16)
        C_local = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[by * block_M, bx * block_N])
    return C




@tilelang.jit
def scale_rows(X, alpha: float = 2.0, block: int = 128):
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float32)
    Y = T.empty((M, N), T.float32)
    S = T.empty((M,), T.float32)
    with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
        x = T.alloc_fragment((block, N), T.float32)
        s = T.alloc_fragment((block,), T.float32)
        T.copy(X[bx * block, 0], x)
        for i, j in T.Parallel(block, N):
            x[i, j] = x[i, j] * alpha
        T.reduce_sum(x, s, dim=1)
        T.copy(x, Y[bx * block, 0])
        T.copy(s, S[bx * block])
    return Y, S
