"""Kernels whose vector accesses used to be misaligned, run on a GPU (a misaligned access is a
sticky CUDA error: it would also fail every later test of the process). CPU side:
tests/codegen/test_alignment_session11.py."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")


@pytest.mark.parametrize("disable_tma", [True, False])
def test_fp4_tile_copy_round_trips(disable_tma):
    import tilelang

    from test_alignment_session11 import _fp4_copy_kernel

    kernel = tilelang.compile(_fp4_copy_kernel(64, 256, disable_tma))
    a = torch.randint(0, 256, (64, 128), dtype=torch.uint8, device="cuda")
    b = torch.zeros_like(a)
    kernel(a.view(torch.float4_e2m1fn_x2), b.view(torch.float4_e2m1fn_x2))
    torch.cuda.synchronize()
    assert torch.equal(a, b)


def test_fp4_tile_round_trips_through_a_fragment():
    import tilelang

    from test_alignment_session11 import _fp4_fragment_kernel

    kernel = tilelang.compile(_fp4_fragment_kernel(64, 256))
    a = torch.randint(0, 256, (64, 128), dtype=torch.uint8, device="cuda")
    b, c = torch.zeros_like(a), torch.zeros_like(a)
    kernel(*(t.view(torch.float4_e2m1fn_x2) for t in (a, b, c)))
    torch.cuda.synchronize()
    assert torch.equal(a, b) and torch.equal(a, c)


@pytest.mark.parametrize("pad", [0, 4, 1])
def test_padded_shared_copy(pad):
    import tilelang

    from test_alignment_session11 import _padded_shared_copy

    kernel = tilelang.compile(_padded_shared_copy(pad))
    a = torch.randn(64, 256, dtype=torch.float16, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b[:, :32], a[:, :32]) and not b[:, 32:].any()
