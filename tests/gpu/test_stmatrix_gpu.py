"""Epilogues written with stmatrix.x4 (opt-in ``tl.enable_stmatrix``, ``lower_copy._stmatrix``)
against torch: GEMMs with a shared staging tile (fp16 / bf16, one and two warpgroups, a padded
plain tile) and the flash attention example (tests/test_stmatrix.py checks the code on CPU)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0),
                                reason="needs an sm_90 GPU")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "examples"))
# (the 128x256 tile's epilogue is chunked by default, in 64-column parts that stmatrix does not
# take: off here, to test the whole-tile stmatrix store)
ON = {"tl.enable_stmatrix": True, "tl.enable_chunked_epilogue": False}


@pytest.mark.parametrize("bm, bn, threads, pad", [(128, 256, 256, 0), (64, 128, 128, 0), (128, 128, 256, 8)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gemm_epilogue(bm, bn, threads, pad, dtype):
    import tilelang
    import tilelang.language as T
    from test_stmatrix import gemm

    M = N = K = 512
    dt = getattr(T, dtype)
    kernel = tilelang.compile(gemm(M, N, K, bm, bn, 64, threads, dt, dt, pad=pad), out_idx=[2], pass_configs=ON)
    assert "tl::stmatrix_x4" in kernel.get_kernel_source()
    tdt = getattr(torch, dtype)
    a, b = torch.randn(M, K, device="cuda", dtype=tdt), torch.randn(K, N, device="cuda", dtype=tdt)
    ref = (a.cpu().float() @ b.cpu().float())
    torch.testing.assert_close(kernel(a, b).cpu().float(), ref, rtol=2e-2, atol=2e-1)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_epilogue(causal):
    import torch.nn.functional as F

    import flash_attention as fa
    import tilelang

    B, H, S, D = 2, 4, 512, 128
    func = fa.flashattn.get_prim_func(B, H, S, D, causal, 1, "bhsd", block_M=128, block_N=128, num_stages=2,
                                      threads=256)
    kernel = tilelang.compile(func, out_idx=[3], pass_configs={"tl.enable_fast_math": True, **ON})
    assert "tl::stmatrix_x4" in kernel.get_kernel_source()
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
    ref = F.scaled_dot_product_attention(q.cpu().float(), k.cpu().float(), v.cpu().float(), is_causal=causal)
    torch.testing.assert_close(kernel(q, k, v).cpu().float(), ref, rtol=1e-2, atol=1e-2)
