"""Example kernel for the pass visualizer: C = relu(A @ B + bias), bias broadcast over rows.

    python -m tilelang.tools.pass_visualizer.viewer tilelang/tools/pass_visualizer/examples/gemm_relu.py \
        --set M=1024 --set N=1024 --set K=1024 --set block_M=128 --set block_N=128 --set block_K=32
"""

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def gemm_relu(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float32"):

    @T.prim_func
    def main(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        bias: T.Tensor((N,), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)

            # epilogue on the accumulator, before the write-back
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j] + bias[bx * block_N + j], 0)

            T.copy(C_local, C[by * block_M, bx * block_N])

    return main
