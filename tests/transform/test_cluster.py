"""Experimental clusters of two blocks for sm_90a GEMMs (``tl.cluster_multicast``). One tile a
block (``tl.disable_persistent``): the blocks at blockIdx.y = 2m and 2m + 1 share the B tile, each
loading half of its slabs (or of its rows, one slab) with TMA multicast into both. Persistent (the
default grid): clusters (2, 1, 1) take tiles t and t ^ 1, and each operand is multicast on the
tiles where both blocks' coordinates agree (flags the producer sets per tile), else loaded whole by
each. Consumer warps release each stage on both blocks' ``empty`` barriers."""

import sys
from pathlib import Path

import pytest

from tilelang.engine.lower import lower
from tilelang.jit import nvcc

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except Exception:  # noqa: BLE001
    HAVE_NVCC = False

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import gemm  # noqa: E402

CLUSTER = {"tl.cluster_multicast": True, "tl.disable_persistent": True}
PERSISTENT_CLUSTER = {"tl.cluster_multicast": True}
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
    assert "NUM_SMS" not in art.grid[0]                           # one tile a block


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))
from test_cluster_persistent_gpu import gemm_tn  # noqa: E402


def test_one_slab_is_split_by_rows():
    """Upstream's GEMM (B is N x K: a 256 x 64 tile, one 128-byte slab): each block of the cluster
    loads 128 of its rows into both, through a tensor map whose box is 128 rows high."""
    art = lower(gemm_tn(2048, 2048, 1024, 128, 256, 64, 3, 256, 0, "bfloat16"), target="sm_90a", pass_configs=CLUSTER)
    producer = art.source[art.source.index("tl::prefetch_tma_descriptor"):art.source.index("} else {")]
    assert producer.count("tl::tma_load_multicast_2d(") == 1
    assert "(((int)blockIdx.y) & 1) * 8192)" in producer and "(((int)blockIdx.y) & 1) * 128)" in producer
    boxes = {tuple(m["box"]) for m in art.tensormaps}
    assert (64, 128) in boxes and (64, 256) not in boxes


def _persistent(M, N, K, panel, tile=(128, 256, 64, 3, 256)):
    return lower(gemm_tn(M, N, K, *tile, panel, "bfloat16"), target="sm_90a", pass_configs=PERSISTENT_CLUSTER)


def test_persistent_cluster_pairs_tiles_and_multicasts_where_they_agree():
    art = _persistent(4096, 4096, 1024, 10)
    src = art.source
    assert "__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(384)" in src
    assert art.grid == ["min(512, NUM_SMS) // 2 * 2", "1", "1"]     # an even grid
    producer = src[src.index("tl::prefetch_tma_descriptor"):src.index("tl::setmaxnreg_inc")]
    # the peer's tile t ^ 1 and its swizzled indices, then one flag an operand
    assert "int tile_q = ((((int)blockIdx.x) + (tile_it_p * num_blocks)) ^ 1);" in producer
    assert "int by_swz_q = " in producer and "int bx_swz_q = " in producer
    assert "((by_swz_p * 128) == (by_swz_q * 128))" in producer and "((bx_swz_p * 256) == (bx_swz_q * 256))" in producer
    # agreeing: this block's half of the rows into both; else its whole tile in two half-height boxes
    assert producer.count("tl::tma_load_multicast_2d(") == 2 and producer.count("tl::tma_load_2d(") == 4
    assert "(tl::cluster_ctarank() * 8192)" in producer and "(tl::cluster_ctarank() * 128)" in producer
    assert {tuple(m["box"]) for m in art.tensormaps[:2]} == {(64, 64), (64, 128)}
    # the user's swizzle stays the user's (not re-laid over cluster rows)
    assert "(((int)blockIdx.y) & 1)" not in src and "blockIdx.y" not in src
    # the ring keeps its extra buffer (four stages for three), both blocks' warps release it
    assert src.count(", 16);") == 4 and "mbarrier_arrive_cluster" in src
    assert src.count("tl::cluster_sync();") == 2


@pytest.mark.parametrize("M,N", [(128 * 3, 256 * 3), (128 * 5, 256)])
def test_no_persistent_cluster_for_an_odd_number_of_tiles(M, N):
    art = _persistent(M, N, 512, 0)
    assert "__cluster_dims__" not in art.source and "multicast" not in art.source
    assert "tile_it" in art.source                                  # still persistent


@pytest.mark.skipif(not HAVE_NVCC, reason="needs nvcc")
@pytest.mark.parametrize("M,N,K,panel,tile", [(4096, 4096, 1024, 10, (128, 256, 64, 3, 256)),
                                              (384, 1024, 4096, 3, (128, 128, 64, 3, 256))])
def test_persistent_cluster_compiles(M, N, K, panel, tile):
    from tilelang.jit import nvcc

    art = _persistent(M, N, K, panel, tile)
    ptx = nvcc.compile_ptx(art.source, "sm_90a", art.compile_flags)
    assert ".reqnctapercluster 2, 1, 1" in ptx and "multicast::cluster" in ptx


@pytest.mark.parametrize("M", [128 * 3, 16])   # (one tile a block; persistent: below)
def test_no_cluster_for_an_odd_number_of_row_blocks(M):
    art = lower(gemm.matmul.get_prim_func(M, 1024, 512, **CFG), target="sm_90a", pass_configs=CLUSTER)
    assert "__cluster_dims__" not in art.source and "multicast" not in art.source


def test_cluster_ptx():
    from tilelang.jit import nvcc

    art = lower(gemm.matmul.get_prim_func(1024, 1024, 512, **CFG), target="sm_90a", pass_configs=CLUSTER)
    ptx = nvcc.compile_ptx(art.source, "sm_90a", art.compile_flags)
    assert ".reqnctapercluster 1, 2, 1" in ptx and "multicast::cluster" in ptx
    assert "mapa.shared::cluster" in ptx and "barrier.cluster.arrive" in ptx
