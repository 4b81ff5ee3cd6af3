"""A warp-specialised loop whose producer loads a packed uint8 tile with a plain or 64-byte-swizzled
TMA box, against torch. CPU side: tests/transform/test_tma_plain_boxes.py."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                reason="needs an sm_90 GPU")


@pytest.mark.parametrize("swizzled", [True, False], ids=["swizzled", "row_major"])
def test_dequant_gemm_matches_torch(swizzled):
    import tilelang

    from test_tma_plain_boxes import dequant_gemm

    kernel = tilelang.compile(dequant_gemm(swizzled=swizzled))
    assert "tl::setmaxnreg_dec" in kernel.get_kernel_source()
    torch.manual_seed(0)
    a = torch.randn(512, 512, device="cuda").to(torch.bfloat16)
    b = torch.randint(0, 256, (512, 256), device="cuda", dtype=torch.uint8)
    c = torch.empty(512, 512, device="cuda")
    kernel(a, b, c)
    lo, hi = (b & 15).float(), (b >> 4).float()
    bdq = torch.stack([lo, hi], dim=-1).reshape(512, 512)
    torch.testing.assert_close(c, a.float() @ bdq.T, rtol=2e-2, atol=2e-1)
