"""T.ClusterKernel, T.copy_cluster and cluster barriers (CPU: generated source)."""

import pytest

import tilelang
import tilelang.language as T


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
