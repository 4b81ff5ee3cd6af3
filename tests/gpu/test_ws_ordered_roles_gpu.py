"""Two computing T.ws roles ordered by the user's mbarriers, a producer warp loading stages it
indexes by hand with T.tma_copy (tests/transform/test_ws_ordered_roles.py's attention kernel), run
on the GPU against torch. Skips without a CUDA GPU."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
tilelang = pytest.importorskip("tilelang")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
from test_ws_ordered_roles import two_role_attention  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("B,H,S", [(1, 2, 512), (2, 4, 1024)])
def test_two_roles_ordered_by_mbarriers_match_torch(B, H, S):
    q, k, v = (torch.randn(B, S, H, 128, dtype=torch.float16, device="cuda") for _ in range(3))
    kernel = tilelang.compile(two_role_attention(B, H, S), out_idx=[3])
    out = kernel(q, k, v)
    ref = torch.softmax((q.transpose(1, 2).float() @ k.transpose(1, 2).float().transpose(-1, -2)) / 128 ** 0.5,
                        dim=-1) @ v.transpose(1, 2).float()
    torch.testing.assert_close(out.float(), ref.transpose(1, 2), rtol=2e-2, atol=2e-2)
