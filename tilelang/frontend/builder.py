"""The builder front end: a kernel body runs as Python against TVM's IR builder.

``tilelang.frontend.rewrite`` turns the function into Python that calls a ``Builder`` for every
statement; running it with the function's real closure and module globals emits the IR through
``tvm.script.ir_builder``. The builder gives each statement and expression the meaning TVMScript
gives it (so the IR is the one TVM's parser would build): ``x = expr`` binds a name (a buffer read
becomes a local scalar, a pure index expression stays an expression), assigning to a scalar
variable stores to it, ``for`` over a loop frame (or a loop spec with ``loop_frames()``) opens the
frames, ``if``/``while`` on a TIR condition open ``T.If``/``T.While``, on a Python value they run
as Python. Names bound inside a loop, ``with`` or TIR branch go out of scope at its end, as in
TVMScript. Every statement and every call, operator and subscript runs inside its own source span.

A failure anywhere in the body becomes a ``ParseError`` located at the innermost failing
expression of the user's source (from the traceback's instruction positions).
"""

from __future__ import annotations

import contextlib
import operator
import threading
from functools import partial

import tvm
from tvm.ir import Expr, TensorLoad, TensorRegion
from tvm.runtime import Object
from tvm.script.ir_builder.base import IRBuilder
from tvm.script.ir_builder.base import IRBuilderFrame as Frame
from tvm.script.parser.core import doc
from tvm.script.parser.core.evaluator import _eval_op
from tvm.tirx import is_buffer_var
from tvm.tirx.script import builder as T
from tvm.tirx.script.builder.frame import LaunchThreadFrame
from tvm.tirx.script.parser import parser as _tparser

from tilelang import knobs
from tilelang.tir_utils import const_int, uses_vars

_STATE = threading.local()
_MISSING = object()
_OPS = {}


def current():
    """The builder running the innermost kernel, macro or eager body on this thread (or None)."""
    stack = getattr(_STATE, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def _active(builder):
    stack = getattr(_STATE, "stack", None)
    if stack is None:
        stack = _STATE.stack = []
    stack.append(builder)
    try:
        yield builder
    finally:
        stack.pop()


def _op(name):
    node = _OPS.get(name)
    if node is None:
        node = _OPS[name] = getattr(doc, name)()
    return node


_COMPARISONS = {"Lt": operator.lt, "LtE": operator.le, "Gt": operator.gt, "GtE": operator.ge,
                "Eq": operator.eq, "NotEq": operator.ne}


def _compare(op, a, b):
    """``a <op> b``; between two TIR values of different types through their Python operators,
    which promote the operand types (``A[i] == m`` of an int64 element and an int32 scalar,
    TileOPs' GDN prefill), where the script evaluator's comparison requires them equal."""
    fn = _COMPARISONS.get(op)
    exprs = [v for v in (a, b) if isinstance(v, Object) and tvm.ir.is_prim_expr(v)]
    if fn is None or len(exprs) < 2 or str(exprs[0].ty) == str(exprs[1].ty):
        return _eval_op(_op(op), [a, b])
    out = fn(a, b)
    return out.asobject() if hasattr(out, "asobject") else out


def _plain_python(value) -> bool:
    if value is None or isinstance(value, str):
        return True
    if isinstance(value, (Object, int, float, list, tuple, T.scalar_wrapper)):
        return False
    return not (hasattr(value, "__enter__") or getattr(type(value), "_is_meta_class", False)
                or type(value).__name__ == "meta_var")


def _scalar_element(value, index):
    """``x[0]`` of a ``T.alloc_var`` scalar ``x``, as upstream reads its one-element buffer: the
    scalar's load, or None for anything else (``raw = T.alloc_var("int32", init=v)[0]``)."""
    load = value.scalar if isinstance(value, T.scalar_wrapper) else value
    if not isinstance(load, TensorLoad):
        return None
    shape = load.source.ty.shape
    index = index if isinstance(index, tuple) else (index,)
    if len(shape) != 1 or const_int(shape[0]) != 1 or len(index) != 1:
        return None
    if const_int(index[0]) != 0:
        raise IndexError(f"a T.alloc_var scalar has one element: index it with [0], not [{index[0]}]")
    return load


def _in_kernel() -> bool:
    """Inside ``with T.Kernel(...)`` (a thread launch frame is open)."""
    return any(isinstance(f, LaunchThreadFrame) for f in IRBuilder.current().frames)


def _fold(cond):
    """A TIR condition over constants only (``128 == A.shape[0]``) as a Python bool."""
    if isinstance(cond, Object) and tvm.ir.is_prim_expr(cond) and not isinstance(cond, tvm.tirx.Var):
        from tilelang.tir_utils import analyzer

        folded = analyzer().simplify(cond)
        if isinstance(folded, tvm.tirx.IntImm):
            return bool(folded.value)
    return cond



def _region_as_vector(region):
    """The vector load of a slice whose one non-unit extent is a constant (``A[0, 0:4]`` ->
    ``A[0, ramp(0, 1, 4)]``); other regions are returned as they are."""
    indices, lanes = [], 0
    for r in region.region:
        extent = r.extent
        if isinstance(extent, tvm.tirx.IntImm) and extent.value == 1:
            indices.append(r.min)
        elif isinstance(extent, tvm.tirx.IntImm) and not lanes:
            lanes = extent.value
            step = tvm.tirx.IntImm(str(getattr(r.min.ty, "dtype", "int32")), 1)
            indices.append(tvm.tirx.Ramp(r.min, step, lanes))
        else:
            return region
    return tvm.tirx.BufferLoad(region.source, indices) if lanes else region


def _python_type_annotation(ann) -> bool:
    """Whether ``ann`` is a Python type (``str``, ``int``, a class) or a ``typing`` construct rather
    than a TileLang scalar type or annotation object."""
    if isinstance(ann, type):
        return ann.__module__ in ("builtins", "typing") or not hasattr(ann, "__tilelang_annotation__") and \
            ann.__module__.split(".")[0] not in ("tilelang", "tvm")
    mod = getattr(type(ann), "__module__", "") or ""
    return mod in ("typing", "types") or mod.startswith("typing")

# Functions ``f(value) -> None | (guard,)`` for ``for x in value`` over a value that is no loop:
# ``(guard,)`` runs the body once with ``x = value`` (under ``guard`` unless it is None). The
# language registers its own (``T.thread_binding`` inside a kernel gives the launched variable),
# so the front end knows no language class.
LOOP_BINDERS: list = []


def loop_binding(value):
    for binder in LOOP_BINDERS:
        bound = binder(value)
        if bound is not None:
            return bound
    return None


class _VarTable:
    """What TVM's ``bind_assign_value`` asks of the parser's variable table."""

    def __init__(self, builder):
        self.builder = builder

    def exist(self, value) -> bool:
        """``value`` is a name's value in scope, or a symbol of such a buffer's shape or strides
        (``n`` of ``X: T.Tensor[(n, 64), ...]``: ``_ = n`` aliases it rather than renaming the
        kernel's symbol)."""
        scopes = self.builder.scopes + [s for outer in self.builder.outer for s in outer]
        values = [v for scope in scopes for v in scope.values() if isinstance(v, Object)]
        if any(value.same_as(v) for v in values):
            return True
        return isinstance(value, tvm.tirx.Var) and any(
            is_buffer_var(v) and uses_vars(list(v.shape) + list(v.strides), [value]) for v in values)

    def contains_in_current_frame(self, name) -> bool:
        return name in self.builder.scopes[-1]


def _positive_const(step) -> bool:
    return (isinstance(step, int) and step > 0) or (isinstance(step, tvm.tirx.IntImm) and int(step) > 0)


class _SteppedRange:
    """``range(start, stop, step)`` with a negative or symbolic step: a unit-step loop over the
    trip count whose target is ``start + k * step`` (a TIR loop with such a step runs no
    iteration in the generated code)."""

    def __init__(self, start, stop, step, annotations=None):
        if isinstance(step, int) and step == 0:
            raise ValueError("range() arg 3 must not be zero")
        self.start, self.stop, self.step, self.annotations = start, stop, step, annotations

    def loop_frames(self):
        down = isinstance(self.step, (int, tvm.tirx.IntImm)) and int(self.step) < 0
        span, step = (self.start - self.stop, -self.step) if down else (self.stop - self.start, self.step)
        if all(isinstance(v, int) for v in (span, step)):
            trips = max(0, -(-span // step))
        else:
            trips = tvm.tirx.floordiv(span + step - 1, step)
        return [T.serial(0, trips, annotations=self.annotations)]

    def loop_values(self, loop_vars):
        return self.start + loop_vars[0] * self.step


class _Cond:
    """An ``if`` test: a Python value (the branch runs or not) or a TIR condition (both are built)."""

    def __init__(self, value, has_else):
        self.tir = tvm.ir.is_prim_expr(value) or isinstance(value, tvm.tirx.expr.ExprOp)
        self.value = value
        self.has_else = has_else
        self.frame = None

    def __bool__(self):
        return self.tir or bool(self.value)


class Builder:
    """Runs rewritten code; ``spans`` are the (line, col, end_line, end_col) of its span ids."""

    def __init__(self, spans, file):
        self.spans = spans
        self.file = file
        self.span_cache = {}
        self.stamp = knobs.enable_ir_span()   # TILELANG_ENABLE_IR_SPAN=0: build without spans
        self.active_spans = []                # span ids of the enclosing `at` scopes
        self.scopes = [{}]
        self.loops = []
        self.modes = ["prim_func"]
        self.var_table = _VarTable(self)
        self.outer = []   # the callers' scopes while a macro runs (names are hygienic, values known)
        self.eager = None

    # ----- spans --------------------------------------------------------------------------
    def span(self, sid):
        spans = self.spans
        key = (id(spans), sid)
        s = self.span_cache.get(key)
        if s is None:
            line, col, end_line, end_col = spans[sid]
            s = self.span_cache[key] = tvm.ir.Span(tvm.ir.SourceName(self.file), line, end_line, col, end_col)
        return s

    @contextlib.contextmanager
    def at(self, sid):
        if not self.stamp or not IRBuilder.is_in_scope():
            yield
            return
        self.active_spans.append(sid)
        try:
            with IRBuilder.current().with_source_span(self.span(sid)):
                yield
        finally:
            self.active_spans.pop()

    def _annotate(self, value):
        if isinstance(value, Object) and self.stamp and IRBuilder.is_in_scope():
            if isinstance(value, tvm.tirx.Buffer):   # T.alloc_*: the buffer points at its line
                if value.span is None and self.active_spans:
                    type(value).span.set(value, self.span(self.active_spans[-1]))
                return value
            return IRBuilder.current()._set_current_source_span(value)  # noqa: SLF001 - TVM's own hook
        return value

    # ----- expressions --------------------------------------------------------------------
    def call(self, sid, func, *args, **kwargs):
        with self.at(sid):
            result = func(*args, **kwargs)
            if getattr(result, "tl_eager_request", False):  # T.const / T.empty
                result = result.resolve(self.eager)
            return self._annotate(result)

    def binop(self, sid, op, a, b):
        with self.at(sid):
            return self._annotate(_eval_op(_op(op), [a, b]))

    def unary(self, sid, op, a):
        with self.at(sid):
            return self._annotate(_eval_op(_op(op), [a]))

    def compare(self, sid, ops, *values):
        with self.at(sid):
            result = None
            for i, op in enumerate(ops):
                sub = _compare(op, values[i], values[i + 1])
                result = sub if result is None else _eval_op(_op("And"), [result, sub])
            return self._annotate(result)

    def boolop(self, sid, op, first, *rest):
        with self.at(sid):
            value = first
            for thunk in rest:
                if isinstance(value, bool) and (value if op == "Or" else not value):
                    return value
                if not isinstance(value, bool) and not isinstance(value, Object) and \
                        (bool(value) if op == "Or" else not bool(value)):
                    return value  # Python short-circuit for other Python values
                value = _eval_op(_op(op), [value, thunk()])
            return self._annotate(value)

    def ifexp(self, sid, test, then, otherwise):
        with self.at(sid):
            if tvm.ir.is_prim_expr(test) and test.ty.matches_code(tvm.DataTypeCode.BOOL):
                return self._annotate(tvm.tirx.op.if_then_else(test, then(), otherwise()))
            if isinstance(test, Object):
                raise TypeError(f"Expected Python bool or TIR bool, but got {type(test)}")
            return self._annotate(then() if test else otherwise())

    def getitem(self, sid, value, index):
        with self.at(sid):
            scalar = _scalar_element(value, index)
            return self._annotate(scalar if scalar is not None else value[index])

    # ----- names --------------------------------------------------------------------------
    def lookup(self, name):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return _MISSING

    def define(self, name, value):
        self.scopes[-1][name] = value
        return value

    @contextlib.contextmanager
    def scope(self):
        self.scopes.append({})
        try:
            yield
        finally:
            self.scopes.pop()

    def _bind(self, name, value):
        if _plain_python(value):
            return value  # dtypes, strings, functions, None: Python values stay Python values
        if isinstance(value, bool) or (isinstance(value, (int, float)) and not _in_kernel()):
            # ``is_hopper = check_hopper()``, ``n = 4`` before ``with T.Kernel``: compile-time values,
            # as upstream keeps them (a local scalar there could not reach the kernel at all)
            return value
        if isinstance(value, tvm.tirx.Var) and not is_buffer_var(value) and self.var_table.exist(value):
            return value  # ``row = bx``, ``M_ = M``: an alias (TVMScript copied it into a local scalar)
        return _tparser.bind_assign_value(self, None, name, value)

    def report_error(self, node, message):
        raise ValueError(message) if isinstance(message, str) else message

    def _store_scalar(self, current, value) -> bool:
        """``x = v`` where ``x`` is a one-element buffer (a scalar variable): store, True if done."""
        if isinstance(current, T.scalar_wrapper):
            buffer = current.scalar.source
        elif isinstance(current, TensorLoad):
            buffer = current.source
        elif is_buffer_var(current):
            buffer = current
        else:
            return False
        if len(buffer.ty.shape) == 1 and bool(buffer.ty.shape[0] == 1):
            try:
                T.buffer_store(buffer, value, [0])
                return True
            except TypeError:
                return False
        return False

    def assign(self, name, value):
        current = self.lookup(name)
        if current is not _MISSING and self._store_scalar(current, value):
            return current
        return self.define(name, self._bind(name, value))

    def aug_assign(self, op, current, value, name):
        result = _eval_op(_op(op), [current, value])
        known = self.lookup(name)
        if known is not _MISSING and self._store_scalar(known, result):
            return known
        return self.define(name, self._bind(name, result))

    def missing(self):
        return _MISSING

    def ann_assign(self, name, value, ann):
        if value is _MISSING and self.eager is not None and self.eager.is_param(name):
            return self.define(name, self.eager.declare(name, ann))
        if value is _MISSING:
            value = None
        if isinstance(ann, T.LocalVectorAnnotation):
            if value is not None:
                raise ValueError("Vector annotation does not support initial value")
            return self.define(name, self._bind(name, T.alloc_local(shape=ann.shape, dtype=ann.dtype)))
        if isinstance(ann, T.LetAnnotation):
            if value is None:
                raise ValueError("T.let annotation requires a value")
            if not isinstance(value, Expr):
                value = tvm.ir.StringImm(value) if isinstance(value, str) else tvm.tirx.const(value)
            var = ann.as_var() if ann.type_spec is not None else ann.as_var(rhs_dtype=value.ty)
            bound = self.define(name, self._bind(name, var))
            T.Bind(value, var=var)
            return bound
        if _python_type_annotation(ann):
            # ``dtype: str = BF16``, ``n: int = 4``, ``x: Optional[float] = None``: a Python
            # annotation on a Python value is only documentation (upstream runs the body as Python)
            if value is None and not isinstance(ann, type):
                return self.define(name, None)
            if value is not None:
                return self.assign(name, value)
        var = ann() if callable(ann) and not isinstance(ann, Expr) else ann
        if not isinstance(var, tvm.ir.Var):
            raise TypeError(f"the annotation of '{name}' should be a scalar type such as T.int32, got {ann!r}")
        scalar = T.local_scalar(dtype=str(var.ty))
        bound = self.define(name, self._bind(name, scalar))
        if value is not None:
            T.buffer_store(scalar.scalar.source, value, [0])
        return bound

    def unpack(self, value, count, names, stores):
        """The values of ``a, b = value``; snapshots them first when a target is stored to (an
        element or a scalar variable), so ``a, b = b, a`` swaps."""
        values = tuple(value)
        if len(values) != count:
            raise ValueError(f"cannot unpack {len(values)} values into {count} targets")
        mutable = stores or any(isinstance(n, str) and isinstance(self.lookup(n), (TensorLoad, T.scalar_wrapper))
                                for n in names)
        if not mutable:
            return values
        out = []
        for v in values:
            if isinstance(v, Object) and tvm.ir.is_prim_expr(v) and not isinstance(v, (tvm.tirx.IntImm,
                                                                                       tvm.tirx.FloatImm)):
                scalar = T.local_scalar(dtype=str(v.ty.dtype))
                IRBuilder.name("tmp", scalar.scalar.source)
                T.buffer_store(scalar.scalar.source, v, [0])
                v = scalar.scalar
            out.append(v)
        return tuple(out)

    def store(self, target, index, value):
        if isinstance(value, TensorRegion):   # ``A[0, 4:8] = A[0, 0:4]``: a vector of the slice
            value = _region_as_vector(value)
        if is_buffer_var(target):
            T.buffer_store(target, value, index)
        else:
            target[tuple(index) if isinstance(index, list) else index] = value

    def aug_store(self, target, index, single, op, value):
        current = target[index] if single else target[tuple(index)]
        self.store(target, index if not single else [index], _eval_op(_op(op), [current, value]))

    # ----- statements ---------------------------------------------------------------------
    def expr(self, res):
        if res is None or isinstance(res, str):
            return
        if isinstance(res, Frame):
            res.add_callback(partial(res.__exit__, None, None, None))
            res.__enter__()
        elif hasattr(res, "frames") and hasattr(res, "__enter__"):
            for f in res.frames:
                f.add_callback(partial(f.__exit__, None, None, None))
                f.__enter__()
        elif isinstance(res, tvm.ir.Var) or is_buffer_var(res):
            pass
        elif tvm.ir.is_prim_expr(res):
            T.evaluate(res)
        elif isinstance(res, (int, bool)):
            T.evaluate(tvm.tirx.const(res))
        elif isinstance(res, tvm.ir.Call):
            T.evaluate(res)
        elif isinstance(res, tvm.tirx.stmt.BufferStore):
            T.buffer_store(res.buffer, res.value, res.indices)
        elif self.modes[-1] == "prim_func" and not callable(res):
            raise TypeError(f"Parsing resulted in unexpected type {type(res)}")

    def range_(self, sid, *args, **kwargs):
        with self.at(sid):
            if len(args) == 1:
                return T.serial(0, args[0], **kwargs)
            if len(args) == 2:
                return T.serial(args[0], args[1], **kwargs)
            if len(args) == 3:
                if _positive_const(args[2]):
                    return T.serial(args[0], args[1], step=args[2], **kwargs)
                return _SteppedRange(*args, annotations=kwargs.get("annotations"))
            raise TypeError("range() takes 1 to 3 arguments")

    def for_(self, it):
        if isinstance(it, T.frame.ForFrame):
            return self._tir_loop([it], single=True)
        frames = getattr(it, "loop_frames", None)
        if callable(frames):
            return self._tir_loop(frames(), single=False, values=getattr(it, "loop_values", None))
        bound = loop_binding(it)   # `for tx in T.thread_binding(n, ...)` inside T.Kernel: the body once
        if bound is not None:
            if bound[0] is None:
                return self._py_loop([it])
            return self._tir_loop([T.If(bound[0]), T.Then()], single=True, values=lambda _: it)
        return self._py_loop(it)

    def _tir_loop(self, frames, single, values=None):
        """Enter ``frames`` around one body; ``values(loop_vars)`` (a loop spec's) gives what the
        loop target is bound to instead of the loop variables."""
        self.scopes.append({})
        self.loops.append("tir")
        loop_vars = [f.__enter__() for f in frames]
        try:
            if values is not None:
                yield values(loop_vars)
            else:
                yield loop_vars[0] if single or len(loop_vars) == 1 else loop_vars
        except GeneratorExit:
            return  # the build failed or returned: the IR builder is discarded
        finally:
            self.loops.pop()
            self.scopes.pop()
        for f in reversed(frames):
            f.__exit__(None, None, None)

    def _py_loop(self, it):
        self.loops.append("py")
        try:
            for value in it:
                self.scopes.append({})
                try:
                    yield value
                finally:
                    self.scopes.pop()
        finally:
            self.loops.pop()

    def while_(self, cond):
        self.scopes.append({})
        try:
            value = cond()
        except BaseException:
            self.scopes.pop()
            raise
        if tvm.ir.is_prim_expr(value):
            frame = T.While(value)
            frame.__enter__()
            self.loops.append("tir")
            try:
                yield None
            except GeneratorExit:
                return
            finally:
                self.loops.pop()
                self.scopes.pop()
            frame.__exit__(None, None, None)
            return
        self.scopes.pop()
        self.loops.append("py")
        try:
            while value:
                yield None
                value = cond()
        finally:
            self.loops.pop()

    def break_(self):
        if self.loops and self.loops[-1] == "tir":
            T.evaluate(T.break_loop())
            return False
        return True

    def continue_(self):
        if self.loops and self.loops[-1] == "tir":
            T.evaluate(T.continue_loop())
            return False
        return True

    def bind_for(self, names, value):
        return self._bind_loop(names, value, _tparser.bind_for_value)

    def bind_with(self, names, value):
        return self._bind_loop(names, value, _tparser.bind_with_value)

    def _bind_loop(self, names, value, bind):
        if names is None:
            return value
        if isinstance(names, tuple):
            if len(names) == 1 and isinstance(value, tvm.ir.Var):
                value = (value,)  # ``with T.Kernel(n) as (bx,)``: one grid dimension
            values = list(value)
            if len(values) != len(names):
                raise ValueError(f"cannot unpack {len(values)} values into {len(names)} targets")
            return tuple(self._bind_loop(n, v, bind) for n, v in zip(names, values))
        if isinstance(value, (Object, list, tuple)) and self.loops_or_frames(value):
            bind(self, None, names, value)
        return self.define(names, value)

    @staticmethod
    def loops_or_frames(value) -> bool:
        if isinstance(value, (list, tuple, tvm.ir.Array)):
            return all(isinstance(v, tvm.ir.Var) for v in value)
        return isinstance(value, tvm.ir.Var)

    def cond(self, value, has_else):
        return _Cond(value, has_else)

    @contextlib.contextmanager
    def then(self, c):
        if not c.tir:
            yield
            return
        c.frame = T.If(c.value)
        c.frame.__enter__()
        with T.Then(), self.scope():
            yield
        if not c.has_else:
            c.frame.__exit__(None, None, None)

    def has_else(self, c):
        return c.tir or not c.value

    @contextlib.contextmanager
    def else_(self, c):
        if not c.tir:
            yield
            return
        with T.Else(), self.scope():
            yield
        c.frame.__exit__(None, None, None)

    def with_(self, sid, ctx):
        if not isinstance(ctx, Frame) and not (hasattr(ctx, "__enter__") and hasattr(ctx, "__exit__")):
            raise TypeError("Invalid context expression in the with-statement.")
        if self.eager is not None and getattr(ctx, "tl_kernel_launch", False):
            self.eager.kernel_launched()
        return ctx

    def assert_(self, cond, message):
        cond = _fold(cond)
        if isinstance(cond, (bool, int)) and not isinstance(cond, Object):
            if not cond:
                msg = message()
                raise AssertionError(msg) if msg is not None else AssertionError()
            return
        msg = message()
        kind = "RuntimeError"
        if isinstance(msg, tuple):
            kind, msg = msg
            kind = kind.value if isinstance(kind, tvm.ir.StringImm) else kind
        if isinstance(msg, (list, tuple)):
            msg = [p.value if isinstance(p, tvm.ir.StringImm) else str(p) for p in msg]
        frame = T.Assert(cond, msg, error_kind=kind)
        frame.add_callback(partial(frame.__exit__, None, None, None))
        frame.__enter__()

    def ret(self, value, tail=False):
        if self.modes[-1] != "prim_func":
            return value
        if value is None:
            if tail:
                return None     # a bare ``return`` ending the kernel body (upstream drops it)
            raise ValueError("a bare `return` inside a kernel only ends its body; to stop some threads early, put "
                             "what follows under an `if` (or call T.thread_return())")
        T.Return(value)
        return None
