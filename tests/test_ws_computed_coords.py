"""Warp specialisation refuses a pipelined loop whose copies are addressed by values the kernel
computes before the loop (a grouped GEMM's batch index and row offset, read from its batch
tables): the TMA producer warpgroup runs only the loop, so it would load from coordinates it never
computed (upstream's grouped_gemm example gave wrong results on the wgmma path). Such kernels keep
the cp.async pipeline on every thread. GPU: tests/gpu/test_ws_computed_coords_gpu.py."""

from __future__ import annotations

import tilelang
import tilelang.language as T

SM90 = "cuda -arch=sm_90a"


def grouped(batch_sizes=(128, 256), K=256, N=256, block_M=64, block_N=128, block_K=64, threads=128):
    total = sum(batch_sizes)
    count = len(batch_sizes)
    m_blocks = sum(-(-s // block_M) for s in batch_sizes)

    @T.prim_func
    def main(A: T.Tensor((total, K), "float16"), B: T.Tensor((count, K, N), "float16"),
             offsets: T.Tensor((count,), "int32"), padded: T.Tensor((count,), "int32"),
             C: T.Tensor((total, N), "float16")):
        with T.Kernel(m_blocks, T.ceildiv(N, block_N), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            g = T.alloc_var("int32")
            g = 0
            for i in range(count):
                g = T.if_then_else(bx * block_M >= padded[i], i, g)
            m_start = bx * block_M - padded[g] + offsets[g]
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[m_start, k * block_K], A_s)
                T.copy(B[g, k * block_K, by * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[m_start, by * block_N])

    return main


def plain(M=256, N=256, K=256, block=128, threads=128):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block, 64), "float16")
            B_s = T.alloc_shared((64, block), "float16")
            C_l = T.alloc_fragment((block, block), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=3):
                T.copy(A[by * block, k * 64], A_s)
                T.copy(B[k * 64, bx * block], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block, bx * block])

    return main


def test_copies_addressed_by_computed_values_keep_the_cp_async_pipeline():
    src = tilelang.compile(grouped(), target=SM90).get_kernel_source()
    assert "wgmma_gemm" in src
    assert "tma_load" not in src and "setmaxnreg" not in src and "cp_async" in src


def test_copies_addressed_by_block_indices_are_still_warp_specialised():
    src = tilelang.compile(plain(), target=SM90).get_kernel_source()
    assert "tl::tma_load_2d" in src
