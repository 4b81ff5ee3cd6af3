"""Compiling a group of autotuning configurations at once (upstream's
``tilelang.autotuner.grouped_compile``).

Contract:
- ``compile_grouped_unit_tvm_ffi(unit_items, compile_args, elaborate_func)`` -> a list of
  ``(index, config, kernel, error)``, one per ``(index, config)`` of ``unit_items``: the
  ``@T.prim_func`` ``elaborate_func(**config)`` compiled with ``compile_args`` (``out_idx``,
  ``target``, ``pass_configs``, ``compile_flags``) into a ``JITKernel``, with ``error`` None; a
  configuration that fails to build or compile gets ``kernel`` None and the exception as
  ``error``, the others still compile. Results keep the order of ``unit_items``.
- Each configuration is lowered on its own, from a fresh state: nothing one kernel's lowering
  learns (layouts, analyzer facts) reaches the next. Upstream merges the device code of the
  group into one module; here every kernel gets its own cubin (through the same disk cache as
  ``tilelang.compile``), which is what callers observe either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["CompileUnitResult", "compile_grouped_unit_tvm_ffi"]

CompileUnitResult = tuple  # (index, config, JITKernel | None, Exception | None)


def compile_grouped_unit_tvm_ffi(unit_items: list[tuple[int, dict[str, Any]]], compile_args,
                                 elaborate_func: Callable[..., Any]) -> list[CompileUnitResult]:
    """Compile every configuration of ``unit_items`` (see the module docstring)."""
    from tilelang.jit import compile as compile_kernel

    target = getattr(compile_args, "target", "auto")
    results = []
    for index, config in unit_items:
        try:
            func = elaborate_func(**config)
            kernel = compile_kernel(func, out_idx=getattr(compile_args, "out_idx", None),
                                    target=target if target is not None else "auto",
                                    pass_configs=getattr(compile_args, "pass_configs", None),
                                    compile_flags=getattr(compile_args, "compile_flags", None))
        except Exception as err:  # noqa: BLE001 - one configuration's failure is its own result
            results.append((index, config, None, err))
            continue
        results.append((index, config, kernel, None))
    return results
