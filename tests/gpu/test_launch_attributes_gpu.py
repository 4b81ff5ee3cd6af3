"""Launch attributes on the GPU: PDL kernels launched through cuLaunchKernelEx with programmatic
stream serialization, T.annotate_l2_hit_ratio's access-policy window set and reset around the
launch (the context's persisting-L2 limit restored), and TMA copies chosen by lower_copy."""

import ctypes
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402
from tilelang.jit import driver  # noqa: E402

sm90 = pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.get_device_capability() < (9, 0),
                          reason="needs sm_90")


def _pdl_pair(N, block=256):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32), C: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    B[bx * block + i] = A[bx * block + i] + 1.0
            T.pdl_trigger()
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx2:
            T.pdl_sync()
            for i in T.Parallel(block):
                if bx2 * block + i < N:
                    C[bx2 * block + i] = B[bx2 * block + i] * 2.0
    return main


@sm90
def test_pdl_pair_uses_launch_kernel_ex(monkeypatch):
    calls = []
    real = driver.launch_ex

    def spy(func, grid, block, smem, stream, params, attrs):
        calls.append(list(attrs))
        return real(func, grid, block, smem, stream, params, attrs)

    monkeypatch.setattr(driver, "launch_ex", spy)
    N = 1 << 20
    k = tilelang.compile(_pdl_pair(N))
    a = torch.randn(N, device="cuda")
    b, c = torch.empty_like(a), torch.empty_like(a)
    for _ in range(3):
        k(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, (a + 1) * 2)
    assert calls and all(attrs == [(driver.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, 1)]
                         for attrs in calls)


def _persisting_limit():
    drv = driver.get_driver()
    with driver.context(torch.cuda.current_device()):
        return drv.out(drv.cuCtxGetLimit, driver.CU_LIMIT_PERSISTING_L2_CACHE_SIZE, ctype=ctypes.c_size_t)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_l2_hit_ratio_kernel_runs_and_restores_the_limit(dtype):
    M = N = 1024
    tdt = {torch.float32: T.float32, torch.float16: T.float16}[dtype]

    @T.prim_func
    def add(A: T.Tensor((M, N), tdt), B: T.Tensor((M, N), tdt), C: T.Tensor((M, N), tdt)):
        with T.Kernel(M * N // 256, threads=256) as bx:
            T.annotate_l2_hit_ratio({B: 0.8})
            for i in T.serial(256):
                idx = bx * 256 + i
                C[idx // N, idx % N] = A[idx // N, idx % N] + B[idx // N, idx % N]

    k = tilelang.compile(add, out_idx=[-1])
    a, b = torch.randn(M, N, device="cuda", dtype=dtype), torch.randn(M, N, device="cuda", dtype=dtype)
    before = _persisting_limit()
    c = k(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
    assert _persisting_limit() == before


@sm90
def test_tma_store_partial_tile_keeps_the_tail():
    from test_tma_store_choice import store_1d

    n, block = 1000, 256
    for linear in (False, True):
        k = tilelang.compile(store_1d(n, block, linear=linear))
        assert "tma_store" in k.get_kernel_source()
        backing = torch.full((1024,), -1.0, device="cuda")
        k(backing[:n])
        torch.cuda.synchronize()
        torch.testing.assert_close(backing[:n], torch.arange(n, dtype=torch.float32, device="cuda"))
        assert torch.all(backing[n:] == -1.0)
    k = tilelang.compile(store_1d(1024, 256))
    out = torch.empty(1024, device="cuda")
    k(out)
    torch.testing.assert_close(out, torch.arange(1024, dtype=torch.float32, device="cuda"))


@sm90
@pytest.mark.parametrize("M, N, bm, bn", [(256, 64, 32, 64), (256, 256, 64, 64), (250, 256, 64, 64)])
def test_prefer_tma_loads(M, N, bm, bn):
    from test_tma_store_choice import elementwise

    k = tilelang.compile(elementwise(M, N, bm, bn))
    assert "tma_load" in k.get_kernel_source()
    a = torch.randn(M, N, device="cuda")
    b = torch.zeros(M, N, device="cuda")
    k(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, a * 2)


@sm90
@pytest.mark.parametrize("M, N", [(256, 64), (256, 256), (250, 200)])
def test_prefer_tma_2d_stores(M, N):
    from test_tma_store_choice import store_2d

    i = torch.arange(M, device="cuda")[:, None] % 64
    j = torch.arange(N, device="cuda")[None, :] % 64
    for kw in ({"prefer_instruction": "tma"}, {}):
        k = tilelang.compile(store_2d(M, N, 64, 64, **kw))
        backing = torch.full((M * N + 4096,), -1.0, device="cuda", dtype=torch.float16)
        out = backing[:M * N].view(M, N)
        k(out)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, (i + j).half())
        assert torch.all(backing[M * N:] == -1.0)    # nothing written past the tensor


@sm90
def test_strided_tma_copies():
    from test_tma_store_choice import COLS, ROW_STRIDE, ROWS, strided_row_load, strided_rows

    padded = torch.arange(ROWS * ROW_STRIDE, dtype=torch.float32, device="cuda").reshape(ROWS, ROW_STRIDE)
    view = padded[:, :COLS]
    out = torch.empty(COLS, device="cuda")
    tilelang.compile(strided_row_load())(view, out)
    torch.testing.assert_close(out, view[1])

    b = torch.empty(ROWS, COLS, device="cuda")
    tilelang.compile(strided_rows(True))(view, b)
    torch.testing.assert_close(b, view)

    dest = torch.full((ROWS, ROW_STRIDE), -1.0, device="cuda")
    src = torch.randn(ROWS, COLS, device="cuda")
    tilelang.compile(strided_rows(False))(src, dest[:, :COLS])
    torch.cuda.synchronize()
    torch.testing.assert_close(dest[:, :COLS], src)
    assert torch.all(dest[:, COLS:] == -1.0)
