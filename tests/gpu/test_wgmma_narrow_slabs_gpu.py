"""wgmma with an N-major B in narrow swizzle slabs (the default) against torch, and the mma.sync
gemm the same kernel takes with ``tl.disable_wgmma_narrow_slabs`` (CPU side:
tests/transform/test_wgmma_narrow_slabs.py)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
from test_wgmma_narrow_slabs import KEY, kernel  # noqa: E402


@pytest.mark.parametrize("N", [64, 32])
@pytest.mark.parametrize("configs", [{}, {KEY: True}])
def test_narrow_slab_gemm_matches_torch(N, configs):
    import tilelang

    k = tilelang.compile(kernel(N=N), pass_configs=configs)
    torch.manual_seed(0)
    A = torch.randn(64, 64, dtype=torch.float16, device="cuda")
    B = torch.randn(64, N, dtype=torch.float16, device="cuda")
    C = torch.empty(64, N, dtype=torch.float32, device="cuda")
    k(A, B, C)
    torch.testing.assert_close(C, A.float() @ B.float(), atol=1e-2, rtol=1e-2)
