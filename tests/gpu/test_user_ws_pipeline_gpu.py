"""Pipelined loops of user T.ws blocks (``user_ws.pipeline_roles``) against torch: the softpipe
GEMM at 2 and 3 stages, trip counts not a multiple of the stages, a loop starting at 1, and
barrier arrays indexed by an inner loop (tests/transform/test_user_ws_pipeline.py checks the
generated code on CPU)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9,
                                reason="needs an sm_90 GPU")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
from test_user_ws_pipeline import _gemm, _per_slice_barriers  # noqa: E402


@pytest.mark.parametrize("stages, K, start", [(2, 1024, 0), (3, 1024, 0), (2, 576, 0), (3, 704, 0), (2, 1024, 1)])
def test_staged_gemm_matches_torch(stages, K, start):
    import tilelang

    M = N = 512
    kernel = tilelang.compile(_gemm(stages, M=M, N=N, K=K, start=start), target="cuda -arch=sm_90a")
    assert kernel.get_kernel_source().count("tl::mbarrier_init(") == 2 * stages     # staged
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    kernel(a, b, c)
    ref = a[:, start * 64:].float() @ b[start * 64:, :].float()
    torch.testing.assert_close(c.float(), ref, rtol=1e-2, atol=1e-2)


def test_per_slice_barriers_match_torch():
    import tilelang

    kernel = tilelang.compile(_per_slice_barriers(2), target="cuda -arch=sm_90a")
    a = torch.randn(512, 64, device="cuda", dtype=torch.float16)
    c = torch.empty(64, device="cuda", dtype=torch.float32)
    kernel(a, c)
    torch.testing.assert_close(c, a.float().sum(0), rtol=1e-2, atol=1e-2)
