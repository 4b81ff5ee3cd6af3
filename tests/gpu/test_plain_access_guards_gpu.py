"""Plain global accesses past a tensor's end, guarded by the compiler as upstream guards them
(stores skipped, loads read 0, address-taking calls skipped, a cp.async zero-filled), against
torch (CPU side: tests/transform/test_plain_access_guards.py)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
import test_plain_access_guards as k  # noqa: E402


def compiled(func):
    import tilelang

    return tilelang.compile(func)


def test_overhanging_statement():
    A, B = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    C = torch.zeros(1000, device="cuda")
    compiled(k.overhang)(A, B, C)
    torch.testing.assert_close(C, A + B)


def test_loads_past_the_end_read_zero():
    A = torch.randn(1000, device="cuda")
    C = torch.zeros(1000, device="cuda")
    compiled(k.shifted)(A, C)
    padded = torch.cat([A, torch.zeros(3, device="cuda")])
    ref = sum(padded[i:i + 1000] for i in range(4))
    torch.testing.assert_close(C, ref)


def test_row_tail_stores_are_skipped():
    L = torch.zeros(64, 8, device="cuda")
    ends = torch.randint(0, 9, (64,), dtype=torch.int32, device="cuda")
    compiled(k.row_tail)(L, ends)
    ref = torch.zeros(64, 8, device="cuda")
    cols = torch.arange(8, device="cuda")[None, :]
    ref[cols >= ends[:, None].long()] = float("-inf")
    torch.testing.assert_close(L, ref)


def test_atomics_past_the_end_are_skipped():
    A = torch.randn(1000, device="cuda")
    C = torch.ones(1000, device="cuda")
    compiled(k.atomics)(A, C)
    torch.testing.assert_close(C, A + 1)


def test_gathered_cp_async_zero_fills_outside_rows():
    KV = torch.randn(256, 64, device="cuda").half()
    idx = torch.randint(0, 256, (64,), dtype=torch.int32, device="cuda")
    idx[::7] = 300                                   # rows past the end: zeros
    O = torch.empty(64, 64, device="cuda").half()
    compiled(k.gathered)(KV, idx, O)
    ref = torch.zeros(64, 64, device="cuda").half()
    ok = idx < 256
    ref[ok] = KV[idx[ok].long()]
    torch.testing.assert_close(O, ref)
