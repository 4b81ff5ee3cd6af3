"""T.ClusterKernel, T.copy_cluster and cluster barriers (CPU: generated source)."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except Exception:  # noqa: BLE001
    HAVE_NVCC = False


def _kernel(n, with_barrier=True):
    @T.prim_func
    def k(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.ClusterKernel(2, threads=128, cluster_dims=(2, 1, 1)) as pid:
            s_src = T.alloc_shared((n,), "float32")
            s_dst = T.alloc_shared((n,), "float32")
            bar = T.alloc_cluster_barrier([1])
            T.fill(s_src, 0.0)
            T.fill(s_dst, 0.0)
            T.cluster_sync()
            if pid == 0:
                for i in T.Parallel(n):
                    s_src[i] = A[i]
                if with_barrier:
                    T.copy_cluster(s_src, s_dst, dst_block=1, remote_barrier=bar[0])
                else:
                    T.copy_cluster(s_src, s_dst, dst_block=1)
            T.cluster_sync()
            if pid == 1:
                if with_barrier:
                    T.mbarrier_wait_parity(bar[0], 0)
                for i in T.Parallel(n):
                    B[i] = s_dst[i]
    return k


def test_bulk_cluster_copy():
    src = tilelang.compile(_kernel(128), out_idx=[1]).get_kernel_source()
    assert "__cluster_dims__(2, 1, 1)" in src
    assert "tl::tma_store_cluster(" in src and ", 512, " in src
    assert "map_shared_rank" not in src


def test_simt_cluster_copy_without_barrier():
    src = tilelang.compile(_kernel(128, with_barrier=False), out_idx=[1]).get_kernel_source()
    assert "tl::map_shared_rank_store(" in src and "tl::tma_store_cluster" not in src


def test_unaligned_cluster_copy_falls_back_and_says_why(capfd):
    src = tilelang.lower(_kernel(127)).source       # (lowered afresh: a cached compile says nothing)
    assert "tl::map_shared_rank_store(" in src
    assert "tl::mbarrier_arrive_cluster_release(" in src
    assert "Cluster bulk copy size 508 bytes is not a multiple of 16" in capfd.readouterr().err


def test_cluster_host_description_and_rank():
    @T.prim_func
    def k(A: T.Tensor((128,), T.int32)):
        with T.ClusterKernel(128, cluster_dims=(4, 1, 1)) as bx:
            T.cluster_arrive()
            T.cluster_wait()
            if T.get_thread_binding() == 0:
                A[bx] = T.block_rank_in_cluster()

    kernel = tilelang.compile(k)
    assert "clusterDim = {4, 1, 1}" in kernel.get_host_source()
    assert "__cluster_dims__(4, 1, 1)" in kernel.get_kernel_source()


def test_cluster_dims_validated():
    with pytest.raises(ValueError, match="cluster_dims must be positive"):
        T.ClusterKernel(4, cluster_dims=(0, 1, 1))


def test_cluster_queries_and_relaxed_arrive():
    """Upstream's cluster helpers: the launch's cluster shape, size, each block's cluster index and
    the cluster counts (block-index arithmetic), and the relaxed arrive."""
    seen = {}

    @T.prim_func
    def k(A: T.Tensor((6, 4), T.int32)):
        with T.ClusterKernel(6, 4, threads=32, cluster_dims=(2, 1, 1)) as (bx, by):
            seen.update(dims=T.get_cluster_dims(), size=T.get_cluster_size(), extents=T.get_cluster_extents(),
                        ids=len(T.get_cluster_ids()), y=T.get_cluster_id(1), z=T.get_cluster_id(2))
            T.cluster_arrive_relaxed()
            T.cluster_wait()
            if T.get_thread_binding() == 0:
                A[bx, by] = T.get_cluster_id(0) * 100 + T.block_rank_in_cluster()

    src = tilelang.lower(k, "sm_90a").source
    assert seen["dims"] == [2, 1, 1] and seen["size"] == 2 and seen["extents"] == [3, 4, 1] and seen["ids"] == 2
    assert seen["y"].name == "by" and int(seen["z"]) == 0
    assert "tl::cluster_arrive_relaxed();" in src and "tl::cluster_wait();" in src
    assert "(((((int)blockIdx.x) >> 1) * 100) + tl::cluster_ctarank())" in src


def test_cluster_queries_without_clusters():
    @T.prim_func
    def k(A: T.Tensor((8,), T.int32)):
        with T.Kernel(8, threads=32) as bx:
            assert T.get_cluster_dims() == [1, 1, 1] and T.get_cluster_size() == 1
            assert T.get_cluster_id(0).same_as(bx) and T.get_cluster_extent(0) == 8
            A[bx] = T.get_cluster_id(0)

    assert "__cluster_dims__" not in tilelang.lower(k, "sm_90a").source


@pytest.mark.skipif(not HAVE_NVCC, reason="needs nvcc")
def test_relaxed_arrive_compiles():
    @T.prim_func
    def k(A: T.Tensor((4,), T.int32)):
        with T.ClusterKernel(4, threads=32, cluster_dims=(2, 1, 1)) as bx:
            T.cluster_arrive_relaxed()
            T.cluster_wait()
            A[bx] = T.block_rank_in_cluster()

    art = tilelang.lower(k, "sm_90a")
    assert "barrier.cluster.arrive.relaxed.aligned" in nvcc.compile_ptx(art.source, "sm_90a", art.compile_flags)
