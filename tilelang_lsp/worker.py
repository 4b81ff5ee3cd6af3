"""Running user code for the checker: one worker process per session, with time limits.

Building a kernel executes the user's Python, so it happens in a separate process started with
``multiprocessing`` (spawn), never in the checker's (or the language server's) own process. One
worker serves a whole run: it imports tvm once, loads each file, builds each bound kernel and
runs the analysis there, and sends back ``Diagnostic`` dicts. Requests:

- ``load``: execute the file's module-level definitions (imports, functions, classes, constant
  assignments, ``if``/``try`` blocks other than ``if __name__ == "__main__"``) under a fresh module
  name; statements that would run kernels or scripts (bare expressions, loops, calls of jitted
  factories) are skipped, and an assignment that fails is dropped silently. The text comes from
  the request, so unsaved editor buffers work (``linecache`` is primed for TVM's parser).
- ``build``: evaluate the binding's argument texts in the module's namespace, call the factory's
  undecorated function (``factory.factory`` of ``@tilelang.jit``; a plain factory itself), and run
  ``tilelang.analysis.check`` on the PrimFunc. A parse error keeps its own code and span; any other
  exception is TL0802 at the deepest line of the file in its traceback.

The parent side (``Worker``) applies a time limit to every request; on timeout or death it kills
the process (only its own), and the next request starts a fresh one. Nothing here imports
tilelang at module level: the spawned child imports this module first.

Public API (stable; the language server's worker, ``tilelang_lsp.lsp_check``, runs the same steps
in its own process through it):

- ``Session(target, timeout, exec_code, config_for, worker=None)``: checks one file end to end
  (``check_file(path, text=None) -> FileReport``). ``worker`` is any object with ``start()``,
  ``stop()``, ``request(message, timeout) -> reply dict`` (raising ``WorkerTimeout`` /
  ``WorkerDied``) and a ``loaded`` dict (path -> module name of the last successful load); by
  default a ``Worker`` process.
- Messages: ``{"op": "load", "path", "text"}`` and ``{"op": "build", "path", "factory", "args",
  "kwargs", "binding", "target", "prim_func", "out_idx_span"}`` (``args``/``kwargs``: source
  texts; ``binding``: ``Binding.describe()``; ``out_idx_span``: a ``Span`` dict or None).
  Replies: ``{"ok": True, "module", "diagnostics"}`` and ``{"ok": True, "built", "diagnostics"}``
  with ``Diagnostic.to_dict()`` dicts, or ``{"ok": False, "internal": traceback}``.
- The request handlers, for a worker that executes user code itself:
  ``load_module(message, modules)`` (``modules``: path -> module object, updated in place),
  ``build_kernel(module, message) -> (reply, PrimFunc or None)``, and its steps
  ``call_factory(module, message)`` (raises what the user's code raises),
  ``check_kernel(func, module, message)`` and ``failure_diagnostics(err, path, what, binding)``.
  The others never raise on a mistake in user code (it becomes a diagnostic); ``WorkerTimeout``
  always propagates.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import traceback

READY_TIMEOUT = 120.0


class WorkerTimeout(Exception):
    """The request did not finish within its time limit (the worker was stopped)."""


class WorkerDied(Exception):
    """The worker process exited while serving a request (a crash in native code, an exit())."""


class Worker:
    """The parent's handle on the worker process; see the module docstring."""

    def __init__(self):
        self._proc = None
        self._conn = None
        self._ready = False
        self.loaded = {}   # path -> module key currently loaded in this process

    def start(self) -> None:
        """Start the process now (it imports tvm in the background); idempotent."""
        if self._proc is not None and self._proc.is_alive():
            return
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=serve, args=(child,), daemon=True, name="tilelang-check-worker")
        self._proc.start()
        child.close()
        self._ready = False
        self.loaded = {}

    def request(self, message: dict, timeout: float) -> dict:
        self.start()
        if not self._ready:
            self._receive(READY_TIMEOUT)
            self._ready = True
        try:
            self._conn.send(message)
        except (BrokenPipeError, OSError):
            self.stop()
            raise WorkerDied("the worker process is gone") from None
        return self._receive(timeout)

    def _receive(self, timeout: float) -> dict:
        try:
            if not self._conn.poll(timeout):
                self.stop()
                raise WorkerTimeout(f"no answer within {timeout:g} s")
            return self._conn.recv()
        except (EOFError, OSError):
            code = self._proc.exitcode if self._proc is not None else None
            self.stop()
            raise WorkerDied(f"the worker process exited (status {code})") from None

    def stop(self) -> None:
        """Stop our worker process (and only it)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.is_alive() and self._conn is not None:
                self._conn.send({"op": "exit"})
                proc.join(0.5)
        except (BrokenPipeError, OSError):
            pass
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self.loaded = {}


# ----- the child process ------------------------------------------------------------------------

def serve(conn) -> None:
    """The worker's main loop (runs in the spawned child)."""
    if not os.environ.get("TILELANG_CHECK_DEBUG"):
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - user prints must not reach the CLI's output
        sys.stderr = sys.stdout
    import tilelang  # noqa: F401 - the heavy import (tvm), once per worker

    conn.send({"op": "ready"})
    modules = {}
    serve_requests(conn, lambda message: _handle(message, modules))


def serve_requests(conn, handle, after_reply=None) -> None:
    """Answer ``handle(message)`` for each request on ``conn`` until ``{"op": "exit"}`` or a closed
    pipe; an exception in ``handle`` becomes ``{"ok": False, "internal": ...}``, never a dead
    worker. ``after_reply()`` runs between requests (the LSP worker collects garbage there)."""
    while True:
        try:
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


def _handle(message: dict, modules: dict) -> dict:
    if message["op"] == "load":
        return load_module(message, modules)
    if message["op"] == "build":
        return _build(message, modules)
    raise ValueError(f"unknown request {message.get('op')!r}")


_SKIP_CALLS = ("compile",)


def _keep(stmt, jitted: set) -> bool:
    """Whether a module-level statement is a definition the checker may execute."""
    import ast

    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else (f.attr if isinstance(f, ast.Attribute) else "")
                if name in jitted or name in _SKIP_CALLS:
                    return False
        return True
    if isinstance(stmt, ast.If):
        return "__name__" not in ast.unparse(stmt.test)
    return isinstance(stmt, ast.Try)


def load_module(message: dict, modules: dict) -> dict:
    """The ``load`` request: execute the definitions of ``message["text"]`` as a fresh module.

    ``modules[path]`` becomes the module (replacing, and unregistering, the previous one); the
    reply's ``diagnostics`` are TL0802 for imports/definitions that raised (module docstring).
    """
    import ast
    import linecache
    import types

    from tilelang.analysis.source import parse_file

    path, text = message["path"], message["text"]
    linecache.cache[path] = (len(text), None, text.splitlines(True), path)
    directory = os.path.dirname(path)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    model = parse_file(path, text)
    jitted = {n for n, f in model.factories.items() if f.jit}
    previous = modules.pop(path, None)
    if previous is not None:
        sys.modules.pop(previous.__name__, None)
    key = f"_tilelang_check_{abs(hash(path)):x}_{len(modules)}"
    module = types.ModuleType(key)
    module.__file__ = path
    sys.modules[key] = module
    problems = []
    for stmt in model.tree.body:
        if not _keep(stmt, jitted):
            continue
        try:
            exec(compile(ast.Module(body=[stmt], type_ignores=[]), path, "exec"), module.__dict__)  # noqa: S102
        except BaseException as err:  # noqa: BLE001 - user code may raise anything, even SystemExit
            if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
                problems += failure_diagnostics(err, path, f"line {stmt.lineno} raised while loading the file:", None)
    modules[path] = module
    return {"ok": True, "module": key, "diagnostics": problems}


def _raised(err, path, what, binding):
    """TL0802 at the deepest frame of ``path`` in the traceback of ``err``."""
    from tilelang.diagnostics import Diagnostic, Span

    line = None
    for frame in traceback.extract_tb(err.__traceback__):
        if frame.filename == path and frame.lineno:
            line = frame.lineno
    span = Span.point(path, line) if line else None
    if span is not None:
        text = linecache_line(path, line)
        indent = len(text) - len(text.lstrip())
        span = Span(path, line, indent + 1, line, max(len(text.rstrip()) + 1, indent + 2))
    message = f"{what} {type(err).__name__}: {err}".rstrip(": ")
    return Diagnostic.from_code("TL0802", message, span, binding=binding)


def linecache_line(path, line) -> str:
    import linecache

    return linecache.getline(path, line).rstrip("\n")


def _factory_function(obj):
    """The undecorated factory behind ``@tilelang.jit`` (and wrappers that keep ``factory``)."""
    for _ in range(8):
        inner = getattr(obj, "factory", None) or getattr(obj, "__wrapped__", None)
        if inner is None or inner is obj:
            break
        obj = inner
    return obj


def _build(message: dict, modules: dict) -> dict:
    """The ``build`` request of the worker process."""
    module = modules.get(message["path"])
    if module is None:
        raise RuntimeError(f"{message['path']} was not loaded")
    return build_kernel(module, message)[0]


def build_kernel(module, message: dict):
    """Build one bound kernel of a loaded ``module`` and check it: ``(reply, PrimFunc or None)``.

    The reply is the ``build`` request's; the PrimFunc is returned when one was built (for
    callers that derive more from it, such as the language server's hover data).
    """
    from tvm import tirx

    binding = message["binding"]
    try:
        func = call_factory(module, message)
    except WorkerTimeout:
        raise
    except Exception as err:  # noqa: BLE001 - the user's factory failed: report where
        what = f"{message['factory']} raised while building the kernel:"
        return {"ok": True, "built": False,
                "diagnostics": failure_diagnostics(err, message["path"], what, binding)}, None
    if not isinstance(func, tirx.PrimFunc):
        return {"ok": True, "built": False, "diagnostics": []}, None
    return {"ok": True, "built": True, "diagnostics": check_kernel(func, module, message)}, func


def call_factory(module, message: dict):
    """What ``message["factory"]`` of ``module`` returns for the binding's argument texts
    (evaluated in the module's namespace); a module-level ``@T.prim_func`` itself. Raises what
    the user's code raises."""
    namespace = module.__dict__
    obj = namespace[message["factory"]]
    if message.get("prim_func"):
        return obj
    args = [eval(t, namespace) for t in message["args"]]  # noqa: S307 - the user's own source text
    kwargs = {k: eval(t, namespace) for k, t in message["kwargs"]}  # noqa: S307
    return _factory_function(obj)(*args, **kwargs)


_PARSE_CODES = (("at most 1024 threads", "TL0503"),)


def failure_diagnostics(err, path, what, binding) -> list:
    """Diagnostic dicts for an exception from user code: its own diagnostics (a compile or parse
    error), else TL0802 "``what`` <error>" at the deepest line of ``path`` in its traceback."""
    from tilelang.diagnostics import Severity, TileLangCompileError
    from tilelang.frontend import ParseError

    if isinstance(err, TileLangCompileError):
        return [_with_binding(d, binding).to_dict() for d in err.diagnostics]
    if isinstance(err, ParseError):
        diag = _narrow_undefined(err.to_diagnostic())
        for needle, code in _PARSE_CODES:
            if needle in err.message:
                diag.code = code
        diag.severity = Severity.ERROR
        return [_with_binding(diag, binding).to_dict()]
    return [_raised(err, path, what, binding).to_dict()]


def _narrow_undefined(diag):
    """Point "Undefined variable: x" at the name ``x`` inside the statement's span."""
    import re

    from tilelang.diagnostics import Span

    match = re.match(r"Undefined variable: (\w+)", diag.message)
    span = diag.span
    if match is None or span is None:
        return diag
    text = linecache_line(span.file, span.line)
    end = span.end_column - 1 if not span.is_multiline else len(text)
    found = re.search(rf"\b{re.escape(match.group(1))}\b", text[span.column - 1:end])
    if found is not None:
        start = span.column + found.start()
        diag.span = Span(span.file, span.line, start, span.line, start + len(match.group(1)))
    return diag


def _with_binding(diag, binding):
    diag.binding = diag.binding or binding
    return diag


def check_kernel(func, module, message: dict) -> list:
    """``tilelang.analysis.check`` of a built kernel, as diagnostic dicts: the factory's
    ``out_idx``, the binding and the file's text (from ``linecache``) go into the context."""
    import linecache

    from tilelang.analysis import CheckContext, check
    from tilelang.diagnostics import Span

    obj = module.__dict__[message["factory"]]
    out_idx = getattr(obj, "out_idx", None)
    if isinstance(out_idx, int):
        out_idx = [out_idx]
    span = message.get("out_idx_span")
    ctx = CheckContext(out_idx=list(out_idx) if out_idx is not None else None, binding=message["binding"],
                       sources={message["path"]: "".join(linecache.getlines(message["path"]))},
                       read_source=lambda f: "".join(linecache.getlines(f)) or None,
                       out_idx_span=Span.from_dict(span) if span else None)
    return [d.to_dict() for d in check(func, message["target"], ctx)]


# ----- the parent: one file, end to end -----------------------------------------------------------

class FileReport:
    """The outcome of checking one file: its diagnostics, and whether every kernel was built."""

    def __init__(self, path, diagnostics, complete, internal=False):
        self.path, self.diagnostics, self.complete, self.internal = path, diagnostics, complete, internal


class Session:
    """Checks files one after another with one worker (see the module docstring).

    ``target``: the ``sm_XX`` to check for; ``timeout``: seconds per load or kernel build;
    ``exec_code``: False checks from the source alone (``--no-exec``); ``config_for(path)``
    returns the ``binding.CheckConfig`` that applies to a file.
    """

    def __init__(self, target="sm_90a", timeout=20.0, exec_code=True, config_for=None, worker=None):
        self.target, self.timeout, self.exec_code = target, timeout, exec_code
        self.config_for = config_for or (lambda path: None)
        self.worker = worker or Worker()

    def close(self) -> None:
        self.worker.stop()

    def check_file(self, path: str, text: str | None = None) -> FileReport:
        from tilelang.analysis.source import parse_file
        from tilelang.diagnostics import Diagnostic, Span

        if text is None:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        try:
            model = parse_file(path, text)
        except SyntaxError as err:
            span = Span.point(path, err.lineno or 1, err.offset or 1)
            return FileReport(path, [Diagnostic.from_code("TL0001", f"syntax error: {err.msg}", span)], False)
        return self._check_model(model)

    def _check_model(self, model) -> FileReport:
        from tilelang.analysis.ast_checks import fallback_checks, interface_checks
        from tilelang.analysis.merge import dedupe, merge_bindings
        from tilelang.analysis.suppress import apply_ignores, find_ignores
        from tilelang.diagnostics import sort_diagnostics
        from tilelang_lsp.binding import plan_file, unbound_diagnostic

        plan = plan_file(model, self.config_for(model.path))
        diags = list(plan.diagnostics) + interface_checks(model)
        runs, failures, complete = self._build_all(model, plan, diags)
        for fp in plan.factories:
            name = fp.factory.name
            diags += merge_bindings(runs.get(name, [])) + merge_bindings(failures.get(name, []))
            if not runs.get(name):
                diags += fallback_checks(model, fp.factory)
                complete = False
            if fp.unbound and self.exec_code:
                diags.append(unbound_diagnostic(model, fp))
        diags = dedupe(diags)
        diags = apply_ignores(diags, find_ignores(model.path, model.text), report_unused=complete)
        internal = any(d.code == "TL0003" for d in diags)
        return FileReport(model.path, sort_diagnostics(diags), complete and not plan.diagnostics, internal)

    def _build_all(self, model, plan, diags):
        """(runs, failures, complete): per factory, [(binding, diagnostics)] of built kernels and of
        failed builds; ``complete`` is False when something could not be attempted."""
        runs, failures = {}, {}
        jobs = [(fp, b) for fp in plan.factories for b in fp.bindings]
        if not self.exec_code or not jobs:
            return runs, failures, self.exec_code and not jobs
        if not self._load(model, diags):
            return runs, failures, False
        for fp, binding in jobs:
            built, found = self._build(model, fp, binding)
            (runs if built else failures).setdefault(fp.factory.name, []).append((binding.describe(), found))
        return runs, failures, True

    def _request(self, model, message, span, what):
        """Send one request; a timeout or a dead worker becomes a diagnostic (None reply)."""
        from tilelang.diagnostics import Diagnostic

        try:
            reply = self.worker.request(message, self.timeout)
        except WorkerTimeout:
            return None, Diagnostic.from_code(
                "TL0803", f"{what} took longer than {self.timeout:g} s and was stopped; the checks that "
                f"need the built kernel were skipped", span)
        except WorkerDied as err:
            return None, Diagnostic.from_code("TL0003", f"internal error while {what}: {err}", span)
        if not reply.get("ok"):
            first = reply.get("internal", "").splitlines()[0] if reply.get("internal") else "unknown failure"
            return None, Diagnostic.from_code("TL0003", f"internal error while {what}: {first}", span)
        return reply, None

    def _load(self, model, diags) -> bool:
        from tilelang.diagnostics import Diagnostic, Span

        message = {"op": "load", "path": model.path, "text": model.text}
        reply, problem = self._request(model, message, Span.point(model.path, 1), "loading the file")
        if problem is not None:
            diags.append(problem)
            return False
        for d in reply["diagnostics"]:
            diags.append(Diagnostic.from_dict(d))
        self.worker.loaded[model.path] = reply["module"]
        return True

    def _build(self, model, fp, binding):
        from tilelang.diagnostics import Diagnostic
        from tilelang_lsp.binding import factory_name_span

        factory = fp.factory
        span = factory_name_span(model, factory)
        if model.path not in self.worker.loaded and not self._load(model, []):
            return False, []
        message = {"op": "build", "path": model.path, "factory": factory.name, "args": list(binding.args),
                   "kwargs": [list(kv) for kv in binding.kwargs], "binding": binding.describe(),
                   "target": self.target, "prim_func": factory.is_prim_func,
                   "out_idx_span": model.span(factory.out_idx_node).to_dict() if factory.out_idx_node else None}
        reply, problem = self._request(model, message, span, f"building {binding.shown}")
        if problem is not None:
            problem.binding = binding.describe()
            return False, [problem]
        found = [Diagnostic.from_dict(d) for d in reply["diagnostics"]]
        for d in found:
            if d.span is None:
                d.span = span
        return bool(reply.get("built")), found
