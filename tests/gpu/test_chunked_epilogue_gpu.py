"""Chunked GEMM epilogues (``tl.enable_chunked_epilogue``, the default since session 38; tests/transform/test_chunked_epilogue.py
checks the code on CPU) against torch: upstream's example_gemm_autotune kernel, 128x256x64 tiles, three
stages, persistent with its epilogue going out 64 columns at a time through two shared tiles, on the
whole GPU and on grids forced down to 1, 3 and 7 blocks (many tiles a block, the chunk tiles reused
across tiles), with edge tiles that TMA clips."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0),
                                reason="needs an sm_90 GPU")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "transform"))
KEY = {"tl.enable_chunked_epilogue": True}


def _check(kernel, M, N, K, dtype):
    tdt = getattr(torch, dtype)
    a, b = torch.randn(M, K, device="cuda", dtype=tdt), torch.randn(N, K, device="cuda", dtype=tdt)
    c = torch.empty(M, N, device="cuda", dtype=tdt)
    kernel(a, b, c)
    ref = a.cpu().float() @ b.cpu().float().T
    torch.testing.assert_close(c.cpu().float(), ref, rtol=2e-2, atol=2e-1 * (K / 256) ** 0.5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_whole_gpu(dtype):
    import tilelang
    import tilelang.language as T
    from test_chunked_epilogue import upstream_gemm

    kernel = tilelang.compile(upstream_gemm(dtype=getattr(T, dtype)), pass_configs=KEY)
    assert "NUM_SMS" in kernel.artifact.grid[0] and kernel.get_kernel_source().count("tl::tma_store_2d") == 4
    _check(kernel, 4096, 4096, 4096, dtype)


@pytest.mark.parametrize("sms", [1, 3, 7])
@pytest.mark.parametrize("M,N,K", [(512, 768, 256), (640, 1024, 128), (1000, 1000, 320)])
def test_forced_grids(monkeypatch, sms, M, N, K):
    import tilelang
    from tilelang.jit import adapter_args
    from test_chunked_epilogue import upstream_gemm

    monkeypatch.setitem(adapter_args._SM_COUNTS, torch.cuda.current_device(), sms)
    kernel = tilelang.compile(upstream_gemm(M, N, K), pass_configs=KEY)
    assert "NUM_SMS" in kernel.artifact.grid[0]
    assert kernel.get_kernel_source().count("tl::tma_store_2d") == 4
    _check(kernel, M, N, K, "bfloat16")
