"""Runs in the language-server process.

The server's per-document state: settings, the diagnostics scheduler and its results.

Contract of the scheduler (``Checks``):
- ``did_change`` only stores text and version (pygls's workspace does) and calls ``touch``.
- Debounce per URI: an edit after a quiet period (``DEBOUNCE`` seconds without edits) is checked
  at once; edits arriving faster are coalesced and checked ``DEBOUNCE`` after the last one.
  At most one check per URI is in flight; the worker serves one check at a time.
- A check works on a snapshot ``(version, text)``. A result whose version is no longer the
  document's is dropped (and the newest text is checked); a delivered result is pushed with
  ``textDocument/publishDiagnostics`` and its version (push mode) and resolves pending
  ``textDocument/diagnostic`` requests (pull mode).
- Syntax errors are found by the server itself (TL0001 with the parser's range, as the checker
  reports it); for text that does not parse the server's result is delivered and the worker's
  dropped, and the last kernels' hover data are kept. Valid text loses no time to it: when the
  worker is idle it gets the text at once and finds a syntax error as fast as the server would,
  so the server parses only when the worker reports TL0001 or fails; when the worker is busy
  with another request the server parses while waiting for it.
- A worker that times out or dies becomes a diagnostic (TL0803 / TL0003) and is restarted by
  the next request; nothing here raises into the LSP loop.
- ``close`` cancels the document's check, forgets it and clears its diagnostics.
"""

from __future__ import annotations

import ast
import asyncio
import logging
import re
import time
from dataclasses import dataclass, field

from tilelang_lsp.worker_errors import WorkerDied, WorkerTimeout

log = logging.getLogger("tilelang_lsp")

# The trailing wait after a burst of edits. Edits after a pause are checked at once, and at most
# one check per document is in flight (edits during it are coalesced: the newest text is checked
# next), so the debounce only has to merge keystrokes closer than one check (~50 ms, key repeat
# ~30-40 ms); a longer one only adds to the latency of the last keystroke of a burst.
DEBOUNCE = 0.05
PULL_WAIT = 60.0
_TARGET = re.compile(r"^(sm_)?\d{2,3}[af]?$")


@dataclass
class Settings:
    """``tilelang.*`` settings (initializationOptions or workspace configuration)."""

    allow_execution: bool = True
    target: str | None = None          # None: [tool.tilelang.check] target, else sm_90a
    code_lens: bool = True
    timeout: float = 20.0              # seconds per kernel build
    diagnostic_mode: str = "auto"      # auto (pull when the client can), push, pull
    client_handles_results: bool = False  # the editor opens lens results itself (VS Code)

    _KEYS = {"allowExecution": ("allow_execution", bool), "target": ("target", str),
             "codeLens": ("code_lens", bool), "lenses": ("code_lens", bool), "timeout": ("timeout", float),
             "diagnosticMode": ("diagnostic_mode", str), "clientHandlesResults": ("client_handles_results", bool)}

    def update(self, data) -> list[str]:
        """Apply a settings dict (``{"tilelang": {...}}`` or the inner dict); returns problems."""
        if not isinstance(data, dict):
            return []
        if isinstance(data.get("tilelang"), dict):
            data = data["tilelang"]
        problems = []
        for key, value in data.items():
            if key not in self._KEYS or value is None:
                continue
            name, kind = self._KEYS[key]
            problem = self._set(name, kind, value)
            if problem:
                problems.append(f"tilelang.{key}: {problem}")
        return problems

    def _set(self, name: str, kind, value) -> str | None:
        if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            value = float(value)
        elif not isinstance(value, kind):
            return f"expected a {kind.__name__}, got {value!r}"
        if name == "target" and value in ("", "auto"):
            value = None
        elif name == "target" and not _TARGET.match(value):
            return f"{value!r} is not a CUDA architecture like sm_90a or sm_80"
        elif name == "diagnostic_mode" and value not in ("auto", "push", "pull"):
            return "expected auto, push or pull"
        setattr(self, name, value)
        return None


@dataclass
class Result:
    """The diagnostics of one document version (worker dicts, fixes included)."""

    version: int | None
    diagnostics: list
    kernels: dict | None = None        # factory -> [{"binding", "summary"}]; None: not rebuilt
    target: str | None = None
    elapsed_ms: float = 0.0
    origin: str = "worker"             # worker, syntax, skipped, failure
    lsp: list = field(default_factory=list)  # the LSP diagnostics, once delivered


@dataclass
class DocState:
    uri: str
    last_change: float = 0.0
    task: asyncio.Task | None = None
    result: Result | None = None
    kernels: dict = field(default_factory=dict)
    kernels_version: int | None = None
    waiters: list = field(default_factory=list)


def syntax_result(path: str, text: str, version) -> Result | None:
    """TL0001 for text that does not parse (as the checker reports it), else None."""
    try:
        ast.parse(text)
        return None
    except SyntaxError as err:
        line = err.lineno or 1
        col = err.offset if err.offset and err.offset > 0 else 1
        end_line = err.end_lineno if err.end_lineno and err.end_lineno >= line else line
        end = err.end_offset if end_line == line and err.end_offset and err.end_offset > col else col + 1
        if end_line != line:
            end = err.end_offset if err.end_offset and err.end_offset > 0 else 1
        message = f"syntax error: {err.msg}"
    except (ValueError, RecursionError, MemoryError) as err:
        line, col, end_line, end, message = 1, 1, 1, 2, f"syntax error: {err}"
    span = {"file": path, "line": line, "column": col, "end_line": end_line, "end_column": end}
    diag = {"code": "TL0001", "severity": "error", "message": message, "span": span, "notes": [],
            "fix": None, "binding": None, "url": "https://tilelang.dev/diagnostics#tl0001"}
    return Result(version, [diag], None, origin="syntax")


def failure_result(version, path: str, code: str, message: str) -> Result:
    span = {"file": path, "line": 1, "column": 1, "end_line": 1, "end_column": 1}
    diag = {"code": code, "severity": "error" if code == "TL0003" else "warning", "message": message,
            "span": span, "notes": [], "fix": None, "binding": None,
            "url": f"https://tilelang.dev/diagnostics#{code.lower()}"}
    return Result(version, [diag], None, origin="failure")


def _ignore_outcome(task) -> None:
    if not task.cancelled():
        task.exception()


class Checks:
    """Diagnostics scheduling for every open document (see the module docstring)."""

    def __init__(self, server):
        self.server = server
        self.docs: dict[str, DocState] = {}
        self.delivered = 0      # results delivered (for tests and the benchmark)
        self.dropped = 0        # stale results dropped

    def touch(self, uri: str) -> None:
        """The document changed (or settings did): schedule a check."""
        st = self.docs.setdefault(uri, DocState(uri))
        now = time.monotonic()
        quiet = now - st.last_change >= DEBOUNCE
        st.last_change = now
        if st.task is None or st.task.done():
            st.task = asyncio.get_running_loop().create_task(self._pump(uri, immediate=quiet))

    def recheck_all(self) -> None:
        for uri in list(self.docs):
            self.touch(uri)

    def close(self, uri: str) -> None:
        st = self.docs.pop(uri, None)
        if st is not None and st.task is not None:
            st.task.cancel()
        for fut in st.waiters if st is not None else ():
            if not fut.done():
                fut.cancel()

    def kernels(self, uri: str) -> dict:
        st = self.docs.get(uri)
        return st.kernels if st is not None else {}

    async def _pump(self, uri: str, immediate: bool) -> None:
        try:
            while True:
                st = self.docs.get(uri)
                if st is None:
                    return
                if not immediate:
                    await self._quiet(st)
                immediate = False
                snapshot = self.server.snapshot(uri)
                if snapshot is None:
                    return
                version, text = snapshot
                started = time.perf_counter()
                result = await self._compute(uri, version, text)
                log.info("checked %s v%s: %s, %.1f ms (worker %.1f ms)", uri, version, result.origin,
                         (time.perf_counter() - started) * 1e3, result.elapsed_ms)
                current = self.server.snapshot(uri)
                if uri not in self.docs or current is None:
                    return
                if current[0] != version:
                    self.dropped += 1
                    continue
                self.deliver(uri, result, text)
                return
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - never let a check kill the server
            log.exception("checking %s failed", uri)

    async def _quiet(self, st: DocState) -> None:
        while True:
            wait = st.last_change + DEBOUNCE - time.monotonic()
            if wait <= 0:
                return
            await asyncio.sleep(wait)

    async def _compute(self, uri: str, version, text: str) -> Result:
        path = self.server.path_of(uri)
        if "tilelang" not in text and "prim_func" not in text:
            return syntax_result(path, text, version) or Result(version, [], {}, origin="skipped")
        if not self.server.check_worker.ready:
            found = syntax_result(path, text, version)
            if found is not None:
                return found
        settings = self.server.settings
        message = {"op": "check", "path": path, "text": text, "target": settings.target,
                   "exec": settings.allow_execution, "timeout": settings.timeout}
        limit = max(60.0, 4 * settings.timeout)
        idle = self.server.check_worker_idle()
        pending = asyncio.get_running_loop().create_task(self.server.request_check(message, limit))
        if idle:
            result = await self._reply(pending, version, path, limit)
            if result.origin == "worker" and not any(d.get("code") == "TL0001" for d in result.diagnostics):
                return result
            return syntax_result(path, text, version) or result
        # The worker is busy: look for a syntax error meanwhile; for text that does not parse,
        # the server's TL0001 wins and the worker's is dropped.
        found = syntax_result(path, text, version)
        if found is not None:
            pending.add_done_callback(_ignore_outcome)
            return found
        return await self._reply(pending, version, path, limit)

    async def _reply(self, pending, version, path: str, limit: float) -> Result:
        try:
            reply = await pending
        except WorkerTimeout:
            return failure_result(version, path, "TL0803", f"checking this file took longer than {limit:g} s; "
                                  "the checker's worker was restarted and the kernels were not checked")
        except WorkerDied as err:
            return failure_result(version, path, "TL0003", f"the checker's worker process failed: {err}")
        if not reply.get("ok"):
            first = (reply.get("internal") or "unknown failure").splitlines()[0]
            return failure_result(version, path, "TL0003", f"internal error in the checker: {first}")
        return Result(version, reply["diagnostics"], reply.get("kernels") or {}, reply.get("target"),
                      reply.get("elapsed_ms", 0.0))

    def deliver(self, uri: str, result: Result, text: str) -> None:
        """Record and publish the result of a check of ``text`` (its fixes built on that text)."""
        st = self.docs.get(uri)
        if st is None:
            return
        self.server.add_fixes(uri, result, text)
        st.result = result
        if result.kernels is not None:
            st.kernels, st.kernels_version = result.kernels, result.version
        self.delivered += 1
        self.server.publish(uri, result, text)
        waiters, st.waiters = st.waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(result)

    async def wait_result(self, uri: str, version) -> Result | None:
        """The result for ``version`` (checking it if needed), waiting up to ``PULL_WAIT``."""
        st = self.docs.get(uri)
        if st is None:
            self.touch(uri)
            st = self.docs[uri]
        if st.result is not None and st.result.version == version:
            return st.result
        if st.task is None or st.task.done():
            st.task = asyncio.get_running_loop().create_task(self._pump(uri, immediate=True))
        fut = asyncio.get_running_loop().create_future()
        st.waiters.append(fut)
        try:
            return await asyncio.wait_for(fut, PULL_WAIT)
        except asyncio.TimeoutError:
            return st.result
