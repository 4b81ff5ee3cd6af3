"""Block-sparse main loops (``if Mask[..., k]:`` around copies and gemm) against torch: the
warp-specialised form with counted ring slots (sm_90a default) and the cp.async form. CPU side
(the generated CUDA): tests/transform/test_pipeline_guarded.py."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                reason="needs an sm_90 GPU")


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("ws", [True, False])
@pytest.mark.parametrize("density", [0.0, 0.3, 1.0])
def test_block_sparse_matches_torch(stages, ws, density):
    import tilelang

    from test_pipeline_guarded import NO_WS, _blocksparse

    kernel = tilelang.compile(_blocksparse(stages=stages), pass_configs=None if ws else NO_WS)
    assert ("tiles_done" in kernel.get_kernel_source()) == ws
    torch.manual_seed(stages)
    a = torch.randn(1024, 1024, device="cuda").half()
    b = torch.randn(1024, 1024, device="cuda").half()
    mask = torch.rand(8, 8, 32, device="cuda") < density
    c = torch.empty(1024, 1024, device="cuda").half()
    kernel(a, b, mask, c)
    want = torch.zeros(1024, 1024, device="cuda")
    for by in range(8):
        for bx in range(8):
            for k in range(32):
                if mask[by, bx, k]:
                    want[by * 128:(by + 1) * 128, bx * 128:(bx + 1) * 128] += (
                        a[by * 128:(by + 1) * 128, k * 32:(k + 1) * 32].float()
                        @ b[k * 32:(k + 1) * 32, bx * 128:(bx + 1) * 128].float())
    torch.testing.assert_close(c.float(), want, rtol=1e-2, atol=1e-1)
