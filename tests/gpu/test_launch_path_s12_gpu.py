"""The inline launch (ArgPlan.bind_direct: config + arguments packed in one call, cuLaunchKernelEx)
on a real GPU: results equal to torch's, over many calls, new output addresses (tensor maps
re-encoded), other streams, a fresh thread and a scalar argument. Skipped without a GPU."""

import threading

import pytest
import torch
import torch.nn.functional as F

import tilelang
import tilelang.language as T

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@tilelang.jit(out_idx=[1])
def row_sum(M, N, dtype, block_M=4):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            tile = T.alloc_fragment((block_M, N), dtype)
            sums = T.alloc_fragment((block_M,), dtype)
            T.copy(X[bx * block_M, 0], tile)
            T.reduce_sum(tile, sums, dim=1)
            T.copy(sums, Y[bx * block_M])
    return main


@tilelang.jit(out_idx=[1])
def axpb(N, block=256):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), a: T.float32):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i] * a + 1.0
    return main


def _bound(kernel) -> bool:
    return kernel._plan is not None and kernel._plan._ns.get("_ddev") == torch.cuda.current_device()


def test_many_calls_after_binding_match_torch():
    k = row_sum(4096, 1024, "float32")
    x = torch.randn(4096, 1024, device="cuda")
    outs = [k(x) for _ in range(50)]
    assert _bound(k)
    torch.cuda.synchronize()
    for y in outs:
        torch.testing.assert_close(y, x.sum(1), rtol=1e-4, atol=1e-3)


def test_scalar_and_other_stream():
    k = axpb(1 << 16)
    x = torch.randn(1 << 16, device="cuda")
    for a in (0.5, -2.0, 3.25):
        torch.testing.assert_close(k(x, a), x * a + 1.0)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = k(x, 1.5)
    s.synchronize()
    torch.testing.assert_close(y, x * 1.5 + 1.0)
    assert _bound(k)


def test_fresh_thread_launches_through_the_context_fallback():
    k = axpb(4096)
    x = torch.randn(4096, device="cuda")
    k(x, 1.0), k(x, 1.0)
    result, errors = [], []

    def work():
        try:
            result.append(k(x, 2.0))
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert not errors, errors
    torch.testing.assert_close(result[0], x * 2.0 + 1.0)


def test_tensor_map_output_at_new_addresses():
    """The attention forward of bench_launch stores its output through a TMA tensor map on sm_90:
    keeping every output alive forces new addresses, so the map is re-encoded each call."""
    import importlib.util
    import pathlib

    spec = importlib.util.spec_from_file_location(
        "bench_launch", pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "bench_launch.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    _, _, attention = bench.build_kernels()
    k = attention(2, 4, 512, 64)
    q, kk, v = (torch.randn(2, 4, 512, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    outs = [k(q, kk, v) for _ in range(8)]
    want = F.scaled_dot_product_attention(q, kk, v)
    assert len({o.data_ptr() for o in outs}) == 8
    for o in outs:
        torch.testing.assert_close(o, want, rtol=2e-2, atol=2e-2)
