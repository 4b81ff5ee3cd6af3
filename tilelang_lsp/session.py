"""Runs in the ``tilelang-check`` process, or in the language server's worker process: checking
one file end to end against a worker.

``Session(target, timeout, exec_code, config_for, worker)`` checks files one after another
(``check_file(path, text=None) -> FileReport``): it parses the file (``analysis.source``), plans
the kernel bindings (``binding.plan_file``), runs the value-free checks, asks its worker to
``load`` the file and ``build`` each bound kernel (``worker_build`` says what those do), merges
the bindings' findings, falls back to the value-free checks for kernels that were not built and
applies ``# tilelang: ignore`` comments. ``outcomes`` records, per (path, factory), one line per
build saying which values it used and where they came from, or why it was not built (``--explain``,
SARIF, ``built_count`` for ``--statistics``); a factory whose traced values could not be used
gets TL0801 with the reason, or TL0804 when the environment lacks something.

``worker`` is any object with ``start()``, ``stop()``, ``request(message, timeout) -> reply``
(raising ``WorkerTimeout`` / ``WorkerDied``) and a ``loaded`` dict (path -> module name of the
last successful load). ``tilelang-check`` passes a ``worker_client.WorkerClient``; the
language server's worker passes its ``worker_check.CheckService``, which serves the same
requests in-process. ``filter_codes`` applies ``--select``/``--ignore`` (``select``/``ignore`` of
``[tool.tilelang.check]``) to the findings. A timeout becomes TL0803, a dead worker or an internal
error TL0003; nothing here raises on a mistake in user code.
"""

from __future__ import annotations

import os

from tilelang_lsp.worker_errors import WorkerDied, WorkerTimeout


def read_source(path: str):
    """``(text, None)``, or ``(None, (line, column, message))`` when the file is not source text:
    bytes invalid in its encoding (UTF-8 unless a PEP 263 line declares another), an unknown
    declared encoding, or a binary file (a NUL byte)."""
    import io
    import tokenize

    with open(path, "rb") as handle:
        data = handle.read()
    name = os.path.basename(path)

    def where(offset):
        line_start = data.rfind(b"\n", 0, offset) + 1
        return data.count(b"\n", 0, offset) + 1, offset - line_start + 1

    nul = data.find(b"\x00")
    if nul >= 0:
        return None, (*where(nul), f"cannot read {name} as Python source: it is a binary file "
                                   f"(a NUL byte at offset {nul})")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as err:
        if "unknown encoding" in str(err.msg):
            return None, (err.lineno or 1, 1, f"cannot read {name} as Python source: {err.msg}")
        encoding = "utf-8"   # undeclared and not UTF-8 in its first lines: the decode below says where
    try:
        return data.decode(encoding), None
    except UnicodeDecodeError as err:
        shown = "utf-8" if encoding == "utf-8-sig" else encoding
        line, column = where(err.start)
        return None, (line, column, f"cannot read {name} as {shown} text: byte 0x{data[err.start]:02x} at line "
                                    f"{line}, column {column} is not valid {shown}; save the file as UTF-8 "
                                    f"or declare its encoding (# -*- coding: latin-1 -*-)")


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
        self.worker = worker   # None only with exec_code=False: nothing is loaded or built
        self.outcomes = {}     # (path, factory) -> [(built, one line saying with which values, env note)]

    def close(self) -> None:
        if self.worker is not None:
            self.worker.stop()

    def check_file(self, path: str, text: str | None = None) -> FileReport:
        from tilelang.analysis.source import parse_file
        from tilelang.diagnostics import Diagnostic, Span

        if text is None:
            text, problem = read_source(path)
            if problem is not None:
                line, column, message = problem
                return FileReport(path, [Diagnostic.from_code("TL0005", message, Span.point(path, line, column))],
                                  False)
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
        for fp in plan.factories:
            self.outcomes.setdefault((model.path, fp.factory.name), [])
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
            elif self.exec_code and not runs.get(name) and not failures.get(name) and fp.bindings:
                diags += self._not_built(model, fp)
        diags = dedupe(diags)
        diags = apply_ignores(diags, find_ignores(model.path, model.text), report_unused=complete)
        internal = any(d.code == "TL0003" for d in diags)
        return FileReport(model.path, sort_diagnostics(diags), complete and not plan.diagnostics, internal)

    def built_count(self):
        """(factories built with values, factories seen) over the files checked so far."""
        return sum(any(b for b, _, _ in v) for v in self.outcomes.values()), len(self.outcomes)

    def _not_built(self, model, fp) -> list:
        """Why a factory whose traced values could not be used was not built: TL0804 when the
        environment lacks something (a GPU, a module), else TL0801 with the reason."""
        from tilelang.diagnostics import Diagnostic
        from tilelang_lsp.binding import factory_name_span, unbound_diagnostic

        outcomes = self.outcomes.get((model.path, fp.factory.name), [])
        environment = next((env for _, _, env in outcomes if env), None)
        if environment is not None:
            return [Diagnostic.from_code("TL0804", f"'{fp.factory.name}' was not built: {environment}; only "
                                         f"the checks that need no values ran", factory_name_span(model, fp.factory))]
        reasons = [line for _, line, _ in outcomes]
        if not reasons:
            return []
        return [unbound_diagnostic(model, fp, reasons[0])]

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
        if reply.get("hung"):   # the load stopped at a statement past the time limit: nothing to build
            return False
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
                   "target": self.target, "prim_func": factory.is_prim_func, "soft": binding.soft,
                   "fill": binding.fill,
                   "out_idx_span": model.span(factory.out_idx_node).to_dict() if factory.out_idx_node else None}
        reply, problem = self._request(model, message, span, f"building {binding.shown}")
        if problem is not None:
            problem.binding = binding.describe()
            return False, [problem]
        found = [Diagnostic.from_dict(d) for d in reply["diagnostics"]]
        for d in found:
            if d.span is None:
                d.span = span
        built = bool(reply.get("built"))
        outcome = (f"built with {reply['values']} from {binding.origin}" if built and reply.get("values") else
                   f"built from {binding.origin}" if built else
                   f"not built: {reply['environment']}" if reply.get("environment") else
                   f"not built: {binding.shown} from {binding.origin}: {reply['unbound']}" if reply.get("unbound")
                   else f"not built: {binding.shown} from {binding.origin} raised")
        if built and reply.get("skipped"):   # a target this TileLang does not compile (worker_targets)
            outcome += f" ({reply['skipped']})"
        self.outcomes.setdefault((model.path, factory.name), []).append((built, outcome, reply.get("environment")))
        return built, found


def _matches(code: str, patterns) -> bool:
    return any(code.startswith(p) for p in patterns)


def filter_codes(diagnostics, select, ignore) -> list:
    """The diagnostics whose code starts with a ``select`` prefix (all when empty) and with no
    ``ignore`` prefix."""
    return [d for d in diagnostics if (not select or _matches(d.code, select)) and not _matches(d.code, ignore)]
