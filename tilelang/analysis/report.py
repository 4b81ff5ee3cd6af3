"""Where diagnostics go and where they point: ``CheckContext``, ``Reporter`` and source lookup.

Contract:
- ``CheckContext`` carries what a check cannot learn from the PrimFunc: the JIT's ``out_idx``, the
  binding that produced the kernel (copied onto every diagnostic) and the text of the source
  files, which is only used to narrow a statement's span to an operand, a loop header or a
  parameter name. Without source text every diagnostic still points at its statement.
- ``Reporter`` collects diagnostics and turns a failing check into a single TL0003 diagnostic
  (``guard``): a bug in one check never hides the others' findings and never raises.
- Positions: TVM stamps 1-based UTF-8 byte columns; CPython's ``ast`` uses 0-based byte
  offsets; both become character columns through ``Span.from_tvm``/``Span.from_ast``.
"""

from __future__ import annotations

import ast
import functools
import traceback
from dataclasses import dataclass, field
from typing import Callable, Mapping

from tvm import tirx

from tilelang.analysis.syntax import syntax_tree
from tilelang.diagnostics import Diagnostic, Fix, Note, Severity, Span


@dataclass
class CheckContext:
    """Inputs of ``check`` beyond the PrimFunc (see the module docstring)."""

    out_idx: list | None = None
    binding: str | None = None
    sources: Mapping[str, str] = field(default_factory=dict)
    read_source: Callable[[str], str | None] | None = None
    out_idx_span: Span | None = None
    pass_configs: Mapping[str, object] = field(default_factory=dict)   # the compile's, when known

    def source(self, file: str | None) -> str | None:
        if not file:
            return None
        text = self.sources.get(file)
        if text is None and self.read_source is not None:
            try:
                text = self.read_source(file)
            except OSError:
                text = None
        return text


@functools.lru_cache(maxsize=32)
def source_index(text: str) -> "SourceIndex":
    return SourceIndex(text)


class SourceIndex:
    """The ``ast`` nodes of a file, found by the (line, byte column) where they start.

    Built on the shared parse of the text (``syntax.syntax_tree``: no parse of its own when the
    file model of the same text exists) and lazily: a lookup indexes only the module-level
    statements whose lines contain the line asked for, the first time one is asked.
    """

    def __init__(self, text: str):
        self.text = text
        self._by_pos: dict[tuple[int, int], list[ast.AST]] = {}
        self._assigns: dict[tuple[int, int], ast.Assign] = {}
        self._functions: list[ast.FunctionDef] = []
        self._indexed: set[int] = set()
        try:
            self._body = syntax_tree(text).tree.body
        except (SyntaxError, ValueError):
            self._body = []
        self._ranges = [(min([s.lineno] + [d.lineno for d in getattr(s, "decorator_list", ())]),
                         s.end_lineno or s.lineno) for s in self._body]

    def _index(self, line: int) -> None:
        for k, (first, last) in enumerate(self._ranges):
            if first <= line <= last and k not in self._indexed:
                self._indexed.add(k)
                self._add(self._body[k])

    def _add(self, stmt) -> None:
        by_pos, assigns, functions = self._by_pos, self._assigns, self._functions
        for node in ast.walk(stmt):  # breadth first: outer nodes come before inner ones
            if hasattr(node, "lineno") and hasattr(node, "col_offset"):
                by_pos.setdefault((node.lineno, node.col_offset), []).append(node)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append(node)
            elif isinstance(node, ast.Assign):
                assigns[(node.value.lineno, node.value.col_offset)] = node

    def at(self, line: int, byte_col: int, kind=None):
        """The outermost node of type ``kind`` starting at ``line``:``byte_col`` (1-based)."""
        self._index(line)
        for node in self._by_pos.get((line, byte_col - 1), ()):
            if kind is None or isinstance(node, kind):
                return node
        return None

    def assignment(self, line: int, byte_col: int):
        """The ``ast.Assign`` whose value starts at ``line``:``byte_col`` (1-based), or None."""
        self._index(line)
        return self._assigns.get((line, byte_col - 1))

    def enclosing_function(self, line: int):
        """The innermost function definition whose body contains ``line``."""
        self._index(line)
        best = None
        for fn in self._functions:
            if fn.lineno <= line <= (fn.end_lineno or fn.lineno):
                if best is None or fn.lineno > best.lineno:
                    best = fn
        return best


def call_argument(call: ast.Call, index: int, keyword: str | None = None):
    """The ``index``-th positional argument of ``call``, or its ``keyword`` argument."""
    if index < len(call.args) and not isinstance(call.args[index], ast.Starred):
        return call.args[index]
    for kw in call.keywords:
        if keyword is not None and kw.arg == keyword:
            return kw.value
    return None


class Reporter:
    """Collects the diagnostics of one ``check`` call; see the module docstring."""

    def __init__(self, func, context: CheckContext):
        self.func = func
        self.ctx = context
        self.diagnostics: list[Diagnostic] = []
        self.crashes: list[str] = []
        self.allocs = {}  # buffer -> AllocBuffer statement
        self._fallback = _first_stmt_span(func)
        self._macro_sites = {}  # (file, line) of a macro call -> the located statement in its body

    # ----- spans -------------------------------------------------------------------------
    def _lookup(self, tvm_span):
        """(file, source text, SourceIndex) for a TVM span, or Nones without source."""
        tvm_span = plain_span(tvm_span)
        if tvm_span is None:
            return None, None, None
        file = str(getattr(getattr(tvm_span, "source_name", None), "name", "") or "")
        text = self.ctx.source(file)
        return file, text, (source_index(text) if text else None)

    def _remember_macro_site(self, node) -> None:
        """A statement spliced in by a ``@T.macro`` call carries the call's span first and its own
        line in the macro body after it (a ``SequentialSpan``): remember where, in the body, the
        statement reported at the call site is, so that ``emit`` can point there too."""
        inner = getattr(getattr(node, "span", None), "spans", None)
        located = [s for s in (plain_span(x) for x in (inner or ())) if s is not None]
        if len(located) < 2:
            return
        file, _, _ = self._lookup(located[0])
        body_file, body_text, _ = self._lookup(located[-1])
        if body_text is not None:
            self._macro_sites[(file, int(located[0].line))] = Span.from_tvm(located[-1], body_text)

    def span(self, node) -> Span | None:
        """The span of a statement (its full extent), in character columns."""
        self._remember_macro_site(node)
        tvm_span = getattr(node, "span", None)
        file, text, _ = self._lookup(tvm_span)
        return Span.from_tvm(tvm_span, text) if tvm_span is not None else None

    def ast_node(self, stmt, kind=None):
        self._remember_macro_site(stmt)
        tvm_span = plain_span(getattr(stmt, "span", None))
        file, text, index = self._lookup(tvm_span)
        if index is None:
            return None
        return index.at(int(tvm_span.line), int(tvm_span.column), kind)

    def ast_span(self, stmt, node) -> Span | None:
        file, text, _ = self._lookup(getattr(stmt, "span", None))
        return Span.from_ast(node, file, text) if node is not None else None

    def header_span(self, stmt) -> Span | None:
        """A one-line span for a compound statement: the loop's iterator, the ``with`` item..."""
        node = self.ast_node(stmt)
        inner = None
        if isinstance(node, ast.For):
            inner = node.iter
        elif isinstance(node, ast.With):
            inner = node.items[0].context_expr
        elif isinstance(node, ast.If):
            inner = node.test
        span = self.ast_span(stmt, inner) if inner is not None else None
        return span or _first_line(self.span(stmt))

    def operand_span(self, stmt, index: int, keyword: str | None = None) -> Span | None:
        """The span of argument ``index`` (or ``keyword``) of a tile-op call, else the statement's."""
        node = self.ast_node(stmt, ast.Expr)
        call = node.value if node is not None else None
        if isinstance(call, ast.Call):
            arg = call_argument(call, index, keyword)
            if arg is not None:
                return self.ast_span(stmt, arg)
        return self.span(stmt)

    def call_node(self, stmt):
        node = self.ast_node(stmt, ast.Expr)
        return node.value if node is not None and isinstance(node.value, ast.Call) else None

    def alloc_span(self, buf) -> Span | None:
        """The name assigned by ``name = T.alloc_*(...)``, else the allocation call."""
        stmt = self.allocs.get(buf)
        if stmt is None:
            return None
        tvm_span = plain_span(stmt.span)
        file, text, index = self._lookup(tvm_span)
        if index is not None:
            line = int(tvm_span.line)
            assign = index.assignment(line, int(tvm_span.column))
            if assign is not None:
                return Span.from_ast(assign.targets[0], file, text)
            ann = index.at(line, int(tvm_span.column), ast.AnnAssign)
            if ann is not None:
                return Span.from_ast(ann.target, file, text)
        return self.span(stmt)

    def param_span(self, name: str) -> Span | None:
        """The parameter ``name`` in the ``def`` of the kernel, else the kernel's first line."""
        body_span = plain_span(getattr(self.func.body, "span", None))
        file, text, index = self._lookup(body_span)
        if index is not None:
            fn = index.enclosing_function(int(body_span.line))
            if fn is not None:
                for arg in fn.args.args + fn.args.kwonlyargs:
                    if arg.arg == name:
                        return Span.from_ast(arg, file, text)
        return self.kernel_span()

    def kernel_span(self) -> Span | None:
        """The ``T.Kernel(...)`` of the kernel (the launch), or its first statement."""
        return self.header_span(self.func.body) if getattr(self.func.body, "span", None) else self._fallback

    def insertion_before(self, stmt, text_line: str) -> Fix | None:
        """A TextEdit inserting ``text_line`` (indented like ``stmt``) on the line above ``stmt``."""
        span = self.span(stmt)
        file, text, _ = self._lookup(getattr(stmt, "span", None))
        if span is None or text is None:
            return None
        lines = text.splitlines()
        if span.line > len(lines):
            return None
        current = lines[span.line - 1]
        indent = current[: len(current) - len(current.lstrip())]
        from tilelang.diagnostics import TextEdit

        at = Span(span.file, span.line, 1, span.line, 1)
        return Fix(f"add `{text_line}` before line {span.line}", [TextEdit(at, f"{indent}{text_line}\n")])

    # ----- emission ----------------------------------------------------------------------
    def emit(self, code: str, message: str, span: Span | None, notes=(), fix: Fix | None = None,
             severity: Severity | str | None = None) -> Diagnostic:
        notes = [n if isinstance(n, Note) else Note(str(n)) for n in notes]
        inside = self._macro_sites.get((span.file, span.line)) if span is not None else None
        if inside is not None and not any(n.span == inside for n in notes):
            # reported at the macro call: the statement itself is in the macro's body
            notes.insert(0, Note("the statement, inside the macro this call expands", _first_line(inside)))
        diag = Diagnostic.from_code(code, message, span or self._fallback, notes=notes, fix=fix,
                                    binding=self.ctx.binding, severity=severity)
        self.diagnostics.append(diag)
        return diag

    def has_error_near(self, span: Span | None) -> bool:
        """Whether an error is already reported on the lines of ``span``."""
        if span is None:
            return any(d.severity is Severity.ERROR for d in self.diagnostics)
        return any(d.severity is Severity.ERROR and d.span is not None and d.span.file == span.file
                   and span.line <= d.span.line <= span.end_line for d in self.diagnostics)

    def guard(self, name: str, fn: Callable, *args):
        """Run one check; an exception becomes (at most one) TL0003 instead of escaping."""
        try:
            return fn(*args)
        except Exception as err:  # noqa: BLE001 - a bug in the checker, reported as such
            self.crashes.append(f"{name}: {type(err).__name__}: {err}\n{traceback.format_exc(limit=-3)}")
            return None

    def finish(self) -> list[Diagnostic]:
        if self.crashes:
            first = self.crashes[0].splitlines()[0]
            notes = [Note("this is a bug in the TileLang checker; please report it with the kernel")]
            notes += [Note(f"also failed: {c.splitlines()[0]}") for c in self.crashes[1:]]
            self.emit("TL0003", f"internal checker error in {first}", self.kernel_span(), notes)
        return self.diagnostics


def plain_span(span):
    """A TVM span with a location: the first located member of a ``SequentialSpan``, else None."""
    if span is None:
        return None
    inner = getattr(span, "spans", None)
    if inner is not None:
        return next((s for s in (plain_span(x) for x in inner) if s is not None), None)
    return span if int(getattr(span, "line", 0) or 0) > 0 else None


def _first_line(span: Span | None) -> Span | None:
    if span is None or not span.is_multiline:
        return span
    return Span(span.file, span.line, span.column, span.line, span.column + 1)


def _first_stmt_span(func) -> Span | None:
    stmt = func.body
    while stmt is not None:
        span = getattr(stmt, "span", None)
        if span is not None and int(getattr(span, "line", 0) or 0) > 0:
            return _first_line(Span.from_tvm(span))
        stmt = stmt.seq[0] if isinstance(stmt, tirx.SeqStmt) and len(stmt.seq) else getattr(stmt, "body", None)
    return None
