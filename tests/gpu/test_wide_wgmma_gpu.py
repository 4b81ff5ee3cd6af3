"""Wide wgmma tiles against torch: odd widths (one m64nNk16 per k-step) and tiles past 256
columns (a row of instructions over N slices), K-major and N-major B. CPU side:
tests/test_wide_wgmma.py."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/: the CPU tests' kernels
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                reason="needs an sm_90 GPU")


@pytest.mark.parametrize("block_N,trans_b", [(96, True), (160, True), (112, False), (384, True), (384, False),
                                             (512, False), (320, True)])
def test_wide_tile_matches_torch(block_N, trans_b):
    import tilelang

    from test_wide_wgmma import _matmul

    M, K, N = 128, 256, 2 * block_N
    kernel = tilelang.compile(_matmul(N, block_N, trans_b, M=M, K=K))
    assert "wgmma_gemm" in kernel.get_kernel_source()
    a = torch.randn(M, K, dtype=torch.float16, device="cuda")
    b = torch.randn(N, K, dtype=torch.float16, device="cuda")
    c = torch.empty(M, N, dtype=torch.float16, device="cuda")
    kernel(a, b if trans_b else b.T.contiguous(), c)
    torch.testing.assert_close(c, (a.float() @ b.float().T).half(), rtol=1e-2, atol=1e-2)
