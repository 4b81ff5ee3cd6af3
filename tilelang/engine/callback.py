"""Post-processing callbacks on generated source (upstream's ``tilelang.engine.callback``).

    @register_cuda_postproc_callback
    def add_banner(code: str, target) -> str:
        return "// reviewed\\n" + code

Contract:
- A callback is a TVM FFI global function (``tilelang_callback_cuda_postproc`` for CUDA, the
  one this compiler calls); registering one replaces the previous unless ``override=False``
  (then a second registration raises). Code that registers the global itself with
  ``tvm_ffi.register_global_func`` is obeyed the same way.
- ``apply_cuda_postproc(source, arch)`` is what ``tilelang.engine.lower`` calls on every freshly
  generated kernel: the callback receives the CUDA source and a ``tvm.target.Target`` for the
  arch, and returns the source to compile. A kernel loaded from the disk cache is not generated
  again, so the callback does not run for it (as upstream's).
- HIP, C-host and Metal callbacks are registered (so upstream code runs) but never called: this
  compiler emits CUDA only.
"""

from __future__ import annotations

from collections.abc import Callable

import tvm_ffi

CUDA_POSTPROC = "tilelang_callback_cuda_postproc"
HIP_POSTPROC = "tilelang_callback_hip_postproc"
C_HOST_POSTPROC = "tilelang_callback_c_host_postproc"
METAL_POSTPROC = "tilelang_callback_metal_postproc"

__all__ = ["apply_cuda_postproc", "register_c_postproc", "register_c_postproc_callback", "register_cuda_postproc",
           "register_cuda_postproc_callback", "register_hip_postproc", "register_hip_postproc_callback",
           "register_metal_postproc", "register_metal_postproc_callback"]


def _register(name: str, func: Callable, override: bool) -> None:
    tvm_ffi.register_global_func(name, f=func, override=override)


def register_cuda_postproc(func: Callable, override: bool = True) -> None:
    """Run ``func(code, target) -> code`` on every CUDA kernel this compiler generates."""
    _register(CUDA_POSTPROC, func, override)


def register_hip_postproc(func: Callable, override: bool = True) -> None:
    """Registered for upstream code; never called (no HIP code generation here)."""
    _register(HIP_POSTPROC, func, override)


def register_c_postproc(func: Callable, override: bool = True) -> None:
    """Registered for upstream code; never called (no C host code is generated here)."""
    _register(C_HOST_POSTPROC, func, override)


def register_metal_postproc(func: Callable, override: bool = True) -> None:
    """Registered for upstream code; never called (no Metal code generation here)."""
    _register(METAL_POSTPROC, func, override)


def _decorator(register: Callable):
    def decorator(func=None, override: bool = True):
        if callable(func):
            register(func, override)
            return func
        if func is None or isinstance(func, bool):
            flag = func if isinstance(func, bool) else override

            def wrap(fn):
                register(fn, flag)
                return fn

            return wrap
        raise TypeError(f"use @{register.__name__}_callback, @{register.__name__}_callback() or "
                        f"@{register.__name__}_callback(override=False), not with {func!r}")

    decorator.__doc__ = f"Decorator form of ``{register.__name__}`` (with or without parentheses)."
    return decorator


register_cuda_postproc_callback = _decorator(register_cuda_postproc)
register_hip_postproc_callback = _decorator(register_hip_postproc)
register_c_postproc_callback = _decorator(register_c_postproc)
register_metal_postproc_callback = _decorator(register_metal_postproc)


def apply_cuda_postproc(source: str, arch: str) -> str:
    """``source`` after the registered CUDA callback, if any (see the module docstring)."""
    func = tvm_ffi.get_global_func(CUDA_POSTPROC, allow_missing=True)
    if func is None:
        return source
    from tvm.target import Target

    result = func(source, Target({"kind": "cuda", "arch": arch}))
    if not isinstance(result, str):
        raise TypeError(f"the CUDA post-processing callback returned {type(result).__name__}, not the source str")
    return result
