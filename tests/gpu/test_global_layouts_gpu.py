"""``transform/global_layouts.py`` on the GPU (tests/transform/test_global_layouts.py checks the CUDA on
the CPU): a tensor annotated with upstream's make_dq_layout holds element (l, d) at the layout's
offset, written by tile copies and by tile atomics of a gemm accumulator, and read back through the
layout by another kernel."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))

import tilelang  # noqa: E402
import test_global_layouts as gl  # noqa: E402


def _placed(M):
    """M's elements at their layout offsets, as the flat storage holds them."""
    L, D = M.shape
    out = torch.empty(L * D, dtype=M.dtype, device=M.device)
    idx = torch.tensor([gl.offset(l, d, D) for l in range(L) for d in range(D)], device=M.device)
    out[idx] = M.reshape(-1)
    return out


def test_copy_in_and_out():
    X = torch.randn(64, 64, device="cuda")
    Y = torch.zeros_like(X)
    tilelang.compile(gl.laid_copy(into=True))(X, Y)
    torch.testing.assert_close(Y.reshape(-1), _placed(X), rtol=0, atol=0)
    Z = torch.zeros_like(X)
    tilelang.compile(gl.laid_copy(into=False))(Y, Z)
    torch.testing.assert_close(Z, X, rtol=0, atol=0)


def test_accumulator_atomics():
    X = torch.randn(32, 64, device="cuda", dtype=torch.float16)
    W = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    dQ = torch.zeros(32, 64, device="cuda")
    tilelang.compile(gl.laid_atomic())(X, W, dQ)
    torch.testing.assert_close(dQ.reshape(-1), _placed(2 * (X.float() @ W.float())), rtol=1e-3, atol=1e-2)
