"""T.copy extents of tests/transform/test_copy_extents_s42.py (its kernels) run on the GPU against
torch: windows whose extent is constant from the scalars stored before the copy, a slice of a
symbolic length into a fixed-size fragment (zero past it, nothing stored past it), a shared tile
from a shorter run-time source (zero past it), a pipelined loop over an int64 trip count. Skips
without a CUDA GPU."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
tilelang = pytest.importorskip("tilelang")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
from test_copy_extents_s42 import int64_pipeline, shorter_source, slice_into_fragment, windows  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_windows_of_stored_bounds():
    x = torch.randn(4096, device="cuda")
    y = torch.zeros(4096, device="cuda")
    tilelang.compile(windows())(x, y, 100)
    ref = torch.zeros(4096, device="cuda")
    ref[100:356] = x[100:356]
    torch.testing.assert_close(y, ref)


def test_slice_of_a_symbolic_length_into_a_fixed_fragment():
    k = tilelang.compile(slice_into_fragment())
    for size in (4, 9, 12):
        a = torch.arange(10, 10 + size, dtype=torch.int32, device="cuda")
        b = torch.full((size,), -1, dtype=torch.int32, device="cuda")
        k(a, b)
        ref = torch.full((size,), -1, dtype=torch.int32, device="cuda")
        m = min(size - 1, 8)
        ref[1:1 + m] = a[:m] * 2
        torch.testing.assert_close(b, ref)


def test_shared_tile_from_a_shorter_run_time_source():
    x = torch.randn(512, device="cuda")
    lens = torch.tensor([0, 1, 5, 17, 32, 63, 64, 40], dtype=torch.int32, device="cuda")
    y = torch.full((8, 64), 7.0, device="cuda")
    tilelang.compile(shorter_source())(x, lens, y)
    ref = torch.zeros(8, 64, device="cuda")
    for b, n in enumerate(lens.tolist()):
        ref[b, :n] = x[b * 64:b * 64 + n]
    torch.testing.assert_close(y, ref)


def test_pipelined_loop_over_an_int64_trip_count():
    offsets = torch.tensor([0, 64, 64, 320, 1024], dtype=torch.int64, device="cuda")
    x = torch.randn(1024, 64, dtype=torch.float16, device="cuda")
    y = torch.empty(4, 64, device="cuda")
    tilelang.compile(int64_pipeline(batches=4, rows=1024))(offsets, x, y)
    ref = torch.stack([x[a:b].float().sum(0) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())])
    torch.testing.assert_close(y, ref, rtol=1e-2, atol=1e-2)
