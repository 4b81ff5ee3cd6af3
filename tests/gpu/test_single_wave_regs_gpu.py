"""One-wave warp-specialised attention with the producer's registers handed to the consumer
(``warp_specialize.plan_single_wave``: setmaxnreg 24 / 240 under ``__launch_bounds__(256, 1)``)
against SDPA, with the rule and with ``tl.disable_single_wave_setmaxnreg``."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))

import tilelang  # noqa: E402
from test_single_wave_regs import _attention  # noqa: E402


@pytest.mark.parametrize("off", [False, True])
@pytest.mark.parametrize("B,H,S,D", [(2, 4, 512, 64), (1, 2, 256, 128), (1, 16, 512, 64)])
def test_one_wave_attention_matches_sdpa(B, H, S, D, off):
    configs = {"tl.disable_single_wave_setmaxnreg": True} if off else {}
    kernel = tilelang.compile(_attention(B, H, S, D), out_idx=[3], pass_configs=configs)
    assert ("setmaxnreg_inc<240>" in kernel.get_kernel_source()) != off
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(kernel(q, k, v), ref, atol=2e-3, rtol=2e-3)
