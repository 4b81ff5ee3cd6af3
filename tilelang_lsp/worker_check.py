"""Runs in the worker process: the language server's ``check`` request, with a build cache.

``CheckService.check({"path", "text", "target", "exec", "timeout"})`` returns::

    {"ok": True, "diagnostics": [Diagnostic.to_dict() + {"url"}], "target", "exec",
     "kernels": {factory: [{"binding", "summary"}]}, "elapsed_ms", "hits", "misses"}

It reuses the checker end to end (``session.Session``: binding plans, merging of bindings,
value-free fallback checks, ignore comments) and acts itself as the Session's worker (the
requests of ``worker_build``), so the user's code runs in this process, never in the server's:

- ``load`` executes the document's definitions (``worker_build.load_module``) and indexes the
  text for the cache keys below;
- ``build`` builds one bound kernel, checks it and summarises it for the hovers
  (``worker_build.build_kernel`` with ``summary``): the checks and the hover data read one
  analysis of the kernel (``tilelang.analysis.analyze``, with the factory's pass configs).

The text of one check is parsed once: ``Session`` (``source.parse_file``), ``load_module``, the
cache keys (``syntax.syntax_tree``) and the span lookups of the checks share the checker's
per-text cache of the parse.

A build's result is cached under a key made of the target, the binding's argument texts, the
factory's source with its line numbers and, transitively, the module-level statements whose
names it (or the binding) uses, plus every import. Typing inside one kernel therefore rebuilds
only that kernel. A key includes line numbers, so results never point at moved lines.

Time limits: each load/build runs under ``SIGALRM`` (``WorkerTimeout``, which the Session turns
into TL0803); the server also bounds the whole request and kills this process past it. A
module-level statement that ran past the limit (a hang inside an ``if``, say) is remembered by
its text and position and not run again until it changes (``load_module``'s ``skip``): the
next checks of the file, and of every other file, do not wait for it again.
``[tool.tilelang.check]`` applies as in ``tilelang-check`` (target, exec, timeout, select,
ignore, bind); an explicit target from the editor wins over it.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import signal
import threading
import time
from collections import OrderedDict
from pathlib import Path

from tilelang_lsp import worker_build
from tilelang_lsp.worker_errors import WorkerTimeout

CACHE_SIZE = 512
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
DEFAULT_TARGET = "sm_90a"


class Deadline:
    """Whether a ``time_limit`` expired (its ``WorkerTimeout`` may have been caught by user code)."""

    expired = False


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise ``WorkerTimeout`` in this (main) thread after ``seconds``; no-op elsewhere."""
    deadline = Deadline()
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield deadline
        return

    def expired(signum, frame):
        deadline.expired = True
        raise WorkerTimeout(f"no answer within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield deadline
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class BuildKeys:
    """Cache keys of the builds of one document text (see the module docstring)."""

    def __init__(self, path: str, text: str):
        from tilelang.analysis.syntax import syntax_tree

        self.path = path
        syntax = syntax_tree(text, path)
        lines = text.splitlines(True)
        self.always, self.defs, self.statements = [], {}, []
        for stmt, used in zip(syntax.tree.body, syntax.names_by_statement()):
            first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
            piece = (first, "".join(lines[first - 1: stmt.end_lineno]), used)
            self.statements.append((stmt, piece[:2]))
            if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.If, ast.Try)):
                self.always.append(piece[:2])
            for name in _names_defined(stmt):
                self.defs.setdefault(name, []).append(piece)

    def fingerprints(self) -> dict:
        """(first line, text) of each module-level statement -> the name it defines if a def/class."""
        return {p: (stmt.name if isinstance(stmt, _DEFS) else None) for stmt, p in self.statements}

    def key(self, message: dict) -> str:
        roots = {message["factory"]}
        for text in list(message.get("args", ())) + [v for _, v in message.get("kwargs", ())]:
            roots |= _names_in_text(text)
        seen, pieces, todo = set(), [], list(roots)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            for first, text, used in self.defs.get(name, ()):
                pieces.append((first, text))
                todo.extend(used - seen)
        fields = (self.path, message.get("target"), message.get("factory"), tuple(message.get("args", ())),
                  tuple(map(tuple, message.get("kwargs", ()))), message.get("binding"),
                  message.get("prim_func"), repr(message.get("out_idx_span")), sorted(set(pieces)), self.always)
        return hashlib.sha1(repr(fields).encode()).hexdigest()


def _names_defined(stmt) -> set:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    targets = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _names_used(stmt) -> set:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}


@functools.lru_cache(maxsize=1024)
def _names_in_text(text: str) -> frozenset:
    try:
        return frozenset(_names_used(ast.parse(text, mode="eval")))
    except SyntaxError:
        return frozenset()


class CheckService:
    """Serves ``check`` requests; acts as the checker Session's worker (``request``)."""

    def __init__(self):
        self.modules = {}           # path -> module object (``worker_build.load_module``'s table)
        self.loaded = {}            # Session's view: path -> module name
        self._cache = OrderedDict()  # build key -> (reply, summary)
        self._keys = None
        self._statements = {}        # path -> fingerprints of the last clean full load
        self._hung = {}              # path -> {(first line, text)} of statements that ran past the limit
        self._kernels = {}
        self.hits = self.misses = 0

    # ----- the Session's worker protocol --------------------------------------------------
    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def request(self, message: dict, timeout: float) -> dict:
        with time_limit(timeout) as deadline:
            if message["op"] == "load":
                return self._load(message)
            if message["op"] == "build":
                return self._build(message, deadline)
        raise ValueError(f"unknown request {message['op']!r}")

    def _load(self, message: dict) -> dict:
        path = message["path"]
        self._keys = keys = BuildKeys(path, message["text"])
        reply = self._load_changed_definitions(message, keys)
        if reply is None:
            hung = self._hung.setdefault(path, set())
            reply = worker_build.load_module({**message, "skip": sorted(hung)}, self.modules)
            if reply.get("hung"):
                hung.add(tuple(reply["hung"]))
            clean = not reply.get("diagnostics")
            self._statements[path] = keys.fingerprints() if clean else None
        return reply

    def _load_changed_definitions(self, message: dict, keys: BuildKeys) -> dict | None:
        """Re-execute only the module-level definitions whose text or position changed.

        Applies when the previous load of the same path raised nothing and every statement that
        differs (added, removed or moved) is a ``def`` or ``class``; otherwise None (do a full
        load). Positions are part of a statement's fingerprint, so code objects keep true lines.
        """
        import linecache

        path, text = message["path"], message["text"]
        before, module = self._statements.get(path), self.modules.get(path)
        if not before or module is None:
            return None
        now = keys.fingerprints()
        added = [stmt for stmt, p in keys.statements if p not in before]
        removed = [name for p, name in before.items() if p not in now]
        if len(added) > 4 or not all(isinstance(s, _DEFS) for s in added) or None in removed:
            return None
        linecache.cache[path] = (len(text), None, text.splitlines(True), path)
        for stmt in added:
            try:
                code = compile(ast.Module(body=[stmt], type_ignores=[]), path, "exec", dont_inherit=True)
                exec(code, module.__dict__)  # noqa: S102 - dont_inherit: not this module's __future__
            except BaseException:  # noqa: BLE001 - let the full load report it
                self._statements[path] = None
                return None
        for name in set(removed) - set(now.values()):
            module.__dict__.pop(name, None)
        self._statements[path] = now
        return {"ok": True, "module": module.__name__, "diagnostics": []}

    def _build(self, message: dict, deadline: Deadline) -> dict:
        key = self._keys.key(message) if self._keys is not None and self._keys.path == message["path"] else None
        cached = self._cache.get(key) if key else None
        if cached is not None:
            self._cache.move_to_end(key)
            self.hits += 1
            self._record(message, cached[1])
            return cached[0]
        self.misses += 1
        reply, summary = self._build_uncached(message)
        if deadline.expired:  # user code or a check caught the timeout: report it, cache nothing
            raise WorkerTimeout("the kernel build ran past its time limit")
        if key:
            self._cache[key] = (reply, summary)
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        self._record(message, summary)
        return reply

    def _build_uncached(self, message: dict):
        module = self.modules.get(message["path"])
        if module is None:
            raise RuntimeError(f"{message['path']} was not loaded")
        reply = worker_build.build_kernel(module, {**message, "summary": True})
        return reply, reply.pop("summary", None)

    def _record(self, message: dict, summary) -> None:
        if summary is not None:
            entry = {"binding": message["binding"], "summary": summary}
            self._kernels.setdefault(message["factory"], []).append(entry)

    # ----- the ``check`` request ----------------------------------------------------------
    def check(self, message: dict) -> dict:
        from tilelang_lsp.session import Session, filter_codes

        start = time.perf_counter()
        path, text = message["path"], message["text"]
        config, problems = file_config(path)
        target = message.get("target") or config.target or DEFAULT_TARGET
        exec_code = bool(message.get("exec", True)) and config.exec is not False
        timeout = float(message.get("timeout") or config.timeout or 20.0)
        self._kernels, hits, misses = {}, self.hits, self.misses
        session = Session(target, timeout, exec_code, lambda p: config, worker=self)
        report = session.check_file(path, text)
        select = [c.upper() for c in config.select]
        ignore = [c.upper() for c in config.ignore]
        found = problems + filter_codes(report.diagnostics, select, ignore)
        return {"ok": True, "diagnostics": [_to_dict(d) for d in found], "kernels": self._kernels,
                "target": target, "exec": exec_code, "elapsed_ms": (time.perf_counter() - start) * 1e3,
                "hits": self.hits - hits, "misses": self.misses - misses}


def file_config(path: str):
    """(CheckConfig, [TL0004 diagnostic]) for the file; a malformed table counts as empty."""
    from tilelang.diagnostics import Diagnostic, Span
    from tilelang_lsp.binding import CheckConfig, ConfigError, load_config

    try:
        return load_config(Path(path).parent), []
    except ConfigError as err:
        return CheckConfig(), [Diagnostic.from_code("TL0004", f"[tool.tilelang.check] is ignored: {err}",
                                                    Span.point(path, 1))]


def _to_dict(diag) -> dict:
    data = diag.to_dict()
    data["url"] = diag.url
    return data


def module_for(service: CheckService, message: dict):
    """Load the document into ``service`` (for the compile/run requests); returns the module."""
    reply = service.request({"op": "load", "path": message["path"], "text": message["text"]}, None)
    if not reply.get("ok"):
        raise RuntimeError("the document could not be loaded")
    return service.modules[message["path"]]

