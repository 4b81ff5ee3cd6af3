"""TileOPs' forms (tests/transform/test_tileops_forms.py, its kernels) run on the GPU against
torch: a view of a parameter declared before ``with T.Kernel``, a copy of a run-time extent into a
cleared shared tile (rows past the extent stay zero), vectorised shared fills of several types, a
host-level loop launching a kernel per stage, a gemm operand fragment written quadrant by quadrant, a logsumexp whose row maxima a later loop reads.
Skips without a CUDA GPU."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
tilelang = pytest.importorskip("tilelang")
import tilelang.language as T  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
from test_tileops_forms import host_loop_stages, logsumexp, quadrants, ragged, view_before_kernel  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_view_declared_before_the_kernel():
    x = torch.randn(4, 64, 8, 8, dtype=torch.float16, device="cuda")
    y = torch.empty_like(x)
    tilelang.compile(view_before_kernel())(x, y)
    torch.testing.assert_close(y, x * 2)


def test_copy_of_a_run_time_extent_into_a_cleared_tile():
    torch.manual_seed(0)
    x = torch.randn(1024, 64, dtype=torch.float16, device="cuda")
    lens = torch.tensor([0, 1, 5, 16, 17, 31, 32, 33, 48, 63, 64, 2, 9, 40, 60, 64], dtype=torch.int32,
                        device="cuda")
    y = torch.full((16, 64, 64), 7.0, dtype=torch.float16, device="cuda")
    tilelang.compile(ragged())(x, lens, y)
    ref = torch.zeros(16, 64, 64, dtype=torch.float16, device="cuda")
    for b, n in enumerate(lens.tolist()):
        ref[b, :n] = x[b * 64:b * 64 + n]
    torch.testing.assert_close(y, ref, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int8", "int32"])
def test_shared_fill_of_each_type(dtype):
    @T.prim_func
    def kernel(y: T.Tensor((48, 64), dtype)):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((48, 64), dtype)
            T.fill(s, 3)
            T.fill(s[8:16, 32:64], 5)       # a part of the tile: rows at a 16-byte multiple
            T.copy(s, y)

    tdt = getattr(torch, dtype)
    y = torch.zeros(48, 64, dtype=tdt, device="cuda")
    tilelang.compile(kernel)(y)
    ref = torch.full((48, 64), 3, dtype=tdt, device="cuda")
    ref[8:16, 32:64] = 5
    torch.testing.assert_close(y, ref, rtol=0, atol=0)


def test_host_loop_launches_each_stage_in_order():
    y = torch.randn(512, device="cuda")
    ref = ((y * 2 + 0) * 2 + 1) * 2 + 2
    tilelang.compile(host_loop_stages())(y)
    torch.testing.assert_close(y, ref)


def test_gemm_operand_written_by_quadrants():
    torch.manual_seed(0)
    a = torch.randn(64, 64, dtype=torch.float16, device="cuda")
    b = torch.randn(64, 64, dtype=torch.float16, device="cuda")
    c = torch.empty(64, 64, dtype=torch.float32, device="cuda")
    tilelang.compile(quadrants())(a, b, c)
    f = a.clone()
    f[:32, 32:] = 0
    f[32:, :32] = a[32:, :32] * 2
    torch.testing.assert_close(c, f.float() @ b.float(), rtol=1e-2, atol=1e-2)


def test_logsumexp_rows():
    x = torch.randn(64, 256, device="cuda")
    y = torch.empty(64, device="cuda")
    tilelang.compile(logsumexp())(x, y)
    torch.testing.assert_close(y, torch.logsumexp(x, dim=1), rtol=1e-5, atol=1e-5)
