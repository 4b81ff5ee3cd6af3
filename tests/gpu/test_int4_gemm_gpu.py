"""``T.gemm`` on int4 tiles against torch, exactly (int32 results): our own kernel at 256^3 with 1
and 3 pipeline stages, and upstream's examples/gemm_int4 main check at 1024^3 (CPU side:
tests/test_int4_gemm.py)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/: the CPU tests' kernels
from upstream_paths import examples as upstream_examples  # noqa: E402


def pack_int4(x):
    """Logical int4 values in an int8 tensor -> two per byte, element 2i in the low nibble."""
    x = x.to(torch.int16)
    return ((x[..., ::2] & 0x0F) | ((x[..., 1::2] & 0x0F) << 4)).to(torch.int8).contiguous()


@pytest.mark.parametrize("stages", [1, 3])
def test_int4_gemm_matches_torch(stages):
    import tilelang

    from test_int4_gemm import int4_gemm

    M = N = K = 256
    kernel = tilelang.compile(int4_gemm(M, N, K, stages=stages), out_idx=-1)
    torch.manual_seed(0)
    a = torch.randint(-8, 8, (M, K), dtype=torch.int8)
    b = torch.randint(-8, 8, (N, K), dtype=torch.int8)
    c = kernel(pack_int4(a).cuda(), pack_int4(b).cuda())
    torch.testing.assert_close(c.cpu(), a.to(torch.int32) @ b.to(torch.int32).T, rtol=0, atol=0)


def test_upstreams_int4_example():
    folder = upstream_examples("gemm_int4")
    if folder is None:
        pytest.skip("upstream's examples/gemm_int4 not found")
    sys.path.insert(0, str(folder))
    import example_tilelang_gemm_int4 as m

    m.check_int4_gemm_correctness()
