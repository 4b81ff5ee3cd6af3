"""TileLang: a tile-level GPU kernel language embedded in Python, with its compiler and runtime.

    import tilelang
    import tilelang.language as T

    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, block_N=128, block_K=32): ...

The pipeline: ``tilelang.frontend`` (TVMScript parser, spans) -> ``tilelang.transform`` (layout
inference, tile-op lowering, pipelining) -> ``tilelang.codegen`` (TVM CUDA codegen + ``src/``)
-> ``tilelang.jit`` (nvcc, disk cache, launch on torch tensors).
"""

from __future__ import annotations

__version__ = "0.1.0"

from tilelang import language  # noqa: F401 - installs the parser hooks
from tilelang import layout  # noqa: F401 - tilelang.layout.make_swizzled_layout, tilelang.layout.Layout
from tilelang.diagnostics import TileLangCompileError
from tilelang.jit import JITKernel, compile, jit, lower  # noqa: A004
from tilelang.profiler import Profiler, TensorSupplyType, do_bench
from tilelang import autotuner  # noqa: F401 - tilelang.autotuner.AutoTuner, set_autotune_inputs
from tilelang.autotuner import autotune
from tilelang.transform.pass_config import PassConfigKey

import tvm  # noqa: E402 - ``from tilelang import tvm`` as upstream code writes it


def enable_cache() -> None:
    """Use the kernel disk cache in this process (the default unless TILELANG_DISABLE_CACHE=1)."""
    from tilelang.jit import cache

    cache.set_enabled(True)


def disable_cache() -> None:
    """Neither load nor store cached kernels in this process."""
    from tilelang.jit import cache

    cache.set_enabled(False)


def is_cache_enabled() -> bool:
    from tilelang.jit import cache

    return cache.enabled()


def cdiv(a, b):
    """Ceiling division of integers (or TIR expressions)."""
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return language.ceildiv(a, b)


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


__all__ = ["JITKernel", "PassConfigKey", "Profiler", "TensorSupplyType", "TileLangCompileError", "autotune", "autotuner", "cdiv",
           "compile", "disable_cache", "do_bench", "enable_cache", "is_cache_enabled", "jit", "language", "lower",
           "next_power_of_2", "tvm"]
