"""Persistent GEMMs in clusters of two (``tl.cluster_multicast``) against torch: the blocks of a
cluster take tiles t and t ^ 1, and each operand is multicast on the tiles where both blocks load
the same one (A or B by the user's block order; with an odd swizzle panel some pairs share neither,
and each block loads its own), split by slabs or by rows."""

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402

CLUSTER = {"tl.cluster_multicast": True}


def gemm_tn(M, N, K, bm, bn, bk, stages, threads, panel, dtype):
    """C = A @ B.T in upstream's example form (``example_gemm_autotune.matmul``)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((bm, bk), dtype)
            B_shared = T.alloc_shared((bn, bk), dtype)
            C_local = T.alloc_fragment((bm, bn), "float32")
            C_shared = T.alloc_shared((bm, bn), dtype)
            T.use_swizzle(panel_size=panel, enable=panel > 0)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], A_shared)
                T.copy(B[bx * bn, k * bk], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C_shared)
            T.copy(C_shared, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("M,N,K,panel", [(4096, 4096, 1024, 10), (640, 1024, 512, 10), (1024, 2048, 256, 0),
                                         (384, 1024, 4096, 3)])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("tile", [(128, 256, 64, 3, 256), (128, 128, 64, 3, 256)], ids=["128x256", "128x128"])
def test_persistent_cluster_gemm_matches_torch(M, N, K, panel, dtype, tile):
    kernel = tilelang.compile(gemm_tn(M, N, K, *tile, panel, dtype), out_idx=[-1], pass_configs=CLUSTER)
    src = kernel.get_kernel_source()
    assert "__cluster_dims__(2, 1, 1)" in src and "tile_it" in src and "tma_load_multicast_2d" in src
    tdt = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(N, K, device="cuda", dtype=tdt)
    ref = a.float() @ b.float().T
    for _ in range(3):    # (relaunches: the ring's phases start again at every launch)
        c = kernel(a, b)
        torch.testing.assert_close(c.float(), ref, rtol=2e-2, atol=2e-1)
