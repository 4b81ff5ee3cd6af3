"""Kernels whose statement after a loop closed by its loop-back barrier has no barrier of its own
(tests/transform/test_closing_loop_barrier.py) run on the GPU against torch. Skips without a
CUDA GPU."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
tilelang = pytest.importorskip("tilelang")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
from test_closing_loop_barrier import CONFIGS, after_loop  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("trips,early", [(2, False), (0, True), (0, False)])
def test_after_loop_matches_torch(trips, early):
    n = 256
    a, c = (torch.randn(4, n, device="cuda") for _ in range(2))
    b = torch.empty(4, n, device="cuda")
    kernel = tilelang.compile(after_loop(n=n, trips=trips, early=early), pass_configs=CONFIGS)
    m = 3
    kernel(a, b, c, m)
    runs = trips if trips else m
    idx = torch.arange(n, device="cuda")
    ref = runs * a[:, (idx + 4) % n] + c[:, (idx + 8) % n]
    if early:
        ref = ref + c[:, (idx + 16) % n]
    torch.testing.assert_close(b, ref, rtol=1e-5, atol=1e-5)
