"""Compiling the configs of a tuning run: lowering one at a time, nvcc in parallel.

Contract:
- ``compile_all(thunks, compile_args, timeout, workers, report) -> {index: Built | Failed}``:
  ``thunks[i]()`` calls the factory for config ``i`` and returns a ``@T.prim_func`` (or an
  already compiled JITKernel); ``compile_args`` is one dict for all, or a list with one per
  config (per-config ``pass_configs``).  ``report(outcome)`` is called in the calling thread as each
  outcome arrives, and ``report(None)`` while waiting (a few times a second).
- Each config runs in its own thread, at most ``workers`` at once.  The Python part (the
  factory, then lowering) runs under one process-wide lock, ``tilelang.jit.LOWER_LOCK``: it holds the GIL
  anyway, and the passes share TVM state (one arith analyzer) that is not thread-safe.
  nvcc, a subprocess, runs outside the lock, so the compiles overlap.
- Kernels go through the kernel disk cache under the same key as ``tilelang.compile`` (its
  lowering half, ``tilelang.jit.lower_for_compile``, is shared), so a kernel compiled while
  tuning is a cache hit when the winner is compiled again, in this process or a later one.
- ``timeout`` (seconds) bounds each config from the moment its lowering starts; a config
  over it is reported as failed and its thread is abandoned (a daemon: nvcc finishes in
  the background and its result is dropped).  If the config that timed out was still
  lowering, it may hold the lock for good, so every config not yet lowered fails too.
- Failures never raise: each becomes ``Failed(index, reason)`` with a one-line reason
  (``reason_of``).  ``compile_all`` never returns before every config has an outcome.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from dataclasses import dataclass

from tilelang.jit import LOWER_LOCK, cache, nvcc
from tilelang.jit.kernel import JITKernel
_POLL_S = 0.2


@dataclass
class Built:
    index: int
    kernel: JITKernel
    seconds: float


@dataclass
class Failed:
    index: int
    reason: str


def build_kernel(func, compile_args: dict) -> JITKernel:
    """``tilelang.compile(func, **compile_args)``, in two halves so only the first needs the lock."""
    with LOWER_LOCK:
        key, artifact = lower_cached(func, compile_args)
    return finish(key, artifact, func)


def lower_cached(func, compile_args: dict):
    """The cache key and artifact (from the kernel cache when present) of ``tilelang.compile``."""
    from tilelang.jit import lower_for_compile

    return lower_for_compile(func, compile_args.get("out_idx"), compile_args.get("target", "auto"),
                             compile_args.get("pass_configs"), compile_args.get("compile_flags"))


def finish(key: str, artifact, func) -> JITKernel:
    """Run nvcc when the artifact has no cubin yet, store it, and wrap it in a JITKernel (an
    artifact of several kernels builds each part's cubin on first launch and is stored then, as
    with ``tilelang.compile``)."""
    if artifact.cubin is None and not artifact.parts:
        artifact.cubin = nvcc.compile_cubin(artifact.source, artifact.arch, artifact.compile_flags)
        if cache.enabled():
            cache.store(key, artifact)
    return JITKernel(artifact, prim_func=func).store_parts_under(key)


def reason_of(error: BaseException) -> str:
    """One line saying why a config failed."""
    from tilelang.diagnostics import TileLangCompileError

    if isinstance(error, TileLangCompileError) and error.diagnostics:
        d = error.diagnostics[0]
        where = f" ({d.span.file}:{d.span.line})" if d.span is not None else ""
        return f"error[{d.code}]: {_first_line(d.message)}{where}"
    if isinstance(error, nvcc.NVCCError) and error.log:
        lines = [l.strip() for l in error.log.splitlines() if "error" in l.lower()]
        return f"nvcc: {_first_line(lines[0] if lines else error.log)}"
    if isinstance(error, AssertionError):  # a failed check: the message says it all
        return _first_line(str(error))
    return f"{type(error).__name__}: {_first_line(str(error))}"


def _first_line(text: str, limit: int = 240) -> str:
    line = next((l.strip() for l in str(text).splitlines() if l.strip()), "(no message)")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _job(index: int, thunk, compile_args: dict, started: dict, outcomes: queue.Queue) -> None:
    try:
        with LOWER_LOCK:
            t0 = time.monotonic()
            started[index] = ("lowering", t0)
            func = thunk()
            if isinstance(func, JITKernel):
                outcomes.put(Built(index, func, time.monotonic() - t0))
                return
            if not hasattr(func, "script"):
                raise TypeError(f"the factory returned {type(func).__name__}, not a @T.prim_func")
            key, artifact = lower_cached(func, compile_args)
            started[index] = ("nvcc", t0)
        kernel = finish(key, artifact, func)
        outcomes.put(Built(index, kernel, time.monotonic() - t0))
    except Exception as e:  # noqa: BLE001 - every failure becomes a reason, never an abort
        outcomes.put(Failed(index, reason_of(e)))


def compile_all(thunks: list, compile_args: dict, timeout: float, workers: int, report) -> dict:
    """Compile every thunk (see the module docstring); returns ``{index: Built | Failed}``."""
    outcomes: queue.Queue = queue.Queue()
    started: dict = {}
    results: dict = {}
    todo = collections.deque(range(len(thunks)))
    running: set = set()
    lock_lost = False
    while todo or running:
        while todo and len(running) < max(1, workers) and not lock_lost:
            i = todo.popleft()
            running.add(i)
            args_i = compile_args[i] if isinstance(compile_args, list) else compile_args
            threading.Thread(target=_job, args=(i, thunks[i], args_i, started, outcomes),
                             name=f"tilelang-autotune-{i}", daemon=True).start()
        try:
            outcome = outcomes.get(timeout=_POLL_S)
            if outcome.index in running:
                running.discard(outcome.index)
                results[outcome.index] = outcome
                report(outcome)
        except queue.Empty:
            report(None)
        lock_lost = _expire(running, started, timeout, results, report) or lock_lost
        if lock_lost:
            for i in [*todo, *(j for j in running if j not in started)]:
                results[i] = Failed(i, "not compiled: the lowering of another config hung")
                running.discard(i)
                report(results[i])
            todo.clear()
    return results


def _expire(running: set, started: dict, timeout: float, results: dict, report) -> bool:
    """Fail configs over the timeout; True when one of them was holding the lowering lock."""
    now, lost = time.monotonic(), False
    for i in sorted(running):
        phase, t0 = started.get(i, (None, None))
        if t0 is not None and now - t0 > timeout:
            running.discard(i)
            results[i] = Failed(i, f"timed out after {timeout:g} s (in {phase})")
            report(results[i])
            lost = lost or phase == "lowering"
    return lost
