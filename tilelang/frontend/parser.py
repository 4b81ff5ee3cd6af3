"""Hooks into TVM's TVMScript parser.

Two extensions, both installed once on import:

* the ``For`` visitor of the ``tirx`` dispatch token is wrapped so that ``T.Parallel(M, N)``
  (several loop frames at once) can be the iterator of one ``for`` statement;
* ``Diagnostics.error`` raises ``ParseError``, a ``DiagnosticError`` subclass that carries the
  location as fields instead of only a formatted string.
"""

from __future__ import annotations

import contextlib
import inspect

from tvm.script.parser.core import diagnostics as _diag
from tvm.script.parser.core import dispatch, doc
from tvm.script.parser.core.diagnostics import DiagnosticError
from tvm.tirx.script.parser import entry as _entry
from tvm.tirx.script.parser import parser as _tparser



class ParseError(DiagnosticError):
    """A located front-end error: ``message`` at ``file:line:column``-``end_line:end_column``."""

    def __init__(self, formatted: str, message: str, span):
        super().__init__(formatted)
        self.message = message
        self.span = span

    def __reduce__(self):
        return (ParseError, (str(self), self.message, self.span))

    def to_diagnostic(self):
        from tilelang.diagnostics import Diagnostic, Severity

        return Diagnostic(code=_code_for(self.message), severity=Severity.ERROR,
                          message=self.message, span=self.span)


def _code_for(message: str) -> str:
    if message.startswith("TL0") and message[6:8] == ": ":
        return message[:6]
    return "TL0001"


_original_error = _diag.Diagnostics.error


def _structured_error(self, node, message):
    lineno, col, end_line, end_col = self.source.location(node)
    try:
        from tilelang.diagnostics import Span
    except ImportError:  # during bootstrap of the package only
        from collections import namedtuple
        Span = namedtuple("Span", "file line column end_line end_column")
    span = Span(str(self.source.source_name), lineno, col, end_line, end_col)
    try:
        _original_error(self, node, message)
    except DiagnosticError as err:
        raise ParseError(str(err), message, span) from None


_original_visit_for = dispatch.get(token="tirx", type_name="For")


def _visit_for(self, node):
    """Enter every frame of a multi-loop iterator (``T.Parallel``) around one loop body."""
    from tilelang.language.loops import Parallel

    iter_node = node.iter
    if isinstance(iter_node, doc.Call):
        func = self.eval_expr(iter_node.func)
        if func is Parallel:
            spec = self.eval_expr(iter_node)
            frames = spec.frames()
            with self.var_table.with_frame(), contextlib.ExitStack() as stack:
                loop_vars = [stack.enter_context(f) for f in frames]
                source = loop_vars if len(loop_vars) > 1 else loop_vars[0]
                if isinstance(node.target, doc.Tuple) and len(node.target.elts) != len(loop_vars):
                    self.report_error(node.target, f"T.Parallel has {len(loop_vars)} extents "
                                      f"but the loop unpacks {len(node.target.elts)} variables")
                self.eval_assign(target=node.target, source=source, bind_value=_tparser.bind_for_value)
                self.visit_body(node.body)
            return
    _original_visit_for(self, node)


_original_bind_assign = _tparser.bind_assign_value


def _is_pure_index(value) -> bool:
    """A PrimExpr reading no buffer: safe to substitute wherever its name is used."""
    import tvm
    import tvm_ffi
    from tvm import ir

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return True  # a Python constant stays a constant
    if not tvm.ir.is_prim_expr(value) or isinstance(value, tvm.tirx.Var):
        return False
    found = []
    tvm_ffi.structural_walk(value, [(ir.TensorLoad, lambda e: (found.append(e), None)[1])], order="pre")
    return not found


def _bind_assign_value(self, node, var_name, value, prim_var_declarations=None):
    """``x = <pure integer/float expression>`` binds ``x`` to the expression itself (a let), as
    TileLang code expects; TVM 0.27 would allocate a one-element local buffer, which hides index
    arithmetic from the compiler (e.g. a pipelined copy's offset computed in the loop body)."""
    if _is_pure_index(value):
        return value
    return _original_bind_assign(self, node, var_name, value, prim_var_declarations)


_installed = False


def install() -> None:
    """Install the parser hooks (idempotent)."""
    global _installed
    if _installed:
        return
    _diag.Diagnostics.error = _structured_error
    dispatch.register(token="tirx", type_name="For")(_visit_for)
    _tparser.bind_assign_value = _bind_assign_value
    _installed = True


def prim_func(func=None, *, private: bool = False, check_well_formed: bool = True):
    """Parse a TileLang kernel into a TVM PrimFunc (``@T.prim_func``)."""
    install()

    def wrap(f):
        return _entry.prim_func(f, private=private, check_well_formed=check_well_formed)

    if func is None:
        return wrap
    return wrap(func)


prim_func.dispatch_token = "tirx"


def parse_source(source: str, extra_vars: dict | None = None):
    """Parse TileLang source text (an unsaved editor buffer) into an IRModule or PrimFunc."""
    import tvm

    install()
    return tvm.script.parse(source, extra_vars=extra_vars or {})
