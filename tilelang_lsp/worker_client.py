"""Runs in the parent process (the language server, or ``tilelang-check``): the handle on a worker.

User code and the compiler (tvm, torch, ``tilelang``) run in worker processes started with
``multiprocessing`` (spawn); this module imports none of them. ``WorkerClient`` is the one
client both parents use:

- ``start()`` spawns the child (idempotent); the child imports ``tilelang`` once and answers
  ``{"op": "ready"}``, which ``request`` waits for up to ``READY_TIMEOUT`` seconds.
- ``request(message, timeout)`` sends one request (a dict) and returns its reply (a dict). Past
  the time limit, or when the child dies, it kills the child (only its own) and raises
  ``WorkerTimeout`` / ``WorkerDied``; the next request starts a fresh child. One request at a
  time: callers serialise (the server holds a lock per worker).
- ``loaded``: path -> module name of the last successful ``load`` in the current child (the
  checker ``Session`` reads and writes it); cleared whenever the child changes.

The requests and the child's side are ``tilelang_lsp.worker_main``; the spawned process enters
through ``_child``, which only imports that module.
"""

from __future__ import annotations

import multiprocessing
import threading

from tilelang_lsp.worker_errors import WorkerDied, WorkerTimeout

READY_TIMEOUT = 180.0   # a cold first import of tvm and torch on a slow disk

__all__ = ["READY_TIMEOUT", "WorkerClient", "WorkerDied", "WorkerTimeout"]


class WorkerClient:
    """The parent's handle on one worker process (see the module docstring)."""

    def __init__(self, name: str = "tilelang-worker"):
        self.name = name
        self._proc = None
        self._conn = None
        self._ready = False
        self._lock = threading.Lock()   # guards start/stop against a concurrent shutdown
        self.starts = 0                 # how many children were started (tests look at it)
        self.loaded: dict = {}

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
            self._proc = ctx.Process(target=_child, args=(child,), daemon=True, name=self.name)
            self._proc.start()
            child.close()
            self._ready = False
            self.loaded = {}
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
            self.loaded = {}
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


def _child(conn) -> None:
    """The spawned process's entry: hand over to the worker's main loop."""
    from tilelang_lsp.worker_main import serve

    serve(conn)
