"""Compiling the configs of a tuning run: lowering in forked processes (or one at a time), nvcc in parallel.

Contract:
- ``compile_all(thunks, compile_args, timeout, workers, report) -> {index: Built | Failed}``:
  ``thunks[i]()`` calls the factory for config ``i`` and returns a ``@T.prim_func`` (or an
  already compiled JITKernel); ``compile_args`` is one dict for all, or a list with one per
  config (per-config ``pass_configs``).  ``report(outcome)`` is called in the calling thread as each
  outcome arrives, and ``report(None)`` while waiting (a few times a second).
- Each config runs in its own thread, at most ``workers`` at once.  The factory runs in this
  process under one process-wide lock, ``tilelang.jit.LOWER_LOCK``: it holds the GIL anyway,
  and tracing and the passes share TVM state (one arith analyzer) that is not thread-safe.
- Lowering runs in a child forked under that lock (``lower_process``), at most
  ``lowering_processes(workers, n)`` at once: min(workers, usable CPUs, n), or 1, meaning
  lowering in this process under the lock, one config at a time, on fewer than 4 configs, off
  Linux, or with ``TILELANG_AUTOTUNE_LOWER_PROCS=1`` (a larger value caps the count).  The
  child inherits the PrimFunc and sends back the cache key and the artifact through a pipe.
  The target is resolved to an arch here first, and the factory ran here too, so no child
  touches CUDA.  A child that cannot be forked, or whose failure may come from being a forked
  child (see ``lower_process``), has its config lowered in this process instead.
- nvcc, a subprocess, runs outside the lock in the config's thread, so the compiles overlap.
- Kernels go through the kernel disk cache under the same key as ``tilelang.compile`` (its
  lowering half, ``tilelang.jit.lower_for_compile``, is shared), so a kernel compiled while
  tuning is a cache hit when the winner is compiled again, in this process or a later one.
- ``timeout`` (seconds) bounds each config from the moment its factory starts; a config
  over it is reported as failed and its thread is abandoned (a daemon: nvcc finishes in
  the background and its result is dropped); its forked lowering, if any, is killed (and
  reaped by the thread).  If the config that timed out was running its factory or lowering
  in this process, it may hold the lock for good, so every config not yet started fails too.
- Failures never raise: each becomes ``Failed(index, reason)`` with a one-line reason
  (``reason_of``; a forked lowering's failure gives the same line, one that crashes
  "the lowering process died (SIGSEGV)").  ``compile_all`` never returns before every config
  has an outcome, and leaves no forked lowering running when it returns or raises.
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass

from tilelang.autotuner.lower_process import LoweringChild
from tilelang.jit import LOWER_LOCK, cache, nvcc
from tilelang.jit.kernel import JITKernel

_POLL_S = 0.2
_MIN_FORKED_CONFIGS = 4   # fewer: forking is not worth it


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
        artifact.cubin = nvcc.compile_artifact(artifact)
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


def lowering_processes(workers: int, configs: int) -> int:
    """How many configs lower at once in forked processes; 1: all in this process, one at a time."""
    from tilelang import knobs

    wanted = knobs.autotune_lower_procs()
    if wanted == 1 or configs < _MIN_FORKED_CONFIGS or not sys.platform.startswith("linux"):
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    procs = min(max(1, workers), cpus, configs)
    return min(procs, wanted) if wanted else procs


def _resolve_target(compile_args: dict) -> dict:
    """``compile_args`` with its target as an arch string: detecting the GPU (through torch.cuda)
    must happen here, in the parent, never in a forked child."""
    from tilelang.engine.lower import normalize_target

    try:
        return {**compile_args, "target": normalize_target(compile_args.get("target", "auto"))}
    except (TypeError, ValueError):
        return compile_args  # a bad target: the lowering fails with its own message


class _Run:
    """The state one ``compile_all`` shares with its threads."""

    def __init__(self, procs: int):
        self.outcomes: queue.Queue = queue.Queue()
        # index -> (phase, start time, the LoweringChild lowering it or None); a config in
        # "lowering" without a child holds LOWER_LOCK.
        self.started: dict = {}
        self.forking = procs > 1
        self.slots = threading.BoundedSemaphore(procs)


def _job(index: int, thunk, compile_args: dict, run: _Run) -> None:
    try:
        kernel = _build(index, thunk, compile_args, run)
        run.outcomes.put(Built(index, kernel, time.monotonic() - run.started[index][1]))
    except _ChildFailure as e:
        run.outcomes.put(Failed(index, str(e)))
    except Exception as e:  # noqa: BLE001 - every failure becomes a reason, never an abort
        run.outcomes.put(Failed(index, reason_of(e)))


def _build(index: int, thunk, compile_args: dict, run: _Run) -> JITKernel:
    """The factory, then lowering (in a forked child when ``run.forking``), then nvcc."""
    lowered = child = None
    with run.slots if run.forking else contextlib.nullcontext():
        with LOWER_LOCK:
            t0 = time.monotonic()
            run.started[index] = ("lowering", t0, None)
            func = thunk()
            if isinstance(func, JITKernel):
                return func
            if not hasattr(func, "script"):
                raise TypeError(f"the factory returned {type(func).__name__}, not a @T.prim_func")
            child = _fork(func, compile_args) if run.forking else None
            if child is None:
                lowered = lower_cached(func, compile_args)
            else:
                run.started[index] = ("lowering", t0, child)
        if child is not None:
            lowered = _answer(child.wait())
    if lowered is None:  # the forked lowering asks for this process (see lower_process)
        with LOWER_LOCK:
            run.started[index] = ("lowering", t0, None)
            lowered = lower_cached(func, compile_args)
    run.started[index] = ("nvcc", t0, None)
    return finish(*lowered, func)


def _fork(func, compile_args: dict) -> LoweringChild | None:
    try:
        return LoweringChild.fork(func, compile_args, lower_cached, reason_of)
    except OSError:  # no process to be had (memory, process limit): lower here
        return None


def _answer(answer: tuple):
    """(key, artifact) from a forked child's answer, None to lower in this process, or raise."""
    if answer[0] == "ok":
        return answer[1], answer[2]
    if answer[0] == "retry":
        return None
    raise _ChildFailure(answer[1])


class _ChildFailure(Exception):
    """A forked lowering's failure; its message is the one-line reason."""


def compile_all(thunks: list, compile_args, timeout: float, workers: int, report) -> dict:
    """Compile every thunk (see the module docstring); returns ``{index: Built | Failed}``."""
    run = _Run(lowering_processes(workers, len(thunks)))
    per_config = [_resolve_target(compile_args[i] if isinstance(compile_args, list) else compile_args)
                  for i in range(len(thunks))]
    if run.forking:
        cache.compiler_version()  # computed once here, not once per child
    results: dict = {}
    todo = collections.deque(range(len(thunks)))
    running: set = set()
    lock_lost = False
    try:
        while todo or running:
            while todo and len(running) < max(1, workers) and not lock_lost:
                i = todo.popleft()
                running.add(i)
                threading.Thread(target=_job, args=(i, thunks[i], per_config[i], run),
                                 name=f"tilelang-autotune-{i}", daemon=True).start()
            try:
                outcome = run.outcomes.get(timeout=_POLL_S)
                if outcome.index in running:
                    running.discard(outcome.index)
                    results[outcome.index] = outcome
                    report(outcome)
            except queue.Empty:
                report(None)
            lock_lost = _expire(running, run.started, timeout, results, report) or lock_lost
            if lock_lost:
                for i in [*todo, *(j for j in running if j not in run.started)]:
                    results[i] = Failed(i, "not compiled: the lowering of another config hung")
                    running.discard(i)
                    report(results[i])
                todo.clear()
    finally:  # also on an exception (Ctrl-C): no forked lowering outlives the run
        for i in running:
            _kill_child(run.started, i)
    return results


def _kill_child(started: dict, index: int) -> None:
    child = started.get(index, (None, None, None))[2]
    if child is not None:
        child.kill()


def _expire(running: set, started: dict, timeout: float, results: dict, report) -> bool:
    """Fail configs over the timeout (killing their forked lowering); True when one of them was
    holding the lowering lock."""
    now, lost = time.monotonic(), False
    for i in sorted(running):
        phase, t0, child = started.get(i, (None, None, None))
        if t0 is not None and now - t0 > timeout:
            running.discard(i)
            if child is not None:
                child.kill()
            results[i] = Failed(i, f"timed out after {timeout:g} s (in {phase})")
            report(results[i])
            lost = lost or (phase == "lowering" and child is None)
    return lost
