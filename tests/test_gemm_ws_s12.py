"""The warp-specialised GEMM main loop written the way upstream's examples write it (T.Kernel,
shared A / B, a fragment accumulator, T.Pipelined(num_stages=3) of two T.copy and a T.gemm), on
sm_90a (CPU: the generated CUDA, the launch configuration and ptxas's register count).

* One consumer warpgroup (128 threads) whose accumulators leave room (128x128 floats and less)
  runs two blocks per SM: ``__launch_bounds__(256, 2)``, the producer warpgroup gives its
  registers to the consumer (setmaxnreg 40 / 216), one tile per block
  (``warp_specialize.plan_pair``).
* The ring gets one buffer more than num_stages where that keeps the blocks per SM
  (``warp_specialize.plan_ring``): the consumers hold the stage of the wgmma group kept in flight.
* The 256-thread 128x256x64 GEMM (already at upstream's speed) is unchanged: 3 buffers,
  setmaxnreg 40 / 232, persistent.
"""

from __future__ import annotations

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc

ARCH = {"target": {"kind": "cuda", "arch": "sm_90a"}}


def nn(M, bm, bn, bk, threads=128, stages=3, min_blocks=None):
    @T.prim_func
    def main(A: T.Tensor((M, M), T.float16), B: T.Tensor((M, M), T.float16), C: T.Tensor((M, M), T.float16)):
        with T.Kernel(T.ceildiv(M, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            if min_blocks is not None:
                T.annotate_min_blocks_per_sm(min_blocks)
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(M, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])
    return main


def tn(M, bm, bn, bk, threads=256, stages=3):
    @T.prim_func
    def main(A: T.Tensor((M, M), T.float16), B: T.Tensor((M, M), T.float16), C: T.Tensor((M, M), T.float16)):
        with T.Kernel(T.ceildiv(M, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bn, bk), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            C_s = T.alloc_shared((bm, bn), T.float16)
            T.use_swizzle(panel_size=10, enable=True)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(M, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * bm, bx * bn])
    return main


def build(func, **configs):
    return tilelang.compile(func, out_idx=[-1], pass_configs=configs or None, **ARCH)


def ring(src: str) -> int:
    """Buffers of the mbarrier ring: the full barriers thread 0 initialises with count 1."""
    return len(re.findall(r"tl::mbarrier_init\([^;]*\), 1\);", src))


def consumer_loop(src: str) -> str:
    at = src.index("for (int k = 0;")
    return src[at:src.index("tl::wgmma_wait<0", at)]


def test_one_warpgroup_128x128x32_runs_two_blocks_per_sm_with_four_buffers():
    k = build(nn(1024, 128, 128, 32))
    src, art = k.get_kernel_source(), k.artifact
    assert "__launch_bounds__(256, 2)" in src
    assert src.count("tl::setmaxnreg_dec<40>();") == 1 and src.count("tl::setmaxnreg_inc<216>();") == 1
    assert src.index("setmaxnreg_dec<40>") < src.index("if (((int)threadIdx.x) == 128)")   # the whole warpgroup
    assert ring(src) == 4
    # 4 stages of 8 KiB A + 8 KiB B, the epilogue tile on their bytes, 4 full / empty pairs
    assert art.dynamic_smem == 64 * 1024 + 2 * 4 * 8
    assert art.grid == ["8", "8", "1"] and art.block == [256, 1, 1]   # one tile per block
    loop = consumer_loop(src)
    assert "tl::mbarrier_wait" in loop and "wgmma_gemm_ss_async<128, 128, 32, 1" in loop
    assert "tl::wgmma_wait<1, 128>" in loop
    # the previous stage goes back once its wgmma retired: (k - 1) mod 4, by lane 0 of each warp
    assert re.search(r"tl::mbarrier_arrive\(\(&\(\(\(uint64_t\*\)smem\)\[\(\(\(k \+ 3\) & 3\) \+ \d+\)\]\)\)\)", loop)


def test_one_warpgroup_128x128x64_pairs_but_keeps_three_buffers():
    # 3 x 32 KiB: a fourth buffer would leave room for one block per SM only
    k = build(nn(1024, 128, 128, 64))
    src, art = k.get_kernel_source(), k.artifact
    assert "__launch_bounds__(256, 2)" in src and "setmaxnreg_inc<216>" in src
    assert ring(src) == 3 and art.dynamic_smem == 96 * 1024 + 2 * 3 * 8
    assert 2 * art.dynamic_smem <= 227 * 1024
    # two blocks instead of one persistent block (which would keep the ring apart from the epilogue)
    assert art.grid == ["8", "8", "1"] and "num_blocks()" not in src


def test_one_warpgroup_64x128x64_pairs_with_four_buffers():
    k = build(nn(1024, 64, 128, 64))
    src, art = k.get_kernel_source(), k.artifact
    assert "__launch_bounds__(256, 2)" in src and ring(src) == 4
    assert art.dynamic_smem == 4 * 24 * 1024 + 2 * 4 * 8


def test_two_warpgroups_128x256x64_is_unchanged():
    # (its 64 KiB epilogue stage whole: by default it goes out in 64-column chunks, which leaves room
    # for a fourth buffer, stage_epilogue.chunked)
    k = build(tn(1024, 128, 256, 64), **{"tl.enable_chunked_epilogue": False})
    src, art = k.get_kernel_source(), k.artifact
    assert "__launch_bounds__(384)" in src and "__launch_bounds__(384," not in src
    assert "setmaxnreg_dec<40>" in src and "setmaxnreg_inc<232>" in src and "216" not in src
    assert ring(src) == 3 and "num_blocks()" in src          # persistent, three buffers
    assert "tl::wgmma_wait<1, 128>" in src
    chunked = build(tn(1024, 128, 256, 64)).get_kernel_source()
    assert ring(chunked) == 4 and "num_blocks()" in chunked and "setmaxnreg_inc<232>" in chunked


def test_two_warpgroups_128x128x64_gets_a_fourth_buffer_and_stays_persistent():
    k = build(tn(1024, 128, 128, 64))
    src, art = k.get_kernel_source(), k.artifact
    assert ring(src) == 4 and "num_blocks()" in src and "__launch_bounds__(384)" in src
    # 4 x 32 KiB ring + the 32 KiB epilogue tile of its own (persistent) + barriers
    assert art.dynamic_smem <= 227 * 1024 and art.dynamic_smem >= 5 * 32 * 1024


def test_pass_configs_turn_the_pair_and_the_extra_buffer_off():
    src = build(nn(1024, 128, 128, 32), **{"tl.disable_block_pair": True}).get_kernel_source()
    assert "__launch_bounds__(256)" in src and "setmaxnreg" not in src and ring(src) == 4
    src = build(nn(1024, 128, 128, 32), **{"tl.disable_ring_extra_stage": True}).get_kernel_source()
    assert "__launch_bounds__(256, 2)" in src and ring(src) == 3


def test_a_kernel_that_sets_its_blocks_per_sm_is_not_paired():
    src = build(nn(1024, 128, 128, 32, min_blocks=1)).get_kernel_source()
    assert "__launch_bounds__(256, 1)" in src and "setmaxnreg" not in src


def test_wide_accumulators_are_not_paired():
    # 128x192 floats over one warpgroup: 192 registers of accumulators alone, more than 216 leave room for
    src = build(nn(768, 128, 192, 32)).get_kernel_source()
    assert "setmaxnreg" not in src and "__launch_bounds__(256)" in src


def _has_nvcc() -> bool:
    try:
        nvcc.find_nvcc()
        return True
    except nvcc.NVCCError:
        return False


@pytest.mark.skipif(not _has_nvcc(), reason="needs nvcc")
def test_ptxas_fits_the_paired_consumer_in_its_registers():
    info = build(nn(1024, 128, 128, 32)).ptxas_info()
    # the launch bound fixes the count at 64K / (2 x 256); the consumer's 216 hold it without spills
    assert info.registers == 128
    assert info.spill_stores == 0 and info.spill_loads == 0
