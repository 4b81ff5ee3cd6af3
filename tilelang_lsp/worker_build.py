"""Runs in the worker process: executing a file's definitions and building and checking kernels.

Building a kernel executes the user's Python, so it happens here, never in the language server's
or ``tilelang-check``'s own process. The requests (``worker_main`` dispatches them):

- ``load`` ``{"path", "text"}``: execute the file's module-level definitions (imports, functions,
  classes, constant assignments, and the same inside ``if``/``try`` blocks other than ``if
  __name__ == "__main__"``) under a fresh module name; statements that would run kernels or
  scripts (bare expressions, loops, ``with`` blocks, calls of jitted factories) are skipped at any
  depth, and an assignment that fails is dropped silently. The text comes from the request, so
  unsaved editor buffers work (``linecache`` is primed for TVM's parser). A statement that runs
  past the request's time limit (``WorkerTimeout``, raised by the language server's worker) stops
  the load: TL0803 at its deepest line, and the reply's ``hung`` is its fingerprint ``[first
  line, text]``; a later ``load`` whose ``skip`` lists that fingerprint does not run it (TL0803
  again, at once), so a hang costs one time limit, not one per check. Reply: ``{"ok": True,
  "module", "diagnostics", "hung": [line, text] or None}``.
- ``build`` ``{"path", "factory", "args", "kwargs", "binding", "target", "prim_func",
  "out_idx_span", "summary"?}``: evaluate the binding's argument texts in the module's namespace,
  call the factory's undecorated function (``factory.factory`` of ``@tilelang.jit``; a plain
  factory itself) and check the PrimFunc with ``tilelang.analysis.analyze`` under the factory's
  ``out_idx`` and ``pass_configs`` (the codes those configs switch off in the compiler are
  dropped here too). A parse error keeps its own code and span; any other exception is TL0802 at
  the deepest line of the file in its traceback. Reply: ``{"ok": True, "built", "diagnostics"}``,
  plus ``"summary"`` (``analysis.summary``, from the same analysis) when the request asks for it.

Diagnostics travel as ``Diagnostic.to_dict()`` dicts. Nothing here raises on a mistake in user
code (it becomes a diagnostic); ``WorkerTimeout`` always propagates.
"""

from __future__ import annotations

import os
import sys
import traceback

from tilelang_lsp.worker_errors import WorkerTimeout

_SKIP_CALLS = ("compile",)


def _keep(stmt, jitted: set) -> bool:
    """Whether a statement is a definition the checker may execute (``if``/``try``: see
    ``_definitions``)."""
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


def _definitions(stmt, jitted: set):
    """``stmt`` with only its definitions at every depth (an ``if``/``try`` keeps its own kept
    statements, ``pass`` where none is left), or None when nothing of it may run."""
    import ast
    import copy

    if not _keep(stmt, jitted):
        return None
    if not isinstance(stmt, (ast.If, ast.Try)):
        return stmt
    out = copy.copy(stmt)
    for field in ("body", "orelse", "finalbody"):
        if getattr(stmt, field, None):
            setattr(out, field, _kept_block(getattr(stmt, field), jitted, stmt))
    if isinstance(stmt, ast.Try):
        out.handlers = [copy.copy(h) for h in stmt.handlers]
        for new, old in zip(out.handlers, stmt.handlers):
            new.body = _kept_block(old.body, jitted, old)
    return out


def _kept_block(stmts: list, jitted: set, owner) -> list:
    import ast

    kept = [s for s in (_definitions(s, jitted) for s in stmts) if s is not None]
    return kept or [ast.copy_location(ast.Pass(), owner)]


def load_module(message: dict, modules: dict) -> dict:
    """The ``load`` request: execute the definitions of ``message["text"]`` as a fresh module.

    ``modules[path]`` becomes the module (replacing, and unregistering, the previous one); the
    reply's ``diagnostics`` are TL0802 for imports/definitions that raised and TL0803 for a
    statement that hung (module docstring).
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
    problems, hung, skip = [], None, {tuple(k) for k in message.get("skip", ())}
    lines = text.splitlines(True)
    for stmt in model.tree.body:
        kept = _definitions(stmt, jitted)
        if kept is None:
            continue
        fingerprint = statement_key(stmt, lines)
        if fingerprint in skip:
            problems.append(_hung(None, path, stmt).to_dict())
            continue
        try:
            exec(compile(ast.Module(body=[kept], type_ignores=[]), path, "exec"), module.__dict__)  # noqa: S102
        except WorkerTimeout as err:
            problems.append(_hung(err, path, stmt).to_dict())
            hung = list(fingerprint)
            break
        except BaseException as err:  # noqa: BLE001 - user code may raise anything, even SystemExit
            if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
                problems += failure_diagnostics(err, path, f"line {stmt.lineno} raised while loading the file:", None)
    modules[path] = module
    return {"ok": True, "module": key, "diagnostics": problems, "hung": hung}


def statement_key(stmt, lines: list) -> tuple:
    """(first line, text) of a module-level statement, decorators included: its identity across
    edits (it changes when the statement's text or position does)."""
    first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
    return first, "".join(lines[first - 1: stmt.end_lineno])


def _hung(err, path: str, stmt):
    """TL0803 for a module-level statement that ran past the time limit (``err``: this time;
    None: on an earlier check, so it was not run)."""
    from tilelang.diagnostics import Diagnostic

    line = None
    for frame in traceback.extract_tb(err.__traceback__) if err is not None else ():
        if frame.filename == path and frame.lineno:
            line = frame.lineno
    what = (f"this statement ran past the time limit ({err}) and was stopped, so the rest of the file was "
            "not loaded" if err is not None else
            "not run: this statement ran past the time limit when the file was checked before (it runs "
            "again once its text changes)")
    return Diagnostic.from_code("TL0803", f"loading the file: {what}; the kernels that need it are not built",
                                _line_span(path, line or stmt.lineno))


def _line_span(path: str, line: int):
    """The span of the text of ``line`` (indentation excluded)."""
    from tilelang.diagnostics import Span

    text = linecache_line(path, line)
    indent = len(text) - len(text.lstrip())
    return Span(path, line, indent + 1, line, max(len(text.rstrip()) + 1, indent + 2))


def _raised(err, path, what, binding):
    """TL0802 at the deepest frame of ``path`` in the traceback of ``err``."""
    from tilelang.diagnostics import Diagnostic

    line = None
    for frame in traceback.extract_tb(err.__traceback__):
        if frame.filename == path and frame.lineno:
            line = frame.lineno
    span = _line_span(path, line) if line else None
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


def build_kernel(module, message: dict) -> dict:
    """The ``build`` request: one bound kernel of a loaded ``module``, built and checked (the
    module docstring says what the reply holds)."""
    from tvm import tirx

    binding = message["binding"]
    try:
        func = call_factory(module, message)
    except WorkerTimeout:
        raise
    except Exception as err:  # noqa: BLE001 - the user's factory failed: report where
        what = f"{message['factory']} raised while building the kernel:"
        return {"ok": True, "built": False, "diagnostics": failure_diagnostics(err, message["path"], what, binding)}
    if not isinstance(func, tirx.PrimFunc):
        return {"ok": True, "built": False, "diagnostics": []}
    diagnostics, summary = check_kernel(func, module, message)
    reply = {"ok": True, "built": True, "diagnostics": diagnostics}
    if message.get("summary"):
        reply["summary"] = summary
    return reply


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


def check_kernel(func, module, message: dict):
    """``(diagnostic dicts, hover summary or None)`` of a built kernel: one
    ``tilelang.analysis.analyze`` run with the factory's ``out_idx`` and ``pass_configs``, the
    binding and the file's text (from ``linecache``) in its context; the summary (when the
    request asks for it) reads the same analysis."""
    import linecache

    from tilelang.analysis import CheckContext, analyze
    from tilelang.analysis.jit import silenced_codes
    from tilelang.diagnostics import Span

    obj = module.__dict__[message["factory"]]
    out_idx = getattr(obj, "out_idx", None)
    if isinstance(out_idx, int):
        out_idx = [out_idx]
    configs = pass_configs_of(obj)
    span = message.get("out_idx_span")
    ctx = CheckContext(out_idx=list(out_idx) if out_idx is not None else None, binding=message["binding"],
                       sources={message["path"]: "".join(linecache.getlines(message["path"]))},
                       read_source=lambda f: "".join(linecache.getlines(f)) or None,
                       out_idx_span=Span.from_dict(span) if span else None, pass_configs=configs)
    kernel, found = analyze(func, message["target"], ctx)
    off = silenced_codes(configs)
    diagnostics = [d.to_dict() for d in found if d.code not in off]
    return diagnostics, (_summary(kernel, message["target"]) if message.get("summary") else None)


def pass_configs_of(obj) -> dict:
    """The ``pass_configs`` of a ``@tilelang.jit`` factory (any wrapper that keeps them), as the
    compiler normalises them; ``{}`` for a plain factory."""
    import warnings

    from tilelang.transform.pass_config import normalize

    for _ in range(8):
        configs = getattr(obj, "pass_configs", None)
        if configs:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")   # an unknown key: the compile warns, not the checker
                return normalize(configs)
        inner = getattr(obj, "factory", None) or getattr(obj, "__wrapped__", None)
        if inner is None or inner is obj:
            break
        obj = inner
    return {}


def _summary(kernel, arch: str) -> dict:
    from tilelang.analysis.summary import summarize_kernel

    try:
        return summarize_kernel(kernel, arch)
    except Exception as err:  # noqa: BLE001 - hover data are optional; never fail the check
        return {"arch": arch, "error": f"{type(err).__name__}: {err}"}
