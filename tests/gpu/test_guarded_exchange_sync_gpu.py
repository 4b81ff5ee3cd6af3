"""Guarded shared-memory exchanges against their expected values (tests/transform/
test_guarded_exchange_sync.py checks where the barriers are): the barrier the enclosing condition
makes unnecessary is gone, and the results still hold, launch after launch."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")

import tilelang  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
from test_guarded_exchange_sync import KINDS, exchange  # noqa: E402


@pytest.mark.parametrize("kind", list(KINDS))
def test_guarded_exchange_results(kind):
    kernel = tilelang.compile(exchange(kind))
    x = torch.arange(32, device="cuda", dtype=torch.float32) * 3 + 1
    expected = torch.tensor(KINDS[kind][1](x.tolist()), device="cuda")
    for _ in range(20):
        o = torch.empty_like(x)
        kernel(x, o)
        torch.testing.assert_close(o, expected, rtol=0, atol=0)
