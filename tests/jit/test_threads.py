"""tilelang.compile and @tilelang.jit from several threads: tracing and lowering take turns under
tilelang.jit.LOWER_LOCK, the nvcc runs overlap, and every thread gets its own kernel."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc


@tilelang.jit(out_idx=[-1])
def scale(n, factor):
    @T.prim_func
    def kernel(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i] * factor

    return kernel


def test_threads_compile_in_parallel_and_get_their_own_kernels(monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    running, peak, lock = [0], [0], threading.Lock()

    def slow_nvcc(source, arch, flags=(), include_dirs=()):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.3)
        with lock:
            running[0] -= 1
        return b"\x7fELF fake cubin"

    monkeypatch.setattr(nvcc, "compile_cubin", slow_nvcc)
    factors = [1.5, 2.5, 3.5, 4.5]
    with ThreadPoolExecutor(4) as pool:
        kernels = list(pool.map(lambda f: scale(1024, f), factors))
    assert peak[0] > 1, "nvcc ran one compile at a time"
    for f, k in zip(factors, kernels):
        assert str(f) in k.get_kernel_source()
