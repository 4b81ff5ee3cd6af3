"""A kernel with a user fragment layout (``T.Fragment`` via ``T.annotate_layout``) against torch;
the kernel and layouts are the ones tests/layout/test_user_fragment.py checks on the CPU."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "layout"))

import tilelang  # noqa: E402
import test_user_fragment as uf  # noqa: E402


@pytest.mark.parametrize("layout", [None, uf.REPLICATED["layout"]], ids=["plain", "replicated"])
def test_user_fragment_layout_against_torch(layout):
    k = tilelang.compile(uf.elementwise_reduce(layout=layout), out_idx=[1, 2])
    a = torch.randn(64, 64, device="cuda")
    b, s = k(a)
    torch.testing.assert_close(b, a * 2 + 1)
    torch.testing.assert_close(s, (a * 2 + 1).sum(1), rtol=1e-4, atol=1e-3)
