"""A symbolic-shape kernel called with tensors of more than 2**31 elements runs on its
64-bit-index variant and matches torch past element 2**31 (CPU side: tests/jit/test_wide_index_variant.py)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "jit"))
from test_wide_index_variant import double  # noqa: E402


def test_past_2_31_elements_matches_torch():
    import tilelang

    kernel = tilelang.compile(double().prim_func, out_idx=[-1])    # for the GPU at hand
    small = torch.randint(-50, 50, (64, 1000), dtype=torch.int8, device="cuda")
    torch.testing.assert_close(kernel(small), small * 2)
    assert kernel._wide is None
    # 2**15 rows (the grid's y, at most 65535) of 2**16 + 128: 2**31 + 2**22 elements
    big = torch.randint(-50, 50, (2**15, 2**16 + 128), dtype=torch.int8, device="cuda")
    out = kernel(big)
    assert kernel._wide is not None and kernel._wide.artifact.index_bits == 64
    assert torch.equal(out[-16:], big[-16:] * 2)     # rows past element 2**31
    assert torch.equal(out, big * 2)
    del out, big
    torch.cuda.empty_cache()
