"""``T.copy_cluster(..., cluster_mask=)`` into a tile that ``T.gemm`` reads (upstream's cluster
guide, split-K sketch) against torch: the lowest block of the mask multicasts each k-tile of A into
the swizzled operand tile of every block of the mask, the others receive it; blocks outside the
mask load their own. A cluster-wide barrier before each load orders the peers' gemm reads of the
previous tile before it is overwritten."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")

import tilelang  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
from test_tma_session11 import multicast_gemm  # noqa: E402


@pytest.mark.parametrize("M,N,K,bk,mask,dtype", [(256, 256, 256, 32, 0b11, "float16"),
                                                 (512, 512, 1024, 128, 0b11, "float16"),
                                                 (256, 512, 512, 64, 0b01, "float16"),
                                                 (256, 256, 512, 64, 0b11, "bfloat16")])
def test_copy_cluster_multicast_gemm_operand(M, N, K, bk, mask, dtype):
    kernel = tilelang.compile(multicast_gemm(M, N, K, bk=bk, mask=mask, dtype=dtype))
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=getattr(torch, dtype))
    b = torch.randn(K, N, device="cuda", dtype=getattr(torch, dtype))
    c = torch.zeros(M, N, device="cuda", dtype=torch.float32)
    for _ in range(3):          # repeated launches: the barriers' re-initialisation each k-step
        kernel(a, b, c)
        torch.cuda.synchronize()
        torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-2)
