"""TMA multicast loads (``T.tma_copy(..., cluster_mask=)``, ``T.copy_cluster(..., cluster_mask=)``)
and the default TMA store of a plain shared -> global ``T.copy`` on sm_90, checked on CPU through
the generated source, the tensor maps and the errors."""

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.diagnostics.errors import TileLangCompileError

SM90 = "cuda -arch=sm_90a"


def _source(func, **kw):
    k = tilelang.compile(func, target=SM90, **kw)
    return k.get_kernel_source(), k.artifact


def ring_multicast(iters=8, slots=4, tile=64, mask=0b11, cluster=2):
    @T.prim_func
    def main(A: T.Tensor((iters, tile, tile), T.float32), B: T.Tensor((cluster, iters, tile, tile), T.float32)):
        with T.ClusterKernel(cluster, threads=128, cluster_dims=(cluster, 1, 1)) as pid:
            a_shared = T.alloc_shared((slots, tile, tile), dtype=T.float32)
            mbars = T.alloc_barrier([128] * slots)
            for k in T.serial(iters):
                slot = k % slots
                T.tma_copy(A[k, :, :], a_shared[slot, :, :], barrier=mbars[slot], cluster_mask=mask)
                T.mbarrier_arrive(mbarrier=mbars[slot])
                T.mbarrier_wait_parity(mbarrier=mbars[slot], parity=(k // slots) % 2)
                T.copy(a_shared[slot, :, :], B[pid, k, :, :])
    return main


def test_tma_copy_multicast_bulk():
    src, _ = _source(ring_multicast())
    # the peers' barriers are initialised cluster-wide before any block multicasts into them
    init = src.index("tl::fence_barrier_init();")
    assert src.index("tl::cluster_sync();", init) < src.index("for (int k = 0;")
    assert "__syncthreads();\n  for (int k" not in src
    # rank 0 (the lowest of the mask) loads for both; the other block of the mask issues nothing
    assert "if (tl::cluster_ctarank() == 0) {\n        tl::tma_load_multicast_bulk(" in src
    assert re.search(r"tl::tma_load_multicast_bulk\(.*, 16384, .*\(ushort\)3\);", src)
    assert "if (((3 >> tl::cluster_ctarank()) & 1) == 0) {\n          tl::tma_load_bulk(" in src
    # every block still expects the tile's bytes on its own barrier
    assert src.count("tl::mbarrier_expect_tx(") == 1


def test_tma_copy_multicast_partial_mask_blocks_outside_load_their_own():
    src, _ = _source(ring_multicast(mask=0b1100, cluster=4))
    assert "if (tl::cluster_ctarank() == 2) {" in src and "(ushort)12);" in src
    assert "((12 >> tl::cluster_ctarank()) & 1) == 0" in src


def demo(mask=0b0011, cluster=(4, 1, 1), **copy_kw):
    M = N = 1024
    bm, bn = 128, 64

    @T.prim_func
    def kernel(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16)):
        with T.ClusterKernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128, cluster_dims=cluster) as (bx, by):
            A_shared = T.alloc_shared((bm, bn), T.float16)
            T.copy_cluster(A[by * bm, bx * bn], A_shared, cluster_mask=mask, **copy_kw)
            T.copy(A_shared, B[by * bm, bx * bn])
    return kernel


def test_copy_cluster_multicast_is_a_synchronous_box_load():
    src, art = _source(demo())
    assert art.tensormaps[0] == {"name": "tl_tmap_0", "param": 0, "dtype": "float16", "dims": [1024, 1024],
                                 "strides": [2048], "box": [64, 128], "swizzle": 0}
    body = src[src.index("tl::mbarrier_init("):]
    # init, a cluster-wide barrier, then arm + issue, then every thread waits
    assert body.index("tl::cluster_sync();") < body.index("tl::mbarrier_arrive_expect_tx(") \
        < body.index("tl::tma_load_multicast_2d(") < body.index("tl::mbarrier_wait(")
    assert "(ushort)3, (((int)blockIdx.x) * 64), (((int)blockIdx.y) * 128));" in src
    assert "tl::tma_load_2d(" in src        # ranks 2 and 3 load their own tile


def test_multicast_errors():
    with pytest.raises(TileLangCompileError, match="T.ClusterKernel"):
        @T.prim_func
        def no_cluster(A: T.Tensor((64, 64), T.float32)):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared((64, 64), T.float32)
                bar = T.alloc_barrier([128])
                T.tma_copy(A[0:64, 0:64], s, barrier=bar[0], cluster_mask=1)
                T.mbarrier_arrive(bar[0])
                T.mbarrier_wait_parity(bar[0], 0)
        tilelang.compile(no_cluster, target=SM90)
    with pytest.raises(TileLangCompileError, match="beyond the cluster's 2"):
        tilelang.compile(ring_multicast(mask=0b111), target=SM90)
    with pytest.raises(ValueError, match="compile-time bitmask"):
        ring_multicast(mask=0)
    with pytest.raises(ValueError, match="not both"):
        demo(dst_block=1)


def auto_store(M, N, bm, bn, dtype=T.float16, **copy_kw):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_shared = T.alloc_shared((bm, bn), dtype)
            T.copy(A[by * bm, bx * bn], A_shared)
            T.copy(A_shared, C[by * bm, bx * bn], **copy_kw)
    return main


NO_WS = {"tl.disable_warp_specialized": True}


def test_plain_2d_store_is_a_tma_box_store():
    src, art = _source(auto_store(256, 256, 128, 128), out_idx=[1], pass_configs=NO_WS)
    assert art.tensormaps == [{"name": "tl_tmap_0", "param": 1, "dtype": "float16", "dims": [256, 256],
                               "strides": [512], "box": [128, 128], "swizzle": 0}]
    body = src[src.index("tl::fence_proxy_async();"):]
    assert body.index("__syncthreads();") < body.index("if (((int)threadIdx.x) == 0) {") \
        < body.index("tl::tma_store_2d(TL_TMAP(0), (&(((half*)smem)[0])), (((int)blockIdx.x) * 128), "
                     "(((int)blockIdx.y) * 128));") < body.index("tl::tma_store_arrive();") \
        < body.index("tl::tma_store_wait<0, true>();")


def test_full_tensor_store_is_one_bulk_copy():
    @T.prim_func
    def main(C: T.Tensor((128, 128), T.float32)):
        with T.Kernel(threads=128):
            C_shared = T.alloc_shared((128, 128), T.float32)
            T.copy(C_shared, C)

    src, art = _source(main, pass_configs=NO_WS)
    assert "tl::tma_store_bulk((&(C[0])), (&(((float*)smem)[0])), 65536);" in src
    assert "CUtensorMap" not in src and art.tensormaps == []


@pytest.mark.parametrize("kw", [{"disable_tma": True}, {"prefer_instruction": "sync"}])
def test_plain_2d_store_opt_out(kw):
    src, art = _source(auto_store(256, 256, 128, 128, **kw), out_idx=[1], pass_configs=NO_WS)
    assert "tma_store" not in src and art.tensormaps == []


def test_plain_2d_store_stays_threaded_before_sm90():
    k = tilelang.compile(auto_store(256, 256, 128, 128), target="cuda -arch=sm_80", out_idx=[1])
    assert "tma_store" not in k.get_kernel_source()


def test_copy_cluster_multicast_3d_box_and_3d_store():
    @T.prim_func
    def k3(A: T.Tensor((8, 256, 128), T.float16), B: T.Tensor((8, 256, 128), T.float16)):
        with T.ClusterKernel(8, 2, threads=128, cluster_dims=(2, 1, 1)) as (bx, by):
            s = T.alloc_shared((128, 64), T.float16)
            T.copy_cluster(A[bx, by * 128, 0], s, cluster_mask=0b11)
            T.copy(s, B[bx, by * 128, 0])

    src, art = _source(k3)
    assert "tl::tma_load_multicast_3d((&(((half*)smem)[0])), TL_TMAP(0), " in src
    assert "(ushort)3, 0, (((int)blockIdx.y) * 128), ((int)blockIdx.x));" in src
    assert ("tl::tma_store_3d(TL_TMAP(1), (&(((half*)smem)[0])), 0, (((int)blockIdx.y) * 128), "
            "((int)blockIdx.x));") in src
    assert [m["box"] for m in art.tensormaps] == [[64, 128, 1], [64, 128, 1]]
    assert art.cubin        # nvcc accepts the multicast templates


def test_multicast_of_a_threaded_copy_is_refused():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32)):
        with T.ClusterKernel(2, threads=128, cluster_dims=(2, 1, 1)):
            s = T.alloc_shared((32, 60), T.float32)
            bar = T.alloc_barrier([128])
            T.tma_copy(A[0:32, 0:60], s[0:32, 0:60], barrier=bar[0], cluster_mask=0b11)
            T.mbarrier_arrive(bar[0])
            T.mbarrier_wait_parity(bar[0], 0)
            A[0, 0] = s[1, 1]

    with pytest.raises(TileLangCompileError, match="cannot be multicast"):
        tilelang.compile(main, target=SM90)


def multicast_gemm(M=256, N=256, K=256, bm=64, bn=64, bk=32, mask=0b11, dtype=T.float16):
    """Upstream's cluster guide, split-K sketch: the two blocks of a cluster share A's row of
    tiles, so the lower one multicasts each k-tile of A into both; A_s is a T.gemm operand."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), T.float32)):
        with T.ClusterKernel(N // bn, M // bm, threads=128, cluster_dims=(2, 1, 1)) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_f = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_f)
            for ko in T.serial(K // bk):
                T.copy_cluster(A[by * bm, ko * bk], A_s, cluster_mask=mask)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("bk", [32, 128])
def test_copy_cluster_multicast_into_a_swizzled_gemm_operand(bk):
    """A multicast into a tile in the wgmma operand layout: one swizzled box per slab (two for
    128 fp16 columns: 64-column slabs of 128-byte rows), each multicast, after the cluster-wide
    barrier that also orders the peer's last gemm read of the tile before it is overwritten."""
    kernel = tilelang.compile(multicast_gemm(bk=bk), target=SM90)
    src, art = kernel.get_kernel_source(), kernel.artifact
    assert kernel.ensure_cubin()[:4] == b"\x7fELF"                 # nvcc takes it
    width = min(bk, 64)
    assert art.tensormaps[0]["box"] == [width, 64] and art.tensormaps[0]["swizzle"] == bk * 2 // (bk // width)
    body = src[src.index("for (int ko = 0;"):]
    assert body.index("tl::cluster_sync();") < body.index("tl::mbarrier_arrive_expect_tx(") \
        < body.index("tl::tma_load_multicast_2d(") < body.index("tl::mbarrier_wait(") < body.index("wgmma")
    assert body.count("tl::tma_load_multicast_2d(") == bk // width
    assert f"tl::mbarrier_arrive_expect_tx((&(((uint64_t*)smem)" in body and f", {64 * bk * 2});" in body


def test_copy_cluster_multicast_into_a_tile_tma_cannot_fill_says_why():
    with pytest.raises(TileLangCompileError, match=r"cannot be one TMA load \('A_s' is not in the swizzled wgmma "
                       r"operand layout\); a multicast fills a whole shared tile"):
        tilelang.compile(multicast_gemm(dtype=T.float32), target=SM90)
