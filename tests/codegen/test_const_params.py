"""Tensor parameters the kernel only reads are declared ``const T* __restrict__`` (codegen/cuda.py
``read_only_params``); anything written, atomically updated or whose address escapes stays mutable
(CPU: generated source, and nvcc accepts it)."""

import re

import tilelang
import tilelang.language as T

SM90 = "cuda -arch=sm_90a"


def _signature(func) -> str:
    src = tilelang.compile(func, target=SM90).get_kernel_source()
    return re.search(r'__global__ void (?:__launch_bounds__\([^)]*\) )?\w+\(([^)]*)\)\s*\{', src).group(1)


def test_loaded_tensors_are_const_written_ones_are_not():
    @T.prim_func
    def k(A: T.Tensor((1024,), T.float16), B: T.Tensor((1024,), T.float16), C: T.Tensor((1024,), T.float16)):
        with T.Kernel(8, threads=128) as bx:
            for i in T.Parallel(128):
                C[bx * 128 + i] = A[bx * 128 + i] + B[bx * 128 + i]

    sig = _signature(k)
    assert "const half* __restrict__ A" in sig and "const half* __restrict__ B" in sig
    assert re.search(r"(?<!const )half\* __restrict__ C", sig)


def test_cp_async_sources_are_const_atomic_targets_are_not():
    @T.prim_func
    def k(A: T.Tensor((256, 1024), T.float16), X: T.Tensor((1024,), T.float16), O: T.Tensor((256,), T.float32)):
        with T.Kernel(2, threads=128) as bx:
            a_s = T.alloc_shared((128, 128), T.float16)
            acc = T.alloc_fragment((128,), T.float32)
            T.clear(acc)
            for k in T.Pipelined(8, num_stages=2):
                T.copy(A[bx * 128, k * 128], a_s)            # cp.async: A is its source
                for i in T.Parallel(128):
                    for j in T.serial(128):
                        acc[i] += T.cast(a_s[i, j] * X[k * 128 + j], T.float32)
            for i in T.Parallel(128):
                T.atomic_add(O[bx * 128 + i], acc[i])

    sig = _signature(k)
    assert "const half* __restrict__ A" in sig and "const half* __restrict__ X" in sig
    assert re.search(r"(?<!const )float\* __restrict__ O", sig)


def test_read_only_params_of_a_lowered_function():
    from tilelang.codegen.cuda import read_only_params
    from tvm.script import tirx as TS

    @TS.prim_func
    def f(a: TS.Buffer((16,), "float32"), b: TS.Buffer((16,), "float32"), c: TS.Buffer((16,), "float32")):
        for i in range(16):
            b[i] = a[i]
        TS.evaluate(TS.call_extern("int32", "user_fn", TS.address_of(c[0])))

    assert read_only_params(f) == {"a"}
