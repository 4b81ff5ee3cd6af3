"""Flash decoding (upstream ``examples/flash_decoding/example_gqa_decode.py``) with its sm_90
heuristic config (8 splits: a split kernel and a combine kernel whose ``lse_local[8, 128]`` is
laid out by another root, tests/test_layout_s12.py) and its test's config, against the example's
torch reference; and the small kernel of the same pattern against torch."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilelang  # noqa: E402
from test_layout_s12 import SPLIT, TEST_CFG, _example, combine_columns  # noqa: E402


@pytest.mark.parametrize("cfg", [SPLIT, TEST_CFG, dict(SPLIT, num_split=2, num_stages=1, block_N=64)],
                         ids=["sm90-heuristic", "test-config", "split2"])
def test_gqa_decode_against_reference(cfg):
    m = _example()
    B, H, G, S, D = 1, 32, 8, 8192, 128
    kernel = m.flashattn(B, H, G, S, D, **cfg)
    torch.manual_seed(0)
    q = torch.randn(B, H, D, device="cuda", dtype=torch.float16)
    k = torch.randn(B, S, G, D, device="cuda", dtype=torch.float16)
    v = torch.randn(B, S, G, D, device="cuda", dtype=torch.float16)
    mask = torch.randint(0, 2, (B, S, G), device="cuda", dtype=torch.uint8)
    o = kernel(q, k, v, mask)
    torch.cuda.synchronize()
    ref = m.ref_program(q, k, v, mask)
    torch.testing.assert_close(o, ref, atol=1e-2, rtol=1e-2)
    assert float(m.calc_sim(o, ref)) > 1 - 1e-3


@pytest.mark.parametrize("S", [2, 8, 16])
def test_small_combine_against_torch(S):
    B, W = 4, 128
    kernel = tilelang.compile(combine_columns(B=B, S=S, W=W), out_idx=[1])
    x = torch.randn(B, S, W, device="cuda", dtype=torch.float16)
    out = kernel(x)
    xf = x.float()
    mx = xf.max(dim=1).values
    ref = torch.log2(torch.exp2(xf - mx[:, None, :]).sum(dim=1)) + mx
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
