"""Zero-stage promotion on the GPU: upstream's split-K GEMM main loop (num_stages=0, atomic adds of
each split's partial product) compiled as written and with ``tl.enable_zero_stage_promotion``
(three stages: a TMA producer on sm_90a) gives torch's product, as does the loop promoted to two
stages (wide tiles) and at a trip count that is not a multiple of the stages; and the experimental
``tl.enable_zero_stage_promotion_any`` on a one-gemm body with a scale and a store (gdn wy_fast's
V loop)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@pytest.mark.parametrize("promote", [True, False])
@pytest.mark.parametrize("trips,block_K", [(32, 32), (7, 32), (8, 192)])
def test_split_k_gemm_matches_torch(trips, block_K, promote):
    import tilelang
    from test_zero_stage_promotion import splitk, stages_of
    from tilelang.transform.attention_schedule import promote_zero_stage

    func = splitk(0, trips=trips, block_K=block_K)
    configs = {"tl.enable_zero_stage_promotion": promote}
    assert stages_of(promote_zero_stage(func, "sm_90a", configs)) == [(2 if block_K == 192 else 3) if promote else 0]
    kernel = tilelang.compile(func, pass_configs=configs)
    K = trips * block_K * 4
    a = torch.randn(4096, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, 4096, device="cuda", dtype=torch.float16)
    c = torch.zeros(4096, 4096, device="cuda", dtype=torch.float32)
    d = torch.empty_like(c)
    kernel(a, b, c, d)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-1)


@pytest.mark.parametrize("any_body,no_ws", [(True, False), (False, False), (True, True)])
def test_one_gemm_body_matches_torch(any_body, no_ws):
    """(True, True): the cp.async ring with early release, whose middle barrier publishes the scaled
    tile to the wgmma (fenced since session 57)."""
    import tilelang
    from test_zero_stage_promotion import _one_gemm_body

    configs = {"tl.enable_zero_stage_promotion_any": any_body, "tl.disable_warp_specialized": no_ws}
    kernel = tilelang.compile(_one_gemm_body(), pass_configs=configs)
    a = torch.randn(4096, 64, device="cuda", dtype=torch.float16)
    v = torch.randn(4096, 256, device="cuda", dtype=torch.float16)
    u = torch.empty(4096, 256, device="cuda", dtype=torch.float16)
    kernel(a, v, u)
    ref = torch.cat([a[r:r + 64].float() @ (v[r:r + 64].float() * 2) for r in range(0, 4096, 64)])
    torch.testing.assert_close(u.float(), ref, rtol=1e-2, atol=5e-2)
