"""Every example against torch on the GPU, at several shapes: multiples of the tile, shapes that
are not, and pipelined loops of 1, 2 and a non-multiple-of-stages number of iterations."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))


@pytest.mark.parametrize("M,N,K", [(256, 256, 32), (256, 256, 64), (256, 256, 160), (1000, 1000, 1000),
                                   (129, 257, 96), (4096, 4096, 4096)])
@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gemm(M, N, K, ta, tb, dtype):
    import gemm

    if (M, N, K) == (4096, 4096, 4096) and (ta, tb, dtype) != (False, False, "float16"):
        pytest.skip("one large case is enough")
    gemm.run(M, N, K, ta, tb, dtype, bench=False)


@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_gemm_pipeline_depths(stages):
    import gemm

    for K in (32, 64, 96, 160):  # 1, 2, 3 and 5 iterations of block_K = 32
        gemm.run(256, 128, K, num_stages=stages, bench=False)


@pytest.mark.parametrize("act", ["relu", "sigmoid"])
@pytest.mark.parametrize("M,N,K", [(512, 512, 512), (1000, 1000, 1000)])
def test_gemm_epilogue(M, N, K, act):
    import gemm_epilogue as ge

    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(ge.matmul_act(M, N, K, act)(a, b), ge.ref_program(a, b, act), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("n", [1, 1000, 1 << 20, (1 << 20) + 3])
def test_vector_add(n):
    import vector_add as va

    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    torch.testing.assert_close(va.vector_add(n)(a, b), a + b)
    a16, b16 = a.half(), b.half()
    torch.testing.assert_close(va.vector_add_tiled(n)(a16, b16), a16 + b16)


@pytest.mark.parametrize("M,N", [(1024, 1024), (1000, 300), (64, 128), (65, 129)])
def test_softplus(M, N):
    import softplus as sp

    x = torch.randn(M, N, device="cuda", dtype=torch.float16)
    y = sp.softplus(M, N, 64, 128)(x)
    torch.testing.assert_close(y, torch.nn.functional.softplus(x.float()).half(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("M,N", [(4096, 4096), (1000, 3000), (7, 1024), (8, 100)])
def test_row_reduce(M, N):
    import row_reduce as rr

    x = torch.randn(M, N, device="cuda", dtype=torch.float16)
    s, m = rr.row_reduce(M, N)(x)
    torch.testing.assert_close(s, x.float().sum(1), rtol=1e-3, atol=1e-2)
    torch.testing.assert_close(m, x.float().amax(1))


@pytest.mark.parametrize("M,N", [(4096, 4096), (1000, 3000), (3, 2048), (16, 100)])
def test_softmax(M, N):
    import softmax as sm

    x = torch.randn(M, N, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(sm.softmax(M, N)(x), torch.softmax(x.float(), -1).half(), rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("M,N", [(4096, 4096), (1001, 2048), (5, 1024)])
def test_rmsnorm(M, N):
    import rmsnorm as rn

    x = torch.randn(M, N, device="cuda", dtype=torch.float16)
    w = torch.randn(N, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(rn.rmsnorm(M, N)(x, w), rn.ref_program(x, w), rtol=1e-2, atol=1e-2)


def test_bad_arguments_raise_before_launch():
    import gemm

    k = gemm.matmul(256, 256, 256)
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    with pytest.raises((TypeError, ValueError), match="B"):
        k(a, torch.randn(256, 128, device="cuda", dtype=torch.float16))
    with pytest.raises((TypeError, ValueError), match="dtype|float16"):
        k(a, torch.randn(256, 256, device="cuda", dtype=torch.float32))
    with pytest.raises((TypeError, ValueError)):
        k(a.cpu(), a.cpu())
