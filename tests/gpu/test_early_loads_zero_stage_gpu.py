"""Zero-stage loops whose loads are issued at the top of each step (tests/test_early_loads_zero_stage.py
checks the schedule on the CPU) against torch: the recurrence with all three loads moved, with a
tile touched before its copy, with rows chosen in the step, and with the schedule off."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilelang  # noqa: E402
import test_early_loads_zero_stage as z  # noqa: E402
from tilelang.transform import attention_schedule  # noqa: E402


def _reference(K, G, Dv, Idx, variant):
    B, S, D = K.shape
    O = torch.zeros(B, S, D, device=K.device)
    H = torch.zeros(B, D, D, device=K.device)
    for b in range(B):
        for bv in range(2):
            cols = slice(bv * 32, (bv + 1) * 32)
            h = torch.zeros(D, 32, device=K.device)
            k_prev = torch.zeros(64, D, device=K.device)
            for i in range(S // 64):
                rows = slice(i * 64, (i + 1) * 64)
                h_s = h.bfloat16().float()
                if variant == "touched":
                    h = h + k_prev[:, :32]
                k_i = K[b, rows].float()
                v = k_i @ h_s * torch.exp(G[b, rows, 1])[:, None]
                O[b, rows, cols] = v
                r = int(Idx[i]) if variant == "indexed" else i
                d_i = Dv[r * 64:(r + 1) * 64, cols].float()
                h = h + k_i.T @ d_i
                k_prev = k_i
            H[b, :, cols] = h
    return O, H


@pytest.mark.parametrize("variant,configs", [("plain", None), ("plain", {attention_schedule.DISABLE_KEY: True}),
                                             ("touched", None), ("indexed", None)])
def test_recurrence_matches_torch(variant, configs):
    kern = tilelang.compile(z.recurrence(variant), pass_configs=configs)
    torch.manual_seed(0)
    B, S, D = z.B, z.S, z.D
    K = (torch.randn(B, S, D, device="cuda") * 0.1).bfloat16()
    G = torch.rand(B, S, 2, device="cuda") * -0.5
    Dv = (torch.randn(S, D, device="cuda") * 0.1).bfloat16()
    Idx = torch.tensor([2, 0, 3, 1], device="cuda", dtype=torch.int32)
    O = torch.empty(B, S, D, device="cuda")
    H = torch.empty(B, D, D, device="cuda")
    kern(K, G, Dv, Idx, O, H)
    o_ref, h_ref = _reference(K, G, Dv, Idx.cpu(), variant)
    torch.testing.assert_close(H, h_ref, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(O, o_ref, atol=2e-2, rtol=2e-2)
