"""A replicated T.Parallel loop writing registers and memory, against torch (upstream's layernorm
pattern). CPU side: tests/test_replicated_loop_effects.py."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("blk_m", [1, 2])
def test_row_center_matches_torch(blk_m):
    import tilelang
    from test_replicated_loop_effects import row_center

    kernel = tilelang.compile(row_center(blk_m=blk_m))
    x = torch.randn(64, 1024, device="cuda")
    y = torch.empty_like(x)
    mean = torch.empty(64, device="cuda")
    kernel(x, y, mean)
    torch.testing.assert_close(mean, x.mean(1), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(y, x - x.mean(1, keepdim=True), rtol=1e-4, atol=1e-5)
