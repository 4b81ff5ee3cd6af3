"""Read-modify-write atomics with a memory order against their expected values
(tests/language/test_intrinsics.py checks the calls and fences): the release / acquire / seq_cst
element atomics, a relaxed one, and a tile atomic between acq_rel fences."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")

import tilelang  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "language"))
from test_intrinsics import ordered_rmw_kernel  # noqa: E402


def test_ordered_atomics_results():
    kernel = tilelang.compile(ordered_rmw_kernel())
    P = torch.zeros(64, 8, device="cuda")
    C = torch.zeros(4, device="cuda", dtype=torch.int32)
    M = torch.tensor([-1.0, 1000.0, 0.0, 0.0], device="cuda")
    D = torch.full((64, 8), 3.0, device="cuda")
    kernel(P, C, M, D)
    assert torch.equal(P, torch.full_like(P, 2.0))
    assert C.tolist() == [64, 64, 0, 0]
    assert M[0].item() == 63.0 and M[1].item() == 0.0     # the smallest old value of C[1] is 0
    assert torch.equal(D, torch.full_like(D, 4.0))
