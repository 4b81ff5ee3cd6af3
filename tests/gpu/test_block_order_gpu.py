"""``transform/block_order.py`` on the GPU (tests/transform/test_block_order.py checks the CUDA on the
CPU): a grid whose row block bx loops bx + 1 times, launched longest row block first (by default)
and in the plain order (key False), against torch: a block relabelled wrongly would write another
block's tile, or a tile twice and another never."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))

import tilelang  # noqa: E402
import test_block_order as bo  # noqa: E402


@pytest.mark.parametrize("configs", [{}, {"tl.enable_longest_first_blocks": False}])
def test_prefix_blocks(configs):
    rows = 64 * 32
    func = bo.prefix_blocks(rows)
    kernel = tilelang.compile(func, pass_configs=configs)
    reordered = "bx_lf" in kernel.get_kernel_source()
    assert reordered == (not configs)
    torch.manual_seed(0)
    X = torch.randn(rows, bo.NB * bo.B, device="cuda")
    count = torch.zeros(bo.NB, dtype=torch.int32, device="cuda")
    Y = torch.full_like(X, float("nan"))
    kernel(X, count, Y)
    ref = X.view(rows, bo.NB, bo.B).cumsum(1).view(rows, -1)
    torch.testing.assert_close(Y, ref, atol=1e-3, rtol=1e-4)
