"""User ``T.ws`` blocks on two warp groups, each computing on its own fragments, run on the GPU
against torch: the kernel of tests/transform/test_ws_multi_roles.py whose roles each wait on their
own T.wgmma_gemm. Skips without a CUDA GPU."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
tilelang = pytest.importorskip("tilelang")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
from test_ws_multi_roles import two_wgmma_roles  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_each_role_waits_for_its_own_wgmma():
    a = torch.randn(128, 64, dtype=torch.float16, device="cuda")
    b = torch.randn(64, 64, dtype=torch.float16, device="cuda")
    c = torch.empty(128, 64, device="cuda")
    tilelang.compile(two_wgmma_roles())(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)
