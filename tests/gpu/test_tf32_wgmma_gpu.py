"""tf32 wgmma (m64nNk8) against torch: T.tfloat32 operands, both K-major, A in shared memory or in
registers, pipelined over K. CPU side: tests/test_tf32_wgmma.py."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/: the CPU tests' kernels
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                reason="needs an sm_90 GPU")


@pytest.mark.parametrize("a_in_registers", [False, True])
@pytest.mark.parametrize("block_M, block_N, block_K, threads", [(128, 128, 32, 128), (128, 64, 64, 256),
                                                                 (64, 256, 32, 128)])
def test_tf32_wgmma_matches_torch(a_in_registers, block_M, block_N, block_K, threads):
    import tilelang

    from test_tf32_wgmma import tf32_matmul

    M, N, K = 512, 768, 1024
    kernel = tilelang.compile(tf32_matmul(M, N, K, block_M, block_N, block_K, threads=threads,
                                          a_in_registers=a_in_registers))
    assert "wgmma_gemm_" + ("rs" if a_in_registers else "ss") in kernel.get_kernel_source()
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(N, K, device="cuda")
    c = torch.empty(M, N, device="cuda")
    kernel(a, b, c)
    ref = a.double() @ b.double().T
    # tf32 keeps 10 mantissa bits (the tensor core truncates the rest): relative errors of a few
    # 1e-4 of the output scale at K = 1024; a wrong layout gives errors of the outputs' size
    err = (c.double() - ref).abs().max() / ref.abs().max()
    assert float(err) < 5e-3, float(err)
    # and it is tf32, not a float32 path: the result differs from the exact one
    assert float(err) > 1e-6
