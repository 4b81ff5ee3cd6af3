"""Runs in the worker process: its main loop and the requests it serves.

The parent (``worker_client.WorkerClient``, in the language server or ``tilelang-check``)
spawns this process and talks to it through a pipe of pickled dicts. ``serve`` first silences
file descriptors 1 and 2 (the server's fd 1 is the LSP channel, the CLI's its report: a stray
``print`` in user code or a native library must reach neither; ``TILELANG_LSP_DEBUG`` or
``TILELANG_CHECK_DEBUG`` keeps stderr), imports ``tilelang`` once, answers ``{"op": "ready"}``
and then dispatches requests by ``op``:

  ``load``      execute a file's definitions (``worker_build.load_module``; ``tilelang-check``);
  ``build``     build one bound kernel and check it (``worker_build.build_kernel``; ``tilelang-check``);
  ``check``     diagnostics and hover data of one document (``worker_check.CheckService``; the server);
  ``language``  the members of ``tilelang.language`` with signatures and docs (completion);
  ``compile``   lower one kernel, compile it with nvcc once, count PTX instructions (``worker_tools``);
  ``run``       run one kernel on the local GPU against ``ref_program`` (``worker_tools``);
  ``ping``      ``{"ok": True}``; ``exit`` ends the loop.

Every reply is a dict with ``ok``; an exception inside a handler becomes ``{"ok": False,
"internal": "..."}`` and the process keeps serving.

Garbage collection: this heap (tvm, torch, cached kernels) is large, so an automatic full
collection in the middle of a request costs 100+ ms. Automatic collection is off; the process
collects after sending each reply, while the editor has its answer, and then freezes the
survivors (``gc.freeze``) so the next collections only visit new objects. Every
``FULL_COLLECT_EVERY`` requests a full collection (unfreeze, collect everything: ~250 ms) is
due; it runs once no request has come for ``IDLE_SECONDS`` (the user paused), so the next
keystroke's check does not wait behind it, or at the latest ``FULL_COLLECT_EVERY`` requests later.
"""

from __future__ import annotations

import gc
import os
import sys
import traceback

FULL_COLLECT_EVERY = 64
IDLE_SECONDS = 1.0


def serve(conn) -> None:
    """The worker's main loop (see the module docstring)."""
    _silence_stdio()
    import tilelang  # noqa: F401 - the heavy import (tvm), once per worker

    from tilelang_lsp.worker_check import CheckService

    service, modules = CheckService(), {}
    _collect(full=True)
    gc.disable()
    conn.send({"op": "ready", "pid": os.getpid()})
    served, due = [0], [None]    # requests served; when a full collection fell due (or None)

    def after_reply():
        served[0] += 1
        if due[0] is None and served[0] % FULL_COLLECT_EVERY == 0:
            due[0] = served[0]
        overdue = due[0] is not None and served[0] - due[0] >= FULL_COLLECT_EVERY
        _collect(full=overdue)
        if overdue:
            due[0] = None

    def when_idle():
        if due[0] is not None:
            _collect(full=True)
            due[0] = None

    serve_requests(conn, lambda message: dispatch(service, modules, message), after_reply, when_idle)


def serve_requests(conn, handle, after_reply=None, when_idle=None) -> None:
    """Answer ``handle(message)`` for each request on ``conn`` until ``{"op": "exit"}`` or a closed
    pipe; an exception in ``handle`` becomes ``{"ok": False, "internal": ...}``, never a dead
    worker. ``after_reply()`` runs after each reply, ``when_idle()`` once no request has come for
    ``IDLE_SECONDS``."""
    while True:
        try:
            if when_idle is not None and not conn.poll(IDLE_SECONDS):
                when_idle()
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message.get("op") == "exit":
            return
        try:
            reply = handle(message)
        except Exception as err:  # noqa: BLE001 - reported to the parent as an internal error
            reply = {"ok": False, "internal": f"{type(err).__name__}: {err}\n{traceback.format_exc()}"}
        try:
            conn.send(reply)
        except (BrokenPipeError, OSError):
            return
        if after_reply is not None:
            after_reply()


def dispatch(service, modules: dict, message: dict) -> dict:
    """One request (see the module docstring); ``modules``: the ``load`` table of path -> module."""
    from tilelang_lsp import worker_build, worker_tools

    op = message.get("op")
    if op == "load":
        return worker_build.load_module(message, modules)
    if op == "build":
        module = modules.get(message["path"])
        if module is None:
            raise RuntimeError(f"{message['path']} was not loaded")
        return worker_build.build_kernel(module, message)
    if op == "check":
        return service.check(message)
    if op == "language":
        return {"ok": True, "members": worker_tools.language_index()}
    if op == "compile":
        return worker_tools.compile_kernel(service, message)
    if op == "run":
        return worker_tools.run_kernel(service, message)
    if op == "ping":
        return {"ok": True}
    raise ValueError(f"unknown request {op!r}")


def _silence_stdio() -> None:
    """Point fds 1 and 2 at /dev/null (with a debug variable set: only fd 1, at fd 2)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    if os.environ.get("TILELANG_LSP_DEBUG") or os.environ.get("TILELANG_CHECK_DEBUG"):
        os.dup2(2, 1)
    else:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
    os.close(devnull)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - lives as long as the process
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115


def _collect(full: bool) -> None:
    """Collect garbage between requests (see the module docstring)."""
    if full:
        gc.unfreeze()
    gc.collect()
    gc.freeze()
