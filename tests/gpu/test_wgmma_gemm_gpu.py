"""T.wgmma_gemm (H100/H200) and T.gemm_sp (sm_80+) against torch: the kernels of
tests/test_wgmma_gemm.py and tests/test_wgmma_gemm_sparse.py, launched."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402
import test_wgmma_gemm as tw  # noqa: E402
import test_wgmma_gemm_sparse as ts  # noqa: E402

hopper = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
                            reason="needs sm_90 (wgmma)")


@hopper
@pytest.mark.parametrize("M,N,K,tiles,static", [(64, 64, 64, 4, False), (128, 64, 64, 2, False),
                                                (64, 128, 64, 2, False), (64, 64, 32, 2, True)])
def test_wgmma_gemm_slices(M, N, K, tiles, static):
    k = tilelang.compile(tw._sliced(M, N, K, tiles, static=static), target="sm_90a")
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)
    d = torch.empty(M, N, device="cuda", dtype=torch.float16)
    k(a, b, d)
    if static:
        a, b = a[:, K // tiles:], b[:, K // tiles:]
    torch.testing.assert_close(d, (a.float() @ b.float().T).half(), rtol=1e-2, atol=1e-2)


@hopper
@pytest.mark.parametrize("acc", ["float32", "float16"])
def test_wgmma_gemm_no_wait(acc):
    k = tilelang.compile(tw._kernel(acc=acc), target="sm_90a")
    a = torch.randn(64, 16, device="cuda", dtype=torch.float16)
    b = torch.randn(16, 64, device="cuda", dtype=torch.float16)
    d = torch.empty(64, 64, device="cuda", dtype=torch.float16)
    k(a, b, d)
    torch.testing.assert_close(d, (a.float() @ b.float()).half(), rtol=1e-2, atol=1e-2)


def _semi_sparse(M, K):
    """A 2:4 sparse fp16 matrix (two kept per group of 4, random positions)."""
    a = torch.randn(M, K, device="cuda", dtype=torch.float16).view(M, K // 4, 4)
    keep = torch.rand(M, K // 4, 4, device="cuda").argsort(-1)[..., :2].sort(-1).values
    mask = torch.zeros_like(a, dtype=torch.bool).scatter_(-1, keep, True)
    return (a * mask).view(M, K), keep


def _compress(a, keep, e_dtype):
    """(kept values M x K/2, metadata): per group 4 bits (idx0 | idx1 << 2), groups little-endian."""
    M, K = a.shape
    kept = a.view(M, K // 4, 4).gather(-1, keep).view(M, K // 2)
    nib = (keep[..., 0] | (keep[..., 1] << 2)).to(torch.int64)          # M x K/4
    per = {torch.int8: 2, torch.int16: 4, torch.int32: 8}[e_dtype]
    nib = nib.view(M, K // 4 // per, per)
    word = sum(nib[..., i] << (4 * i) for i in range(per))
    bits = {torch.int8: 8, torch.int16: 16, torch.int32: 32}[e_dtype]
    word = torch.where(word >= 1 << (bits - 1), word - (1 << bits), word)   # two's complement
    return kept, word.to(e_dtype)


@pytest.mark.parametrize("e_dtype,tl_e", [(torch.int16, T.int16), (torch.int8, T.int8), (torch.int32, T.int32)])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("configs", [None, ts.NO_WGMMA], ids=["wgmma_sp", "mma_sp"])
def test_gemm_sp_against_dense(e_dtype, tl_e, trans_b, configs):
    M = N = K = 128
    k = tilelang.compile(ts.sparse_kernel(M, N, K, e_dtype=tl_e, trans_b=trans_b), pass_configs=configs)
    a, keep = _semi_sparse(M, K)
    a_sparse, e = _compress(a, keep, e_dtype)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float32)
    k(a_sparse, e, b.T.contiguous() if trans_b else b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("threads, trans_b", [(256, False), (256, True), (128, False)])
def test_gemm_sp_wide_tiles_against_dense(threads, trans_b):
    # two warpgroups splitting M, m64n256k32 instructions (upstream's 128x256x128 config)
    M, N, K = 256, 256, 512
    k = tilelang.compile(ts.sparse_kernel(M, N, K, bk=128, threads=threads, trans_b=trans_b))
    assert "wgmma_sp_gemm_ss" in k.get_kernel_source()
    a, keep = _semi_sparse(M, K)
    a_sparse, e = _compress(a, keep, torch.int16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float32)
    k(a_sparse, e, b.T.contiguous() if trans_b else b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=5e-2)
