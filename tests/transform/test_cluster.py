"""Experimental clusters of two blocks for sm_90a GEMMs (``tl.cluster_multicast``): the blocks
at blockIdx.y = 2m and 2m + 1 share the B tile, each loading half of its slabs with TMA multicast
into both; consumer warps release each stage on both blocks' ``empty`` barriers."""

import sys
from pathlib import Path

import pytest

from tilelang.engine.lower import lower

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import gemm  # noqa: E402

CLUSTER = {"tl.cluster_multicast": True}
CFG = dict(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256)


def test_b_tile_is_multicast_across_a_cluster_of_two():
    art = lower(gemm.matmul.get_prim_func(2048, 2048, 1024, **CFG), target="sm_90a", pass_configs=CLUSTER)
    src = art.source
    assert art.grid == ["8", "16", "1"]                          # the launch grid is unchanged
    assert "__global__ void __cluster_dims__(1, 2, 1) __launch_bounds__(384)" in src
    producer = src[src.index("tl::prefetch_tma_descriptor"):src.index("} else {")]
    # A (128 x 64: one slab) from this block only; B (64 x 256: four slabs), two of them from
    # each block of the cluster, chosen by the rank blockIdx.y % 2, into both blocks
    assert producer.count("tl::tma_load_2d(") == 1 and producer.count("tl::tma_load_multicast_2d(") == 2
    assert "(((int)blockIdx.y) & 1) * 8192" in producer
    assert "49152" in producer                                  # each block still expects all 48 KiB
    # empty[s] counts the 8 consumer warps of both blocks; each warp arrives on both, lane r on rank r
    assert src.count(", 16);") == 4
    consumer = src[src.index("} else {"):]
    assert consumer.count("tl::mbarrier_arrive_cluster(") == 1 and "tl::mbarrier_arrive(" not in consumer
    assert "(((int)threadIdx.x) & 31) < 2)" in consumer
    assert "((uint)(((int)threadIdx.x) & 31)));" in consumer
    # the cluster meets after the barrier init and before exit
    assert src.count("tl::cluster_sync();") == 2
    assert "NUM_SMS" not in art.grid[0]                           # clusters are not persistent yet


@pytest.mark.parametrize("M", [128 * 3, 16])
def test_no_cluster_for_an_odd_number_of_row_blocks(M):
    art = lower(gemm.matmul.get_prim_func(M, 1024, 512, **CFG), target="sm_90a", pass_configs=CLUSTER)
    assert "__cluster_dims__" not in art.source and "multicast" not in art.source


def test_cluster_ptx():
    from tilelang.jit import nvcc

    art = lower(gemm.matmul.get_prim_func(1024, 1024, 512, **CFG), target="sm_90a", pass_configs=CLUSTER)
    ptx = nvcc.compile_ptx(art.source, "sm_90a", art.compile_flags)
    assert ".reqnctapercluster 1, 2, 1" in ptx and "multicast::cluster" in ptx
    assert "mapa.shared::cluster" in ptx and "barrier.cluster.arrive" in ptx
