"""``tl.enable_ws_early_release`` on the GPU (tests/test_ws_early_release.py checks the CUDA on the
CPU): the block-scaled GEMM whose consumers give the ring slot back right after the wgmma, with
the key false and by default, against torch; many k-blocks over a 4-deep ring, so a slot given back too
early would be overwritten while still read and the sum would be wrong."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilelang  # noqa: E402
import test_ws_early_release as er  # noqa: E402


@pytest.mark.parametrize("tail_reads_tile", [False, True])
@pytest.mark.parametrize("configs", [{er.KEY: False}, {}])
def test_scaled_gemm(configs, tail_reads_tile):
    M, N, K, bk = 512, 512, 4096, 128
    kernel = tilelang.compile(er.scaled_gemm(M, N, K, tail_reads_tile=tail_reads_tile), pass_configs=configs)
    torch.manual_seed(0)
    A = torch.randn(M, K, dtype=torch.float16, device="cuda")
    B = torch.randn(N, K, dtype=torch.float16, device="cuda")
    S = torch.rand(K // bk, dtype=torch.float32, device="cuda") + 0.5
    C = torch.empty(M, N, dtype=torch.float32, device="cuda")
    kernel(A, B, S, C)
    blocks = [(A[:, k * bk:(k + 1) * bk].float() @ B[:, k * bk:(k + 1) * bk].float().T) * S[k]
              for k in range(K // bk)]
    ref = torch.stack(blocks).sum(0)
    if tail_reads_tile:   # + A's tile, column j % bk, once per k-block
        ref += sum(A[:, k * bk:(k + 1) * bk].float().repeat(1, N // bk) for k in range(K // bk))[:, :N]
    torch.testing.assert_close(C, ref, atol=5e-1, rtol=2e-3)
