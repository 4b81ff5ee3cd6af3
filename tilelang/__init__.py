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

import logging

from tilelang.version import __version__  # noqa: F401

from tilelang import language  # noqa: F401 - installs the parser hooks
from tilelang import layout  # noqa: F401 - tilelang.layout.make_swizzled_layout, tilelang.layout.Layout
from tilelang.diagnostics import TileLangCompileError
from tilelang.jit import JITKernel, compile, jit, lower  # noqa: A004
from tilelang.profiler import Profiler, TensorSupplyType, do_bench
from tilelang import autotuner  # noqa: F401 - tilelang.autotuner.AutoTuner, set_autotune_inputs
from tilelang.autotuner import autotune
from tilelang.transform.pass_config import PassConfigKey
from tilelang import tvm_compat as _tvm_compat
from tilelang import cache, contrib, engine, math, testing, tileop, transform, utils  # noqa: F401
from tilelang.engine.callback import register_cuda_postproc, register_hip_postproc  # noqa: F401
from tilelang.jit import par_compile  # noqa: F401
from tilelang.layout import Fragment, Layout  # noqa: F401
from tilelang.utils.tensor import torch_assert_close  # noqa: F401
from tilelang.env import env  # noqa: E402 - ``tilelang.env`` is upstream's Environment object

import tvm  # noqa: E402 - ``from tilelang import tvm`` as upstream code writes it
from tvm import DataType  # noqa: E402,F401 - ``from tilelang import DataType``

_tvm_compat.install()

from tilelang.utils.pass_diff_hook import install_pass_diff_hook as _install_pass_diff_hook  # noqa: E402

_install_pass_diff_hook()   # TILELANG_PASS_DIFF: an IR diff of every compile stage (off: does nothing)
logger = logging.getLogger("tilelang")


def set_log_level(level) -> None:
    """Set the ``tilelang`` logger's level (a name such as "INFO" or a ``logging`` level); the
    first call also gives the logger a stderr handler, so its messages show without other setup."""
    if isinstance(level, str):
        name = level.upper()
        if not isinstance(logging.getLevelName(name), int):
            raise ValueError(f"unknown log level {level!r}; use DEBUG, INFO, WARNING, ERROR or CRITICAL")
        level = logging.getLevelName(name)
    logger.setLevel(level)
    if not any(getattr(h, "_tilelang", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s [TileLang:%(name)s:%(levelname)s] %(message)s"))
        handler._tilelang = True
        logger.addHandler(handler)


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


from tilelang.math import cdiv, next_power_of_2  # noqa: E402

_LAZY_SUBMODULES = ("carver", "cuda", "ir")   # upstream imports these with the package; here on first use


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"tilelang.{name}")
    raise AttributeError(f"module 'tilelang' has no attribute {name!r}")

if env.get_lower_trace_mode() is not None:   # TL_LOWER_TRACE: trace every compilation of this process
    from tilelang.tools.lower_trace import enable as _enable_lower_trace  # noqa: E402

    _enable_lower_trace()


__all__ = ["DataType", "Fragment", "JITKernel", "Layout", "PassConfigKey", "Profiler", "TensorSupplyType",
           "TileLangCompileError", "autotune", "autotuner", "cache", "cdiv", "compile", "disable_cache", "do_bench",
           "enable_cache", "env", "is_cache_enabled", "jit", "language", "lower", "next_power_of_2", "par_compile",
           "set_log_level", "tvm"]
