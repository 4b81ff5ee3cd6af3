"""The language server's worker processes: where user code runs and tvm is imported.

The server process never imports tvm, torch or ``tilelang`` itself (start-up stays under a
second and a hung kernel build cannot freeze the editor). It talks to worker processes started
with ``multiprocessing`` (spawn) through a pipe of pickled dicts:

- ``WorkerClient`` (parent side): ``start()`` spawns the child, which imports ``tilelang`` once
  and answers ``{"op": "ready"}``; ``request(message, timeout)`` sends one request and waits for
  its reply. Past the time limit, or when the child dies, it kills the child (only its own) and
  raises ``WorkerTimeout`` / ``WorkerDied`` (the checker's exception types); the next request
  starts a fresh child. One request at a time: callers serialise (the server holds a lock).
- ``serve`` (child side): silences file descriptors 1 and 2 first (fd 1 of the server is the
  LSP channel: a stray ``print`` in user code or a native library must never reach it), then
  dispatches requests by ``op``:

  ``check``     diagnostics and hover data of one document (``lsp_check.CheckService``);
  ``language``  the members of ``tilelang.language`` with signatures and docs (completion);
  ``compile``   lower one kernel, run nvcc/ptxas, count PTX instructions (``lsp_tools``);
  ``run``       run one kernel on the local GPU against ``ref_program`` (``lsp_tools``).

  Every reply is a dict with ``ok``; an exception inside a handler becomes
  ``{"ok": False, "internal": "..."}`` and the child keeps serving.

  Garbage collection: the child's heap (tvm, torch, cached kernels) is large, so an automatic
  full collection in the middle of a check costs 100+ ms. Automatic collection is off; the
  child collects after sending each reply, while the editor has its answer, and then freezes
  the survivors (``gc.freeze``) so the next collections only visit new objects. Every
  ``FULL_COLLECT_EVERY`` requests it unfreezes and collects everything once.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading

from tilelang_lsp.worker import WorkerDied, WorkerTimeout

READY_TIMEOUT = 180.0
FULL_COLLECT_EVERY = 64

__all__ = ["WorkerClient", "WorkerDied", "WorkerTimeout", "serve"]


class WorkerClient:
    """The server's handle on one worker process (see the module docstring)."""

    def __init__(self, name: str = "tilelang-lsp-worker"):
        self.name = name
        self._proc = None
        self._conn = None
        self._ready = False
        self._lock = threading.Lock()   # guards start/stop against a concurrent shutdown
        self.starts = 0                 # how many children were started (tests look at it)

    @property
    def ready(self) -> bool:
        return self._ready and self._proc is not None and self._proc.is_alive()

    def start(self) -> None:
        """Spawn the child now (it imports tvm in the background); idempotent."""
        with self._lock:
            if self._proc is not None and self._proc.is_alive():
                return
            ctx = multiprocessing.get_context("spawn")
            self._conn, child = ctx.Pipe()
            self._proc = ctx.Process(target=serve, args=(child,), daemon=True, name=self.name)
            self._proc.start()
            child.close()
            self._ready = False
            self.starts += 1

    def request(self, message: dict, timeout: float) -> dict:
        """Send ``message``; its reply within ``timeout`` seconds (after the child is ready)."""
        self.start()
        if not self._ready:
            self._receive(READY_TIMEOUT)
            self._ready = True
        try:
            self._conn.send(message)
        except (BrokenPipeError, OSError, AttributeError):
            self.stop()
            raise WorkerDied("the worker process is gone") from None
        return self._receive(timeout)

    def _receive(self, timeout: float) -> dict:
        conn, proc = self._conn, self._proc
        try:
            if conn is None or not conn.poll(timeout):
                self.stop()
                raise WorkerTimeout(f"no answer within {timeout:g} s")
            return conn.recv()
        except (EOFError, OSError):
            code = proc.exitcode if proc is not None else None
            self.stop()
            raise WorkerDied(f"the worker process exited (status {code})") from None

    def stop(self) -> None:
        """Stop our child process (and only it)."""
        with self._lock:
            proc, conn = self._proc, self._conn
            self._proc, self._conn, self._ready = None, None, False
        if proc is None:
            return
        try:
            if proc.is_alive() and conn is not None:
                conn.send({"op": "exit"})
                proc.join(0.3)
        except (BrokenPipeError, OSError):
            pass
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        if conn is not None:
            conn.close()


# ----- the child process ------------------------------------------------------------------------

def _silence_stdio() -> None:
    """Point fds 1 and 2 at /dev/null (unless TILELANG_LSP_DEBUG is set: then only fd 1 at fd 2)."""
    import sys

    devnull = os.open(os.devnull, os.O_WRONLY)
    if os.environ.get("TILELANG_LSP_DEBUG"):
        os.dup2(2, 1)
    else:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
    os.close(devnull)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - lives as long as the process
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115


def serve(conn) -> None:
    """The worker's main loop (runs in the spawned child)."""
    _silence_stdio()
    import tilelang  # noqa: F401 - the heavy import (tvm), once per worker

    from tilelang_lsp.lsp_check import CheckService
    from tilelang_lsp.worker import serve_requests

    service = CheckService()
    _collect(full=True)
    gc.disable()
    conn.send({"op": "ready", "pid": os.getpid()})
    served = [0]

    def after_reply():
        served[0] += 1
        _collect(full=served[0] % FULL_COLLECT_EVERY == 0)

    serve_requests(conn, lambda message: _dispatch(service, message), after_reply)


def _collect(full: bool) -> None:
    """Collect garbage between requests (see the module docstring)."""
    if full:
        gc.unfreeze()
    gc.collect()
    gc.freeze()


def _dispatch(service, message: dict) -> dict:
    op = message.get("op")
    if op == "check":
        return service.check(message)
    if op == "language":
        from tilelang_lsp.lsp_tools import language_index

        return {"ok": True, "members": language_index()}
    if op == "compile":
        from tilelang_lsp.lsp_tools import compile_kernel

        return compile_kernel(service, message)
    if op == "run":
        from tilelang_lsp.lsp_tools import run_kernel

        return run_kernel(service, message)
    if op == "ping":
        return {"ok": True}
    raise ValueError(f"unknown request {op!r}")
