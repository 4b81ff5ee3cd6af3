"""Entry points of the builder front end: ``build_prim_func``, ``Macro`` and error location.

``build_prim_func(func)`` runs a rewritten kernel inside ``T.prim_func`` frames and returns the
PrimFunc. A ``Macro`` is a function whose body is spliced into the kernel that calls it (run with
the caller's builder); it may return a value, a buffer or a frame's result. Exceptions raised while
a body runs become ``ParseError``s located at the innermost failing expression of the user's code.
"""

from __future__ import annotations

import functools
import inspect
import weakref

from tvm.ir import SourceName, Span
from tvm.script.ir_builder.base import IRBuilder
from tvm.tirx import is_buffer_var
from tvm.tirx.script import builder as T

from .builder import Builder, _active, current
from .rewrite import ANNOTATION_CODES, rewrite

# code object -> {file name: Rewritten} (dropped with the function). Code objects compare equal
# across files (CPython leaves co_filename out of ``==`` and ``hash``): the same kernel text at the
# same line in two files (an editor's unsaved copy, a copied example) is one key, so the file name
# picks the entry, or the second file's kernel would carry the first one's spans.
_PROGRAMS = weakref.WeakKeyDictionary()


def program(func):
    """The rewritten form of ``func`` (cached per code object and file)."""
    code = func.__code__
    by_file = _PROGRAMS.get(code)
    if by_file is None:
        by_file = _PROGRAMS[code] = {}
    entry = by_file.get(code.co_filename)
    if entry is None:
        entry = by_file[code.co_filename] = rewrite(func)
    return entry


UNBOUND = object()   # the value of a closure variable the enclosing function never assigned


def closure_values(func):
    """``func``'s closure variables' values, ``UNBOUND`` for one never assigned."""
    values = []
    for cell in func.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:
            values.append(UNBOUND)
    return values


def instantiate(func, builder, rw=None):
    """The rewritten ``func`` bound to ``builder`` (its defaults as the original's)."""
    rw = rw or program(func)
    fn = rw.factory(builder, UNBOUND, *closure_values(func))
    fn.__defaults__ = func.__defaults__
    fn.__kwdefaults__ = func.__kwdefaults__
    return fn


def _annotations(func, rw, outer=None):
    """Evaluated parameter annotations. Under ``from __future__ import annotations`` they are
    strings: evaluate them against the module globals, the enclosing function's locals
    (``outer``: names an annotation uses are no closure of the kernel) and its closure."""
    out = {}
    raw = getattr(func, "__annotations__", {})
    env = None
    for name in rw.params:
        if name not in rw.annotations:
            continue
        ann = raw.get(name)
        if ann is None or isinstance(ann, str):
            if env is None:
                env = dict(outer or {})
                env.update((k, v) for k, v in zip(func.__code__.co_freevars, closure_values(func))
                           if v is not UNBOUND)
            ann = eval(rw.annotations[name], func.__globals__, env)  # noqa: S307 - the user's annotation
        out[name] = ann
    return out


def declare_params(func, rw, builder, outer=None, skip=()):
    """``T.arg`` for every annotated parameter, in order; returns {name: parameter value}."""
    from tvm.ir import Expr

    values = {}
    for name, ann in _annotations(func, rw, outer).items():
        if name in skip:
            continue
        if callable(ann) and not isinstance(ann, Expr) and not isinstance(ann, type):
            ann = ann()
        if isinstance(ann, type):
            continue
        value = T.arg(name, ann)
        code = rw.annotations.get(name)
        if builder.stamp and code is not None and is_buffer_var(value) and value.span is None:
            # the parameter's buffer points at its annotation's line (tilelang.ir.get_buffer_span)
            line = min((ln for _, _, ln in code.co_lines() if ln), default=code.co_firstlineno)
            type(value).span.set(value, Span(SourceName(code.co_filename), line, line, 1, 1 << 20))
        values[name] = builder.define(name, value)
    return values


def eager_style(func) -> bool:
    """A kernel in the eager style: a parameter without annotation or a ``T.empty`` output."""
    rw = program(func)
    return rw.eager_body or any(p not in rw.annotations for p in rw.params)


def build_prim_func(func, private=False, check_well_formed=True, outer=None):
    """Run ``func`` (a ``@T.prim_func`` kernel) through the builder; the PrimFunc it builds.
    ``outer``: the locals of the scope that defines ``func`` (for string annotations)."""
    rw = program(func)
    builder = Builder(rw.spans, rw.file)
    try:
        with IRBuilder() as ib, _active(builder), builder.at(0):
            fn = instantiate(func, builder, rw)
            with T.prim_func(is_private=private):
                T.func_name(func.__name__)
                params = declare_params(func, rw, builder, outer)
                missing = [p for p in rw.params if p not in params]
                if missing:
                    raise TypeError(f"Type annotation required for function parameters: {', '.join(missing)}")
                fn(*[params[p] for p in rw.params])
        result = inline_scope_blocks(ib.get())
    except Exception as err:  # noqa: BLE001 - every failure becomes a located diagnostic
        raise located(err, rw) from None
    if check_well_formed:
        _check_well_formed(result, rw)
    result.__name__ = func.__name__
    return result


def inline_scope_blocks(func):
    """``func`` with each ``T.sblock`` that is only a scope (no block iterators, no init, no match
    buffers, an always-true predicate: what upstream's kernels write to bound a
    ``T.annotate_safe_value``) replaced by its body, its ``T.reads`` / ``T.writes`` dropped and its
    buffers allocated where it stood. The rest of the compiler sees plain statements; the
    annotations inside keep their lexical extent (attribute statements over the rest of the
    block). Blocks with iterators are left for the verifier to report."""
    import tvm
    from tvm import tirx

    from tilelang.tir_utils import const_int, map_stmts, seq

    realize = getattr(getattr(tvm, "s_tir", None), "SBlockRealize", None)
    if realize is None:
        return func

    def pre(st):
        if not isinstance(st, realize):
            return None
        block = st.block
        if st.iter_values or block.iter_vars or block.init is not None or block.match_buffers or \
                const_int(st.predicate) != 1:
            return None
        body = map_stmts(block.body, pre=pre)
        return seq([tirx.AllocBuffer(buf) for buf in block.alloc_buffers] + [body])

    body = map_stmts(func.body, pre=pre)
    return func if body.same_as(func.body) else func.with_body(body)


def _check_well_formed(func, rw):
    import tvm

    try:
        mod = tvm.IRModule.from_expr(func)
        tvm.s_tir.analysis.verify_well_formed(mod)
        if not func.attrs.get("s_tir", False) if func.attrs is not None else True:
            tvm.tirx.analysis.verify_tirx_well_formed(func)
    except Exception as err:  # noqa: BLE001
        hint = _scope_hint(func, err)
        if hint is not None:
            raise _parse_error(rw.file, *hint) from None
        raise _parse_error(rw.file, rw.def_span, "Program is not well-formed.\n\nTraceback: " + str(err)) from None


def _scope_hint(func, err):
    """(where, message) for a kernel that reads a name outside the block that gave it its value
    (``acc = 0.0`` before a loop, ``acc += x`` inside it, ``acc`` read after it: each ``+=``
    binds a new value visible only in its block), from TVM's well-formedness message; or None."""
    import re

    from tvm import tirx

    from tilelang.tir_utils import walk_stmts

    m = re.search(r"(?:buffer|variable|Var) '?(\w+)'? is used at .*(?:no longer in-scope|out of scope|not defined)",
                  str(err))
    if m is None:
        return None
    name = m.group(1)
    found = []

    def note(st):
        named = st.var.name if isinstance(st, tirx.Bind) else st.buffer.name if isinstance(
            st, (tirx.AllocBuffer, tirx.DeclBuffer)) else None
        if named == name and st.span is not None and st.span.line > 0:
            found.append(st.span)

    walk_stmts(func.body, note)
    if not found:
        return None
    span = found[0]
    where = (span.line, span.column, span.end_line, span.end_column)
    return where, (f"'{name}' is read outside the block where it gets this value: inside a loop or an `if`, "
                   f"`{name} = ...` and `{name} += ...` bind a new value that only that block sees. For a value "
                   f"updated across iterations (an accumulator), declare a variable before the loop: "
                   f"`{name} = T.alloc_var(T.float32)` (then `{name} = 0.0` and `{name} += ...` update it)")


class Macro:
    """``@T.macro``: a function spliced into the kernel that calls it."""

    def __init__(self, func):
        functools.update_wrapper(self, func)
        self.func = func

    def __call__(self, *args, **kwargs):
        builder = current()
        if builder is None:
            raise RuntimeError(f"macro '{self.func.__name__}' can only be called while a kernel is being built")
        rw = program(self.func)
        saved = builder.spans, builder.file, builder.scopes
        builder.outer.append(builder.scopes)
        builder.spans, builder.file, builder.scopes = rw.spans, rw.file, [{}]
        builder.modes.append("macro")
        try:
            sig = inspect.signature(self.func).bind(*args, **kwargs)
            sig.apply_defaults()
            for name, value in sig.arguments.items():
                _check_ref(self.func, name, value)
                builder.define(name, value)
            return instantiate(self.func, builder, rw)(*args, **kwargs)
        finally:
            builder.modes.pop()
            builder.outer.pop()
            builder.spans, builder.file, builder.scopes = saved


def _check_ref(func, name, value):
    """A ``T.Var``/``T.Ref`` macro parameter takes a scalar variable of the caller."""
    import tvm

    ann = func.__annotations__.get(name)
    if ann is None or not (ann is tvm.tirx.Var or getattr(ann, "tl_scalar_ref", False)):
        return
    from tvm.ir import TensorLoad

    source = value.source if isinstance(value, TensorLoad) else None
    if source is None or len(source.ty.shape) != 1 or not bool(source.ty.shape[0] == 1):
        raise ValueError(f"macro '{func.__name__}': parameter '{name}' is a T.Var/T.Ref, so it takes a scalar "
                         f"variable (T.alloc_var), got {value!r}")


def macro(func=None, *, hygienic=True):
    if func is None:
        return lambda f: Macro(f)
    return Macro(func)


# ----- error location -----------------------------------------------------------------------
def _message(err) -> str:
    if isinstance(err, NameError) and not isinstance(err, UnboundLocalError) and getattr(err, "name", None):
        return f"Undefined variable: {err.name}"
    if isinstance(err, UnboundLocalError):
        name = str(err).split("'")[1] if "'" in str(err) else str(err)
        return f"Undefined variable: {name}"
    if isinstance(err, RuntimeError):
        lines = [l for l in str(err).split("\n") if l]
        return lines[-1] if lines else (str(err) or type(err).__name__)
    if isinstance(err, KeyError):
        return "KeyError: " + str(err)
    return str(err) or type(err).__name__


def _position(err, rw):
    """(file, line, col, end_line, end_col) of the deepest traceback entry in rewritten code."""
    files = {p.file for by_file in _PROGRAMS.values() for p in by_file.values()} | {rw.file}
    found = None
    tb = err.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename in files and tb.tb_frame.f_globals.get("__name__") is not None and \
                _is_rewritten(code):
            positions = list(code.co_positions())
            index = tb.tb_lasti // 2
            if 0 <= index < len(positions) and positions[index][0] is not None:
                line, end_line, col, end_col = positions[index]
                found = (code.co_filename, line, col + 1, end_line, end_col + 1)
        tb = tb.tb_next
    return found


def _is_rewritten(code) -> bool:
    if code in ANNOTATION_CODES:
        return True
    return "__tb" in code.co_freevars or "__tb" in code.co_varnames or "__tb" in code.co_cellvars


def _parse_error(file, where, message):
    from tvm.script.parser.core.diagnostics import _format_source_snippet

    from .errors import ParseError, _span

    line, col, end_line, end_col = where
    try:
        with open(file, encoding="utf-8") as fh:
            lines = fh.read().splitlines(keepends=True)
        snippet = _format_source_snippet(lines, line, col, end_line, end_col)
    except OSError:
        snippet = ""
    formatted = f"error: {message}\n --> {file}:{line}:{col}\n{snippet}"
    return ParseError(formatted, message, _span(file, line, col, end_line, end_col))


def located(err, rw):
    """``err`` as a ParseError at its innermost user position (``err`` itself if already one)."""
    from tvm.error import DiagnosticError

    if isinstance(err, DiagnosticError):
        return err
    pos = _position(err, rw)
    if pos is None:
        file, where = rw.file, rw.def_span
    else:
        file, where = pos[0], pos[1:]
    out = _parse_error(file, where, _message(err))
    out = _as_kind_of(out, err)
    out.__cause__ = err
    return out


_KINDS: dict = {}


def _as_kind_of(parse_error, err):
    """``parse_error``, also an instance of ``err``'s built-in exception class (ValueError,
    TypeError, ...): code written for upstream, whose front end lets the original exception
    through, still catches it."""
    from .errors import ParseError

    base = type(err)
    if base.__module__ != "builtins" or issubclass(ParseError, base):
        return parse_error
    cls = _KINDS.get(base)
    if cls is None:
        try:
            cls = _KINDS[base] = type("ParseError", (ParseError, base), {"__module__": ParseError.__module__})
        except TypeError:  # an incompatible exception layout
            return parse_error
    out = cls(str(parse_error), parse_error.message, parse_error.span)
    return out

