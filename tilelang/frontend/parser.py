"""``prim_func``/``macro``/``inline``: the builder front end (``program``) unless
``TILELANG_FRONTEND=tvm`` selects the previous one, TVM's TVMScript parser with our hooks, which
this module also holds. Two extensions, installed once by ``install()``:

* the ``For`` visitor of the ``tirx`` dispatch token is wrapped so that ``T.Parallel(M, N)``
  (several loop frames at once) can be the iterator of one ``for`` statement;
* ``Diagnostics.error`` raises ``ParseError``, a ``DiagnosticError`` subclass that carries the
  location as fields instead of only a formatted string.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys

from tvm.script.parser.core import diagnostics as _diag
from tvm.script.parser.core import dispatch, doc
from tvm.script.parser.core.diagnostics import DiagnosticError
from tvm.tirx.script.parser import entry as _entry
from tvm.tirx.script.parser import parser as _tparser

from .errors import ParseError, _span  # noqa: F401 - ParseError is part of this module's API



_original_error = _diag.Diagnostics.error


def _structured_error(self, node, message):
    lineno, col, end_line, end_col = self.source.location(node)
    span = _span(self.source.source_name, lineno, col, end_line, end_col)
    try:
        _original_error(self, node, message)
    except DiagnosticError as err:
        raise ParseError(str(err), message, span) from None


_original_visit_for = dispatch.get(token="tirx", type_name="For")


def _visit_for(self, node):
    """Enter every frame of a multi-loop iterator around one loop body: a loop spec is any
    object whose class sets ``tl_loop_spec`` and whose ``loop_frames()`` gives the frames
    (``T.Parallel``); the front end knows no language class."""
    iter_node = node.iter
    if isinstance(iter_node, doc.Call):
        func = self.eval_expr(iter_node.func)
        if getattr(func, "tl_loop_spec", False):
            spec = self.eval_expr(iter_node)
            if not hasattr(spec, "loop_frames"):   # T.thread_binding inside T.Kernel: the launched variable
                from tvm.tirx.script import builder as T

                from tilelang.frontend.builder import loop_binding

                guard = loop_binding(spec)
                with self.var_table.with_frame(), contextlib.ExitStack() as stack:
                    if guard is not None and guard[0] is not None:
                        stack.enter_context(T.If(guard[0]))
                        stack.enter_context(T.Then())
                    self.eval_assign(target=node.target, source=spec, bind_value=_tparser.bind_for_value)
                    self.visit_body(node.body)
                return
            frames = spec.loop_frames()
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


def builder_enabled() -> bool:
    """Which front end parses kernels: the builder (default) or TVM's TVMScript parser
    (``TILELANG_FRONTEND=tvm``, kept selectable while the builder settles)."""
    return os.environ.get("TILELANG_FRONTEND", "builder").lower() != "tvm"


def prim_func(func=None, *, private: bool = False, check_well_formed: bool = True):
    """Parse a TileLang kernel into a TVM PrimFunc (``@T.prim_func``)."""
    install()
    outer = sys._getframe(1).f_locals  # noqa: SLF001 - the defining scope, for string annotations

    def wrap(f):
        if builder_enabled():
            from .program import build_prim_func, eager_style

            if eager_style(f):
                from .eager import build_eager_prim_func

                return build_eager_prim_func(f)
            return build_prim_func(f, private=private, check_well_formed=check_well_formed,
                                   outer=outer if func is not None else sys._getframe(1).f_locals)
        return _entry.prim_func(f, private=private, check_well_formed=check_well_formed)

    if func is None:
        return wrap
    return wrap(func)


def macro(func=None, *, hygienic: bool = True):
    """``@T.macro``: a function spliced into the kernels that call it."""
    if builder_enabled():
        from .program import macro as _macro

        return _macro(func, hygienic=hygienic)
    from tvm.script import tirx as _T

    return _T.macro(func, hygienic=hygienic) if func is not None else _T.macro(hygienic=hygienic)


def inline(func=None):
    """``@T.inline``: like ``T.macro`` (the builder splices both into the caller)."""
    if builder_enabled():
        from .program import macro as _macro

        return _macro(func)
    from tvm.script import tirx as _T

    return _T.inline(func) if func is not None else _T.inline


prim_func.dispatch_token = "tirx"


def parse_source(source: str, extra_vars: dict | None = None):
    """Parse TileLang source text (an unsaved editor buffer) into an IRModule or PrimFunc."""
    import tvm

    install()
    return tvm.script.parse(source, extra_vars=extra_vars or {})
