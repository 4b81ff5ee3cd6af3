"""Session-12 language additions run on a GPU: T.PersistentTileScheduler's tile order, the
T.tvm_warp_shuffle family, and upstream's hadamard example (warp shuffles + shared-memory
exchange) against a Sylvester Hadamard matrix. CPU side: tests/test_language_s12.py."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")


def _sylvester(n):
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h


@pytest.mark.parametrize("n", [2, 64, 1024, 8192, 32768])
def test_upstream_hadamard_example_matches_the_matrix(monkeypatch, n):
    from test_language_s12 import _hadamard_module

    import tilelang.language as T

    ex = _hadamard_module(monkeypatch)
    x = torch.randn(8, n, device="cuda")
    y = ex.hadamard(x, n, T.float32)
    ref = (x.double() @ _sylvester(n).to("cuda").T).float()
    torch.testing.assert_close(y, ref, atol=1e-2, rtol=1e-2)   # the example's own tolerance


@pytest.mark.parametrize("workers,swizzle", [(3, 3), (5, 1), (16, 8)])
def test_persistent_scheduler_visits_each_tile_once_in_its_wave(workers, swizzle):
    import tilelang
    from test_language_s12 import _persistent_copy, _reference_coord

    M = N = 512
    bm = bn = 128
    kernel = tilelang.compile(_persistent_copy(M, N, bm, bn, workers, swizzle))
    a = torch.randn(M, N, device="cuda")
    b = torch.full((M, N), float("nan"), device="cuda")
    kernel(a, b)
    expected = torch.empty_like(a)
    tiles = (M // bm) * (N // bn)
    for t in range(tiles):
        m, n = _reference_coord(t, M // bm, N // bn, swizzle, True, 1)
        wave = t // workers
        expected[m * bm:(m + 1) * bm, n * bn:(n + 1) * bn] = a[m * bm:(m + 1) * bm, n * bn:(n + 1) * bn] + wave
    torch.testing.assert_close(b, expected)


def test_tvm_warp_shuffle_family_values():
    import tilelang
    from test_language_s12 import shuffles

    kernel = tilelang.compile(shuffles())
    a = torch.arange(64, dtype=torch.float32, device="cuda")
    b = torch.zeros(4, 64, device="cuda")
    kernel(a, b)
    lane = torch.arange(64)
    warp = lane // 32 * 32
    exp = torch.stack([
        (warp + ((lane % 32) ^ 1)).float(),
        torch.where(lane % 16 >= 1, lane - 1, lane).float(),
        torch.where(lane % 32 + 2 < 32, lane + 2, lane).float(),
        (lane // 8 * 8 + ((lane % 8) ^ 4)).float(),
    ])
    torch.testing.assert_close(b.cpu(), exp)
