"""A ``T.gemm`` with B in a register fragment, staged through shared memory by the compiler
(``transform/stage_operands.py``), against torch on sm_90a (wgmma) and the mma.sync path (CPU
side: tests/transform/test_stage_operands.py)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
from test_stage_operands import kernel  # noqa: E402


@pytest.mark.parametrize("configs", [{}, {"tl.disable_wgmma": True}])
def test_fragment_b_gemm_matches_torch(configs):
    import tilelang

    k = tilelang.compile(kernel(), pass_configs=configs)
    torch.manual_seed(0)
    A = torch.randn(64, 64, dtype=torch.float16, device="cuda")
    B = torch.randn(64, 64, dtype=torch.float16, device="cuda")
    C = torch.empty(64, 64, dtype=torch.float32, device="cuda")
    D = torch.empty(64, 64, dtype=torch.float32, device="cuda")
    k(A, B, C, D)
    ref = A.float() @ (B * 2).float()
    torch.testing.assert_close(C, ref, atol=1e-1, rtol=1e-2)
    torch.testing.assert_close(D, ref, atol=1e-1, rtol=1e-2)
