"""Shared buffers of run-time extent (tests/codegen/test_symbolic_shared.py) on the GPU: the launch
sizes the dynamic shared memory per call (past 48 KiB too), results match torch, and a size over
the device's limit is a clear error before the launch; a global copy of an unbounded run-time
extent (tests/transform/test_tileops_forms.py) matches torch. Skips without a CUDA GPU."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
tilelang = pytest.importorskip("tilelang")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from test_symbolic_shared import N, behind_a_static_tile, doubled_rows, roundtrip  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(scope="module")
def copy_kernel():
    return tilelang.compile(roundtrip(), out_idx=[1])


@pytest.mark.parametrize("m", [64, 5, 100, 1])     # (100 rows: 51200 bytes, past the 48 KiB default)
def test_rows_through_a_run_time_tile(copy_kernel, m):
    a = torch.randn(m, N, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(copy_kernel(a), a, rtol=0, atol=0)


def test_calls_of_different_sizes_alternate(copy_kernel):
    for m in (120, 3, 90, 7):
        a = torch.randn(m, N, device="cuda", dtype=torch.float16)
        torch.testing.assert_close(copy_kernel(a), a, rtol=0, atol=0)


def test_too_large_for_the_device_is_a_clear_error(copy_kernel):
    a = torch.randn(1000, N, device="cuda", dtype=torch.float16)     # 512000 bytes
    with pytest.raises(RuntimeError, match="run-time extent"):
        copy_kernel(a)
    torch.cuda.synchronize()
    b = torch.randn(8, N, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(copy_kernel(b), b, rtol=0, atol=0)    # (nothing left broken)


@pytest.mark.parametrize("n", [1000, 3, 4096])
def test_after_a_static_tile(n):
    kernel = tilelang.compile(behind_a_static_tile(), out_idx=[1, 2])
    x = torch.randn(n, device="cuda")
    y, s = kernel(x)
    torch.testing.assert_close(y, 2 * x)
    torch.testing.assert_close(s[0], x[:128].sum(), rtol=1e-4, atol=1e-4)


def test_a_ragged_global_copy():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
    from test_tileops_forms import ragged_global_copy

    kernel = tilelang.compile(ragged_global_copy())
    x = torch.randn(1024, 64, device="cuda", dtype=torch.float16)
    lens = torch.tensor([0, 1, 64, 17] * 4, device="cuda", dtype=torch.int32)
    y = torch.zeros_like(x)
    kernel(x, lens, y)
    ref = torch.zeros_like(x)
    for b, n in enumerate(lens.tolist()):
        ref[b * 64:b * 64 + n] = x[b * 64:b * 64 + n]
    torch.testing.assert_close(y, ref, rtol=0, atol=0)


@pytest.mark.parametrize("m", [1, 33, 200])
def test_a_2d_parallel_over_a_run_time_tile(m):
    a = torch.randn(m, 64, device="cuda")
    torch.testing.assert_close(doubled_rows(a), 2 * a)
