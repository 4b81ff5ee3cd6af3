"""IKET compile sessions: the CUDA post-processing callback and the host-side switches.

``enable(override=True)`` installs the IKET instrumenter as ``tilelang_callback_cuda_postproc``
(``tilelang.engine.callback``: every freshly generated kernel passes through it) and counts
nested enables; the outermost ``disable(restore=True)`` puts back the callback that was there
before (or none). ``enable(override=False)`` over another callback raises ``RuntimeError``.
``enable_runtime_payloads()``/``disable_runtime_payloads()`` choose whether instrumented
compiles record payload values (metadata types and value stores) or plain events.

``session(reset_events, override, disable_on_exit, output_dir, runtime_payloads,
disable_cache)`` does all of it around a ``with`` block: on entry it sets the output directory
and the payload mode (None keeps it), turns the kernel disk cache off (a cached binary may be
uninstrumented or built under another payload mode), enables the callback and resets the
event registry; on exit - also after an exception, or when entering failed half-way - it
releases the callback and restores directory, payload mode and cache switch exactly. One
session object cannot be entered twice at a time (``RuntimeError``); nested sessions are fine.
All of this state is process-wide.
"""

from __future__ import annotations

import os
import threading

import tvm_ffi

from tilelang.engine.callback import CUDA_POSTPROC
from tilelang.jit import cache as _cache

from . import cli
from .codegen import inject, target_arch
from .frontend import (_payloads, disable_runtime_payloads, enable_runtime_payloads, reset,
                       runtime_payloads_enabled)

_lock = threading.RLock()
_depth = [0]
_previous = [None]


def _postproc(source: str, target) -> str:
    return inject(source, target_arch(target), runtime_payloads=runtime_payloads_enabled())


def enable(*, override: bool = True) -> None:
    """Instrument every CUDA kernel generated from now on (nestable)."""
    with _lock:
        if _depth[0]:
            _depth[0] += 1
            return
        previous = tvm_ffi.get_global_func(CUDA_POSTPROC, allow_missing=True)
        if previous is not None and not override:
            raise RuntimeError(f"a {CUDA_POSTPROC} callback is already registered; iket.enable(override=False) "
                               "will not replace it")
        tvm_ffi.register_global_func(CUDA_POSTPROC, f=_postproc, override=True)
        _previous[0] = previous
        _depth[0] = 1


def disable(*, restore: bool = True) -> None:
    """Release one ``enable``; the last one removes the callback and, with ``restore``, puts
    back the one registered before."""
    with _lock:
        if not _depth[0]:
            return
        _depth[0] -= 1
        if _depth[0]:
            return
        previous, _previous[0] = _previous[0], None
        if restore and previous is not None:
            tvm_ffi.register_global_func(CUDA_POSTPROC, f=previous, override=True)
        elif tvm_ffi.get_global_func(CUDA_POSTPROC, allow_missing=True) is not None:
            tvm_ffi.remove_global_func(CUDA_POSTPROC)


def is_enabled() -> bool:
    with _lock:
        return _depth[0] > 0


class Session:
    """The context manager ``iket.session(...)`` returns (see the module docstring)."""

    def __init__(self, *, reset_events=True, override=True, disable_on_exit=True, output_dir=None,
                 runtime_payloads=None, disable_cache=True):
        self.reset_events = reset_events
        self.override = override
        self.disable_on_exit = disable_on_exit
        self.output_dir = output_dir
        self.runtime_payloads = runtime_payloads
        self.disable_cache = disable_cache
        self._saved = None
        self._enabled = False

    def __enter__(self):
        if self._saved is not None:
            raise RuntimeError("this iket.session() is already active: an IKET session object cannot be "
                               "entered again before it exits")
        saved = (cli._snapshot(), runtime_payloads_enabled(), _cache._SWITCH[0])
        try:
            if self.output_dir is not None:
                cli.set_output_dir(self.output_dir)
            if self.runtime_payloads is not None:
                (enable_runtime_payloads if self.runtime_payloads else disable_runtime_payloads)()
            if self.disable_cache:
                _cache.set_enabled(False)
            enable(override=self.override)
            self._enabled = True
            if self.reset_events:
                reset()
        except BaseException:
            if self._enabled:
                disable(restore=True)
                self._enabled = False
            self._restore(saved)
            raise
        self._saved = saved
        return self

    def __exit__(self, exc_type, exc, tb):
        saved, self._saved = self._saved, None
        try:
            if self._enabled and self.disable_on_exit:
                disable(restore=True)
        finally:
            self._enabled = False
            self._restore(saved)
        return False

    def _restore(self, saved) -> None:
        paths, payloads, cache_switch = saved
        cli._restore(paths)
        _payloads[0] = payloads
        if self.disable_cache:
            _cache.set_enabled(cache_switch)


def session(*, reset_events: bool = True, override: bool = True, disable_on_exit: bool = True,
            output_dir: str | os.PathLike | None = None, runtime_payloads: bool | None = None,
            disable_cache: bool = True) -> Session:
    """Instrument kernels compiled inside the ``with`` block (see the module docstring)."""
    return Session(reset_events=reset_events, override=override, disable_on_exit=disable_on_exit,
                   output_dir=output_dir, runtime_payloads=runtime_payloads, disable_cache=disable_cache)
