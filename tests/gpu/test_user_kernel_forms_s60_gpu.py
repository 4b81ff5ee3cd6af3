"""Session 60's user forms (tests/frontend/test_user_kernel_forms_s60.py, its kernels) run on the
GPU against torch: strided views, a thread-bound loop inside a kernel, gemm operands annotated
with upstream's bank swizzles, a gemm on a sub-tile whose start moves with a loop. Skips without
a CUDA GPU."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
tilelang = pytest.importorskip("tilelang")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "frontend"))
from test_user_kernel_forms_s60 import _annotated_gemm, _bound_loop, _strided_views, _subtile_gemm  # noqa: E402
from tilelang.layout import make_full_bank_swizzled_layout, make_wgmma_swizzled_layout  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_strided_views():
    x = torch.randn(64, 32, device="cuda")
    y, z = torch.empty(32, 64, device="cuda"), torch.empty(32, 64, device="cuda")
    tilelang.compile(_strided_views())(x, y, z)
    torch.testing.assert_close(y, x.t())
    torch.testing.assert_close(z, x.t())


@pytest.mark.parametrize("extent", [128, 64])
def test_thread_bound_loop(extent):
    x = torch.randn(1024, device="cuda")
    y = torch.zeros(1024, device="cuda")
    tilelang.compile(_bound_loop(extent))(x, y)
    torch.testing.assert_close(y, x * 2)


@pytest.mark.parametrize("block_k,maker", [(64, make_full_bank_swizzled_layout), (128, make_wgmma_swizzled_layout)])
def test_bank_swizzled_gemm(block_k, maker):
    a, b = torch.randn(256, 256, device="cuda", dtype=torch.float16), torch.randn(256, 256, device="cuda", dtype=torch.float16)
    c = torch.empty(256, 256, device="cuda")
    tilelang.compile(_annotated_gemm(block_k, maker))(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float().t(), rtol=1e-2, atol=1e-2)


def test_gemm_on_a_moving_subtile():
    a, b = torch.randn(128, 64, device="cuda", dtype=torch.float16), torch.randn(64, 128, device="cuda", dtype=torch.float16)
    c = torch.empty(128, 128, device="cuda")
    tilelang.compile(_subtile_gemm(64))(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)
