"""T.cumsum / T.cummax scanned a warp a row (``tl.enable_warp_scan``) against torch, beside the
default one-thread-a-row scan (the kernels of tests/transform/test_warp_scan.py)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))

import tilelang  # noqa: E402
from test_warp_scan import scan_kernel  # noqa: E402

CASES = [dict(M=1, N=4096), dict(M=1, N=100), dict(M=1, N=100, reverse=True), dict(M=6, N=300),
         dict(M=6, N=300, reverse=True), dict(M=300, N=3, dim=0), dict(M=1, N=4096, kind="max"),
         dict(M=3, N=1000, kind="max", reverse=True), dict(M=2, N=256, dtype="int32"),
         dict(M=4, N=128, frag=True), dict(M=2, N=64, dtype="float64")]


def _reference(a, dim, reverse, kind):
    x = a.flip(dim) if reverse else a
    y = x.cumsum(dim) if kind == "sum" else x.cummax(dim).values
    return y.flip(dim) if reverse else y


@pytest.mark.parametrize("warp", [True, False])
@pytest.mark.parametrize("kw", CASES)
def test_scan_matches_torch(kw, warp):
    kw = dict(kw)
    M, N = kw.pop("M"), kw.pop("N")
    dtype = kw.get("dtype", "float32")
    kernel = tilelang.compile(scan_kernel(M, N, **kw), out_idx=[1], pass_configs={"tl.enable_warp_scan": warp})
    assert ("warp_inclusive_scan" in kernel.get_kernel_source()) == warp
    if dtype == "int32":
        a = torch.randint(-50, 50, (M, N), dtype=torch.int32, device="cuda")
    else:
        a = torch.randn(M, N, dtype=getattr(torch, dtype), device="cuda")
    ref = _reference(a.double() if dtype != "int32" else a.long(), kw.get("dim", 1), kw.get("reverse", False),
                     kw.get("kind", "sum"))
    out = kernel(a)
    if dtype == "int32":
        assert torch.equal(out.long(), ref)
    else:
        torch.testing.assert_close(out.double(), ref, atol=2e-3 * (N ** 0.5), rtol=1e-4)


def test_issue_1001_row_of_hidden_values():
    """Upstream issue 1001's kernel shape: one row of ``hidden`` values, in place, a row per block."""
    import tilelang.language as T

    hidden, tokens = 4096, 64

    @T.prim_func
    def kernel(x: T.Tensor((tokens, hidden), T.float32)):
        with T.Kernel(tokens, threads=128) as pid:
            smem = T.alloc_shared((hidden,), T.float32)
            T.copy(x[pid, :], smem)
            T.cumsum(T.view(smem, (1, hidden)), dim=1)
            T.copy(smem, x[pid, :])

    k = tilelang.compile(kernel, pass_configs={"tl.enable_warp_scan": True})
    a = torch.randn(tokens, hidden, device="cuda")
    ref = a.double().cumsum(1)
    k(a)
    torch.testing.assert_close(a.double(), ref, atol=0.2, rtol=1e-4)
