"""Upstream's import path for the autotuner's argument and result records:
``from tilelang.autotuner.param import CompileArgs, ProfileArgs, AutotuneResult``.

The records live in ``tilelang.autotuner.tuner``; this module only names them where upstream
code looks for them.
"""

from __future__ import annotations

import logging

from tilelang.autotuner.tuner import AutotuneResult, CompileArgs, ConfigResult, ProfileArgs

logger = logging.getLogger(__name__)

# The file names of upstream's on-disk autotune entry (one directory per tuning). Our tuner keeps a
# single JSON record per tuning instead (``tilelang.autotuner.store``); the names are exported so
# upstream code that refers to them imports.
BEST_CONFIG_PATH = "best_config.json"
FUNCTION_PATH = "function.pkl"
OUT_IDX_PATH = "out_idx.json"
LATENCY_PATH = "latency.json"
DEVICE_KERNEL_PATH = "device_kernel.cu"
HOST_KERNEL_PATH = "host_kernel.cu"
EXECUTABLE_PATH = "executable.so"
KERNEL_LIB_PATH = "kernel_lib.so"
KERNEL_CUBIN_PATH = "kernel.cubin"
KERNEL_PY_PATH = "kernel.py"
PARAMS_PATH = "params.pkl"

__all__ = ["AutotuneResult", "BEST_CONFIG_PATH", "CompileArgs", "ConfigResult", "DEVICE_KERNEL_PATH",
           "EXECUTABLE_PATH", "FUNCTION_PATH", "HOST_KERNEL_PATH", "KERNEL_CUBIN_PATH", "KERNEL_LIB_PATH",
           "KERNEL_PY_PATH", "LATENCY_PATH", "OUT_IDX_PATH", "PARAMS_PATH", "ProfileArgs"]
