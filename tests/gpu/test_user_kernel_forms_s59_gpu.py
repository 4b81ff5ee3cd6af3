"""Session 59's user forms (tests/frontend/test_user_kernel_forms_s59.py, its kernels) run on the
GPU against torch: a copied fragment read at a constant offset, and the column blocks of an
annotated fragment (TileKernels' mHC pre-split-mixes backward shape) with their column sums.
Skips without a CUDA GPU."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
tilelang = pytest.importorskip("tilelang")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "frontend"))
from test_user_kernel_forms_s59 import _shifted_read, _split_mixes_bwd  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_a_copied_fragment_read_at_a_constant_offset():
    x = torch.randn(128, 24, device="cuda")
    y = torch.empty(128, 16, device="cuda")
    tilelang.compile(_shifted_read(8))(x, y)
    torch.testing.assert_close(y, x[:, 8:] * 2)


@pytest.mark.parametrize("n", [32, 70])
def test_column_blocks_of_an_annotated_fragment(n):
    g1, g2 = torch.randn(n, 4, device="cuda"), torch.randn(n, 4, device="cuda")
    x = torch.randn(n, 24, device="cuda")
    out = torch.empty(n, 24, device="cuda")
    base = torch.empty(24, device="cuda")
    tilelang.compile(_split_mixes_bwd())(g1, g2, x, out, base)
    ref = torch.cat([g1 * x[:, :4], g2, x[:, :16]], dim=1)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(base, ref.sum(0), rtol=1e-5, atol=1e-5)
