"""A grouped GEMM whose tile loads are addressed by values computed from its batch tables, against
torch (warp specialisation must not take it: tests/test_ws_computed_coords.py)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("block_M,threads", [(64, 128), (128, 256), (64, 256)])   # (64, 256): wgmma split over N
def test_grouped_gemm_matches_torch(block_M, threads):
    import tilelang
    from test_ws_computed_coords import grouped

    sizes, K, N = (128, 256), 256, 256
    kernel = tilelang.compile(grouped(sizes, K, N, block_M=block_M, threads=threads))
    a = torch.randn(sum(sizes), K, device="cuda", dtype=torch.float16)
    b = torch.randn(len(sizes), K, N, device="cuda", dtype=torch.float16)
    offsets = torch.tensor([0, sizes[0]], device="cuda", dtype=torch.int32)
    padded = torch.tensor([0, -(-sizes[0] // block_M) * block_M], device="cuda", dtype=torch.int32)
    c = torch.empty(sum(sizes), N, device="cuda", dtype=torch.float16)
    kernel(a, b, offsets, padded, c)
    ref = torch.cat([a[:sizes[0]].float() @ b[0].float(), a[sizes[0]:].float() @ b[1].float()])
    torch.testing.assert_close(c.float(), ref, rtol=1e-2, atol=1e-1)
