"""wgmma beside mma.sync in one kernel, against torch: the mma.sync gemms read tiles in the wgmma
slab layout (as A, as N-major and K-major B), fp16 and bf16. CPU side: tests/test_wgmma_mix.py."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/: the CPU tests' kernels
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                reason="needs an sm_90 GPU")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("D", [192, 128])
def test_mixed_kernel_matches_torch(dtype, D):
    import tilelang

    from test_wgmma_mix import mixed_kernel

    kernel = tilelang.compile(mixed_kernel(D=D, dtype=dtype))
    src = kernel.get_kernel_source()
    assert "tl::wgmma_gemm_ss" in src and "tl::gemm_ss" in src
    tdt = getattr(torch, dtype)
    torch.manual_seed(0)
    K = torch.randn(128, D, device="cuda").to(tdt)
    Q = torch.randn(32, D, device="cuda").to(tdt)
    G = torch.randn(128, 32, device="cuda").to(tdt)
    S = torch.empty(128, 32, device="cuda")
    dQ = torch.empty(32, D, device="cuda")
    R = torch.empty(32, 32, device="cuda")
    kernel(K, Q, G, S, dQ, R)
    torch.testing.assert_close(S, K.float() @ Q.float().T, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(dQ, G.float().T @ K.float(), rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(R, Q.float() @ Q.float().T, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("threads", [128, 256])
@pytest.mark.parametrize("tf32", ["float32", "tfloat32"])
def test_tf32_gemm_beside_a_bf16_gemm_matches_torch(threads, tf32):
    """A register-A tf32 gemm whose accumulator is added to a bf16 gemm's (gdn chunk_delta_bwd's
    shape): float32 operands keep both gemms on mma.sync, T.tfloat32 ones put both on wgmma
    (tests/test_wgmma_mix.py, tests/test_tf32_wgmma.py)."""
    import tilelang

    from test_wgmma_mix import tf32_beside_wgmma_kernel

    kernel = tilelang.compile(tf32_beside_wgmma_kernel(threads=threads, tf32=tf32))
    src = kernel.get_kernel_source()
    assert ("tl::wgmma_gemm_rs" if tf32 == "tfloat32" else "tl::gemm_rs") in src
    torch.manual_seed(0)
    Q, D = torch.randn(64, 128, device="cuda"), torch.randn(32, 64, device="cuda")
    W, V = torch.randn(64, 128, device="cuda").bfloat16(), torch.randn(64, 32, device="cuda").bfloat16()
    out = torch.empty(128, 32, device="cuda")
    kernel(Q, D, W, V, out)
    ref = Q.T.double() @ D.T.double() + W.double().T @ V.double()
    torch.testing.assert_close(out.double(), ref, rtol=2e-2, atol=5e-2)
