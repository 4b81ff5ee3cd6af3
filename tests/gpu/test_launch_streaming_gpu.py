"""Session 23's kernels against torch on the GPU (tests/test_launch_attributes.py checks their
CUDA on the CPU): a register-streaming gemv under ``__launch_bounds__(T, 1)``, a shared-memory
cumsum whose repeated barriers were dropped, and a per-thread loop whose stores past a dynamic
row's end are skipped (the row after it keeps its values)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilelang  # noqa: E402
import test_launch_attributes as la  # noqa: E402


@pytest.mark.parametrize("configs", [{}, {"tl.disable_streaming_launch_bound": True}])
def test_streaming_gemv(configs):
    blocks, steps = 512, 32     # (more than one wave: the single-wave bound stays out)
    kernel = tilelang.compile(la._gemv(blocks, steps), pass_configs=configs)
    assert ("__launch_bounds__(128, 1)" in kernel.get_kernel_source()) == (not configs)
    torch.manual_seed(0)
    A = torch.randn(blocks * 128, steps * 8, dtype=torch.float16, device="cuda")
    x = torch.randn(steps * 8, dtype=torch.float16, device="cuda")
    y = torch.empty(blocks * 128, dtype=torch.float32, device="cuda")
    kernel(A, x, y)
    torch.testing.assert_close(y, A.float() @ x.float(), atol=2e-2, rtol=2e-3)


def test_shared_cumsum():
    blocks = 264
    kernel = tilelang.compile(la._shared_scan(blocks))
    torch.manual_seed(0)
    G = torch.randn(blocks * 64, device="cuda")
    H = torch.empty_like(G)
    kernel(G, H)
    torch.testing.assert_close(H, G.view(blocks, 64).cumsum(1).view(-1), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("n", [1000, 1024, 77])
def test_stores_past_the_row_are_skipped(n):
    """Rows of ``n`` columns, chunks of 256: the last chunk overhangs each row unless n is a
    multiple of 256. The kernel runs on rows 0..m-2 of a bigger tensor, so a store past a row's
    end would land in the next row (or, for the last, in the spare row)."""
    m = 6
    kernel = tilelang.compile(la._clean_rows())
    torch.manual_seed(0)
    full = torch.randn(m, n, device="cuda")
    lo = torch.randint(0, n // 2, (m,), dtype=torch.int32, device="cuda")
    hi = torch.randint(n // 2, n + 1, (m,), dtype=torch.int32, device="cuda")
    want = full.clone()
    cols = torch.arange(n, device="cuda")[None, :]
    mask = (cols < lo[:-1, None]) | (cols >= hi[:-1, None])
    want[:-1][mask] = float("-inf")
    L = full[:-1]
    kernel(L, lo[:-1], hi[:-1])
    torch.cuda.synchronize()
    assert torch.equal(full, want)
