"""The kernels of tests/examples/session11_kernels.py against torch (flash decoding's partial-row
epilogue, deepseek_mhc's tf32 gemm + sum of squares and its hand-written thread roles)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import tilelang  # noqa: E402
import session11_kernels as ks  # noqa: E402


@pytest.mark.parametrize("rows", [4, 8])
def test_partial_rows_epilogue(rows):
    M, N, K = 64, 128, 64
    kernel = tilelang.compile(ks.partial_rows_epilogue(rows, M, N, K), out_idx=[2])
    a = torch.randn(M, K, dtype=torch.float16, device="cuda")
    b = torch.randn(K, N, dtype=torch.float16, device="cuda")
    o = kernel(a, b)
    ref = (a.float() @ b.float())[:rows].half()
    torch.testing.assert_close(o, ref, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("operands", ["float32", "tfloat32"])
def test_gemm_sqrsum_tf32(operands):
    tokens, hc3, hidden = 64, 24, 512
    kernel = tilelang.compile(ks.gemm_sqrsum_tf32(tokens, hc3, hidden, operands=operands), out_idx=[2, 3])
    x = torch.randn(tokens, hidden, device="cuda").bfloat16()
    fn = torch.randn(hc3, hidden, device="cuda") * 1e-2
    out, sq = kernel(x, fn)
    torch.testing.assert_close(sq, x.float().square().sum(-1), rtol=1e-5, atol=1e-3)
    torch.testing.assert_close(out, x.float() @ fn.T, rtol=2e-3, atol=2e-3)


def test_thread_regions():
    tokens, hc, hidden = 8, 4, 512
    kernel = tilelang.compile(ks.thread_regions(tokens, hc, hidden), out_idx=[3, 4])
    mix = torch.randn(tokens, hc * hc, device="cuda")
    w = torch.randn(hc, device="cuda")
    x = torch.randn(tokens, hc, hidden, device="cuda").bfloat16()
    soft, y = kernel(mix, w, x)
    torch.testing.assert_close(soft, mix.view(tokens, hc, hc).softmax(-1).view(tokens, -1), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(y.float(), (x.float() * w.view(1, hc, 1)).sum(1), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("rows,cols", [(2, 512), (4, 256)])
def test_region_cross_warp_reduce(rows, cols):
    kernel = tilelang.compile(ks.region_cross_warp_reduce(rows, cols), out_idx=[1])
    a = torch.randn(rows, cols, device="cuda")
    torch.testing.assert_close(kernel(a), a.sum(1), rtol=1e-5, atol=1e-4)
