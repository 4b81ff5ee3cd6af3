"""Kernels whose barriers thread_sync elides (each thread reads back only the shared elements it
wrote) or must keep (another thread wrote them), run against torch. CPU side (the generated CUDA):
tests/test_sync_elision_s12.py."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")

CONFIGS = {"tl.disable_tma_lower": True}


def _compile(func):
    import tilelang

    return tilelang.compile(func, pass_configs=CONFIGS)


def _rms_ref(x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-12)


@pytest.mark.parametrize("M,N,blk_k", [(256, 2048, 512), (8192, 8192, 512)])
def test_rms_norm_splitk(M, N, blk_k):
    from test_sync_elision_s12 import rms_splitk

    kernel = _compile(rms_splitk(M, N, blk_k))
    assert "__syncthreads" not in kernel.get_kernel_source().split("for (int k", 1)[1].split("}", 1)[0]
    a = torch.randn(M, N, device="cuda")
    b = torch.empty_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, _rms_ref(a), rtol=1e-2, atol=1e-2)


def test_rms_norm_fragment():
    import tilelang.language as T

    M, N, blk_m = 1024, 1024, 1

    @T.prim_func
    def rms_norm(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(M // blk_m, threads=128) as bx:
            A_local = T.alloc_fragment((blk_m, N), "float32")
            A_pow = T.alloc_fragment((blk_m, N), "float32")
            A_powsum = T.alloc_fragment((blk_m,), "float32")
            T.copy(A[bx * blk_m:(bx + 1) * blk_m, :], A_local)
            for i, j in T.Parallel(blk_m, N):
                A_pow[i, j] = A_local[i, j] * A_local[i, j]
            T.reduce_sum(A_pow, A_powsum, dim=1)
            for i in T.Parallel(blk_m):
                A_powsum[i] = T.rsqrt(A_powsum[i] / N + 1e-12)
            for i, j in T.Parallel(blk_m, N):
                A_local[i, j] *= A_powsum[i]
            T.copy(A_local, B[bx * blk_m:(bx + 1) * blk_m, :])

    kernel = _compile(rms_norm)
    a = torch.randn(M, N, device="cuda")
    b = torch.empty_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, _rms_ref(a), rtol=1e-2, atol=1e-2)


def test_transposed_read_keeps_its_barriers():
    from test_sync_elision_s12 import transposed

    n = 32
    kernel = _compile(transposed(n))
    a = torch.randn(4 * n, n, device="cuda")
    b = torch.empty_like(a)
    for _ in range(20):     # a missing barrier shows as a sporadic mismatch
        kernel(a, b)
        torch.cuda.synchronize()
        ref = a.view(4, n, n).transpose(1, 2).reshape(4 * n, n) + 1
        torch.testing.assert_close(b, ref)


def test_copy_out_with_another_width_keeps_its_barriers():
    from test_sync_elision_s12 import other_width

    n = 512
    kernel = _compile(other_width(n))
    a = torch.randn(4, n, device="cuda")
    b = torch.zeros(4, n + 1, device="cuda")
    for _ in range(20):
        kernel(a, b)
        torch.cuda.synchronize()
        torch.testing.assert_close(b[:, 1:], a * 2 + 1)


def test_neighbour_read_keeps_its_barrier():
    from test_sync_elision_s12 import shifted

    n = 512
    kernel = _compile(shifted(n))
    a = torch.randn(4, n, device="cuda")
    b = torch.empty_like(a)
    for _ in range(20):
        kernel(a, b)
        torch.cuda.synchronize()
        torch.testing.assert_close(b, torch.roll(a, -4, dims=1))


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                    reason="needs an sm_90 GPU")
@pytest.mark.parametrize("ws", [False, True], ids=["cp.async", "warp-specialised"])
def test_thread_indexed_dequant_loop(ws):
    """Each thread fills its own elements of the tile in a serial loop with no barrier between the
    iterations (test_sync_elision_s12.dequant_loop), the gemm after the loop sees all of them."""
    import tilelang

    from test_sync_elision_s12 import dequant_loop

    kernel = tilelang.compile(dequant_loop(pipelined=ws), pass_configs={} if ws else CONFIGS)
    torch.manual_seed(0)
    a = torch.randn(64, 64, device="cuda").half()
    b = torch.randn(4, 64, 64, device="cuda").half()
    c = torch.empty(64, 64, device="cuda")
    kernel(a, b, c)
    r, col = torch.meshgrid(torch.arange(64), torch.arange(64), indexing="ij")
    tx = (r % 16) * 8 + col // 8
    scale = a[(tx // 2).cuda(), (col % 8).cuda()]
    want = sum(a.float() @ (b[ko] * scale).float() for ko in range(4))
    torch.testing.assert_close(c, want, rtol=2e-2, atol=2e-1)
