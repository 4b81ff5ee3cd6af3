"""Small helpers over TVM 0.27 IR that the wheel does not provide from Python (the ground floor:
every layer, from ``tilelang.layout`` up, may import this module; it imports only TVM).

``ExprRewriter`` rebuilds an expression bottom-up and lets a subclass replace variables and
buffer loads; ``substitute`` is built on it. ``walk_stmts`` visits statements in pre-order.
"""

from __future__ import annotations

from typing import Callable, Iterable

import tvm
from tvm import ir, tirx
from tvm.tirx import is_buffer_var

_analyzer = None


def analyzer() -> "tvm.sym.Analyzer":
    global _analyzer
    if _analyzer is None:
        _analyzer = tvm.sym.Analyzer()
    return _analyzer


def simplify(expr):
    if isinstance(expr, (int, float)):
        return expr
    return analyzer().simplify(expr)


def is_zero_const(value) -> bool:
    """Whether ``value`` (a broadcast of it too) simplifies to the constant 0."""
    if isinstance(value, tirx.Broadcast):
        value = value.value
    value = simplify(value)
    return isinstance(value, (tirx.FloatImm, tirx.IntImm)) and float(value.value) == 0.0


def dtype_of(expr) -> str:
    ty = expr.ty
    return str(getattr(ty, "dtype", ty))


def as_logical(cond):
    """``cond`` with ``&`` / ``|`` between boolean operands as ``and`` / ``or`` (users write guards
    as ``if (i >= 0) & (i < n):``): the analyzer takes a conjunction apart into what it knows only
    in the logical form. For the analyzer's constraints; the code keeps the user's operators."""
    if isinstance(cond, (tirx.BitwiseAnd, tirx.BitwiseOr)) and dtype_of(cond) == "bool" \
            and dtype_of(cond.a) == "bool" and dtype_of(cond.b) == "bool":
        a, b = as_logical(cond.a), as_logical(cond.b)
        return tirx.And(a, b) if isinstance(cond, tirx.BitwiseAnd) else tirx.Or(a, b)
    if isinstance(cond, (tirx.And, tirx.Or)):
        a, b = as_logical(cond.a), as_logical(cond.b)
        if not (a.same_as(cond.a) and b.same_as(cond.b)):
            return type(cond)(a, b)
    return cond


def const_int(expr):
    """The Python int value of an integer immediate (after simplification), else None."""
    if isinstance(expr, int):
        return expr
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    s = simplify(expr)
    if isinstance(s, tirx.IntImm):
        return int(s.value)
    return None


def i32(v):
    return tirx.IntImm("int32", v) if isinstance(v, int) else v


_BINARY = ("Add", "Sub", "Mul", "Div", "Mod", "FloorDiv", "FloorMod", "Min", "Max", "EQ", "NE",
           "LT", "LE", "GT", "GE", "And", "Or", "BitwiseXor", "BitwiseAnd", "BitwiseOr", "LShift", "RShift")


class ExprRewriter:
    """Rebuild an expression; override ``visit_var``/``visit_load`` to rewrite leaves."""

    def visit(self, e):
        if e is None or isinstance(e, (int, float, str)):
            return e
        name = type(e).__name__
        if name in _BINARY:
            a, b = self.visit(e.a), self.visit(e.b)
            if a.same_as(e.a) and b.same_as(e.b):
                return e
            return getattr(tirx, name)(a, b)
        method = getattr(self, "visit_" + name, None)
        if method is not None:
            return method(e)
        return e

    def visit_Var(self, e):
        return self.visit_var(e)

    def visit_var(self, var):
        return var

    def visit_TensorLoad(self, e):
        return self.visit_load(e, [self.visit(i) for i in e.indices])

    def visit_load(self, load, indices):
        if all(a.same_as(b) for a, b in zip(indices, load.indices)):
            return load
        return tirx.BufferLoad(load.source, indices)

    def visit_Cast(self, e):
        v = self.visit(e.value)
        return e if v.same_as(e.value) else tirx.Cast(dtype_of(e), v)

    def visit_Not(self, e):
        return tirx.Not(self.visit(e.a))

    def visit_BitwiseNot(self, e):
        a = self.visit(e.a)
        return e if a.same_as(e.a) else tirx.BitwiseNot(a)

    def visit_Select(self, e):
        return tirx.Select(self.visit(e.condition), self.visit(e.true_value), self.visit(e.false_value))

    def visit_Let(self, e):
        return tirx.Let(e.var, self.visit(e.value), self.visit(e.body))

    def visit_Ramp(self, e):
        return tirx.Ramp(self.visit(e.base), self.visit(e.stride), e.lanes)

    def visit_Broadcast(self, e):
        return tirx.Broadcast(self.visit(e.value), e.lanes)

    def visit_Shuffle(self, e):
        vectors = [self.visit(v) for v in e.vectors]
        if all(a.same_as(b) for a, b in zip(vectors, e.vectors)):
            return e
        return tirx.Shuffle(vectors, list(e.indices))

    def visit_Call(self, e):
        args = [self.visit(a) if not is_buffer_var(a) else a for a in e.args]
        if all((x is y) or (hasattr(x, "same_as") and x.same_as(y)) for x, y in zip(args, e.args)):
            return e
        return ir.Call(e.op, args, attrs=e.attrs, ret_ty=e.ty)


class _Substituter(ExprRewriter):
    def __init__(self, vmap):
        self.vmap = vmap

    def visit_var(self, var):
        for k, v in self.vmap.items():
            if k.same_as(var):
                return i32(v)
        return var


def substitute(expr, vmap: dict):
    """Replace variables in ``expr`` by the mapped expressions."""
    if not vmap:
        return expr
    return _Substituter(vmap).visit(expr)


def substitute_stmt(stmt, vmap: dict, strict: bool = False):
    """``stmt`` with the variables of ``vmap`` replaced in every expression; a ``Bind`` or loop
    variable that ``vmap`` maps to another Var is renamed (a copy of lowered code that must
    define variables of its own). Statement kinds other than sequences, branches, loops,
    attributes, bindings, stores, evaluations and buffer declarations are kept as they are,
    or rejected with ``strict``."""
    if not vmap:
        return stmt
    rw = _Substituter(vmap)

    def var(v):
        new = next((x for k, x in vmap.items() if k.same_as(v)), v)
        return new if isinstance(new, tirx.Var) else v

    def go(s):
        if s is None:
            return None
        if isinstance(s, tirx.SeqStmt):
            return seq([go(x) for x in s.seq])
        if isinstance(s, tirx.BufferStore):
            return tirx.BufferStore(s.buffer, rw.visit(s.value), [rw.visit(i) for i in s.indices], span=s.span)
        if isinstance(s, tirx.IfThenElse):
            return tirx.IfThenElse(rw.visit(s.condition), go(s.then_case), go(s.else_case), span=s.span)
        if isinstance(s, tirx.Evaluate):
            return tirx.Evaluate(rw.visit(s.value), span=s.span)
        if isinstance(s, tirx.Bind):
            return tirx.Bind(var(s.var), rw.visit(s.value), span=s.span)
        if isinstance(s, tirx.For):
            return tirx.For(var(s.loop_var), rw.visit(s.min), rw.visit(s.extent), s.kind, go(s.body),
                            annotations=s.annotations, span=s.span)
        if isinstance(s, tirx.AttrStmt):
            return tirx.AttrStmt(s.node, s.attr_key, rw.visit(s.value), go(s.body), span=s.span)
        if strict and not isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer)):
            raise TypeError(f"substitute_stmt: unexpected {type(s).__name__}")
        return s

    return go(stmt)


def children(stmt) -> list:
    if isinstance(stmt, tirx.SeqStmt):
        return list(stmt.seq)
    body = getattr(stmt, "body", None)
    out = [body] if body is not None else []
    if isinstance(stmt, tirx.IfThenElse):
        out = [stmt.then_case] + ([stmt.else_case] if stmt.else_case is not None else [])
    return out


def walk_stmts(stmt, fn: Callable) -> None:
    """Call ``fn`` on every statement, pre-order."""
    fn(stmt)
    for c in children(stmt):
        walk_stmts(c, fn)


def tvm_ffi_walk(node, fn):
    """Call ``fn`` on every expression node reachable from ``node`` (pre-order)."""
    import tvm_ffi

    tvm_ffi.structural_walk(node, [(ir.Expr, lambda n: (fn(n), None)[1])], order="pre")


def any_expr(node, pred: Callable) -> bool:
    """Whether some expression node reachable from ``node`` satisfies ``pred`` (stops at the first)."""
    import tvm_ffi

    def visit(n):
        return tvm_ffi.VisitInterrupt(True) if pred(n) else None

    return tvm_ffi.structural_walk(node, [(ir.Expr, visit)], order="pre") is not None


def uses_vars(node, variables) -> bool:
    """Whether ``node`` mentions any of the Vars ``variables``."""
    variables = list(variables)
    return any_expr(node, lambda e: isinstance(e, tirx.Var) and any(e.same_as(v) for v in variables))


def free_vars(expr) -> list:
    """The Vars ``expr`` mentions, each once, in pre-order (buffer variables excepted)."""
    out = []
    tvm_ffi_walk(expr, lambda e: out.append(e) if isinstance(e, tirx.Var) and not tirx.is_buffer_var(e)
                 and not any(e.same_as(v) for v in out) else None)
    return out


def tensor_loads(node) -> list:
    """Every buffer read (``TensorLoad``) reachable from ``node``, in pre-order."""
    out = []
    tvm_ffi_walk(node, lambda e: out.append(e) if isinstance(e, ir.TensorLoad) else None)
    return out


def has_load(node) -> bool:
    """Whether ``node`` reads a buffer anywhere."""
    return any_expr(node, lambda e: isinstance(e, ir.TensorLoad))


def flatten(stmts: Iterable) -> list:
    """The statements with nested sequences spliced in and Nones dropped."""
    items = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, tirx.SeqStmt):
            items.extend(flatten(s.seq))
        else:
            items.append(s)
    return items


def seq(stmts: Iterable):
    items = flatten(stmts)
    if not items:
        return tirx.Evaluate(tirx.IntImm("int32", 0))
    if len(items) == 1:
        return items[0]
    return tirx.SeqStmt(items)


def evaluate_extern(name: str, *args, dtype: str = "void", span=None):
    call = tirx.call_extern(dtype, name, *[i32(a) for a in args])
    return tirx.Evaluate(call, span=span)


def extern_name(node) -> "str | None":
    """The function a ``call_extern`` calls (an ``Evaluate`` of one, or the call), else None."""
    v = node.value if isinstance(node, tirx.Evaluate) else node
    if isinstance(v, tirx.Call) and getattr(v.op, "name", "") in ("tirx.call_extern", "tirx.call_pure_extern") \
            and v.args:
        return str(getattr(v.args[0], "value", ""))
    return None


def loop(var_name: str, extent, body_fn: Callable, kind=None, annotations=None, span=None):
    """Build ``for v in range(extent): body_fn(v)``; extent 1 inlines the body with v = 0."""
    if const_int(extent) == 1:
        return body_fn(i32(0))
    v = tirx.Var(var_name, "int32")
    body = body_fn(v)
    kind = kind if kind is not None else tirx.ForKind.SERIAL
    return tirx.For(v, i32(0), i32(extent), kind, body, annotations=annotations, span=span)


def unrolled(var_name: str, extent, body_fn: Callable, span=None):
    return loop(var_name, extent, body_fn, kind=tirx.ForKind.UNROLLED, span=span)


def eval_int(expr, env: dict | None = None, arrays: bool = False):
    """Evaluate an integer TIR expression with Python ints: ``env`` maps variables (the Var
    objects themselves, matched by identity, or their names) to values. ``arrays``: the values
    are numpy integer arrays (broadcast against each other) and so is the result."""
    env = env or {}
    if isinstance(expr, int):
        return expr
    name = type(expr).__name__
    if name == "IntImm":
        return int(expr.value)
    if name == "Var":
        for var, value in env.items():
            if not isinstance(var, str) and var.same_as(expr):
                return value if arrays else int(value)
        return env[expr.name] if arrays else int(env[expr.name])
    if name in ("Min", "Max"):
        a, b = eval_int(expr.a, env, arrays), eval_int(expr.b, env, arrays)
        if arrays:
            import numpy as np
            return (np.minimum if name == "Min" else np.maximum)(a, b)
        return (min if name == "Min" else max)(a, b)
    ops = {"Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
           "FloorDiv": lambda a, b: a // b, "FloorMod": lambda a, b: a % b,
           # C (truncating); the sign as 1 - 2 * (signs differ) works on ints and arrays alike
           "Div": lambda a, b: abs(a) // abs(b) * (1 - 2 * ((a < 0) != (b < 0))),
           "Mod": lambda a, b: a - b * (abs(a) // abs(b) * (1 - 2 * ((a < 0) != (b < 0)))),
           "BitwiseXor": lambda a, b: a ^ b, "BitwiseAnd": lambda a, b: a & b, "BitwiseOr": lambda a, b: a | b}
    if name in ops:
        return ops[name](eval_int(expr.a, env, arrays), eval_int(expr.b, env, arrays))
    if name == "Call":
        args = [eval_int(a, env, arrays) for a in expr.args]
        op = expr.op.name
        if op.endswith("bitwise_xor"):
            return args[0] ^ args[1]
        if op.endswith("bitwise_and"):
            return args[0] & args[1]
        if op.endswith("shift_right"):
            return args[0] >> args[1]
    if name == "Cast":
        return eval_int(expr.value, env, arrays)
    raise ValueError(f"cannot evaluate {expr}")


def span_line(span):
    """The line of a span (the first located part of a macro's SequentialSpan), or '?'."""
    if span is None:
        return "?"
    parts = getattr(span, "spans", None)
    if parts is not None:
        for part in parts:
            if getattr(part, "line", 0):
                return part.line
        return "?"
    return getattr(span, "line", "?") or "?"


def data_buffer(expr):
    """The buffer whose data pointer ``expr`` is (``B.data``), else None."""
    if isinstance(expr, ir.Call) and getattr(expr.op, "name", None) == "tirx.buffer_data" and expr.args:
        return expr.args[0]
    return None


def buffer_roots(body) -> dict:
    """buffer -> the allocation it views (``decl_buffer(data=B.data)`` views B), for the
    buffers declared over another buffer's data."""
    parent = {}

    def on_stmt(s):
        if isinstance(s, tirx.DeclBuffer):
            base = data_buffer(getattr(s, "data", None))
            if base is not None and not base.same_as(s.buffer):
                parent[s.buffer] = base

    walk_stmts(body, on_stmt)

    def root(b):
        seen = 0
        while b in parent and seen < 64:
            b, seen = parent[b], seen + 1
        return b

    return {b: root(b) for b in parent}


def ir_transform(node, preorder, postorder, only_enable=None):
    """Upstream's ``ir_transform``: ``node`` (a statement or an expression) rebuilt bottom-up. On
    each node of a type in ``only_enable`` (type keys such as ``"tir.Call"``; all when None),
    ``preorder(n)``, where not None, replaces it without visiting inside; else its children are
    transformed and ``postorder(n)`` of the rebuilt node, where not None, replaces it."""
    names = None if only_enable is None else {str(k).rsplit(".", 1)[-1] for k in only_enable}
    if names is not None and "BufferLoad" in names:
        names.add("TensorLoad")

    def enabled(n):
        return names is None or type(n).__name__ in names

    def call(fn, n):
        if fn is None or not enabled(n):
            return None
        return fn(n)

    class Exprs(ExprRewriter):
        def visit(self, e):
            if not isinstance(e, ir.Expr):
                return e
            got = call(preorder, e)
            if got is not None:
                return got
            e = super().visit(e)
            got = call(postorder, e)
            return e if got is None else got

    ex = Exprs()

    def go(s):
        if s is None or isinstance(s, ir.Expr):
            return ex.visit(s) if s is not None else None
        got = call(preorder, s)
        if got is not None:
            return got
        if isinstance(s, tirx.SeqStmt):
            s = tirx.SeqStmt([go(x) for x in s.seq])
        elif isinstance(s, tirx.IfThenElse):
            s = tirx.IfThenElse(ex.visit(s.condition), go(s.then_case), go(s.else_case), span=s.span)
        elif isinstance(s, tirx.For):
            s = tirx.For(s.loop_var, ex.visit(s.min), ex.visit(s.extent), s.kind, go(s.body),
                         thread_binding=s.thread_binding, annotations=s.annotations, step=s.step, span=s.span)
        elif isinstance(s, tirx.While):
            s = tirx.While(ex.visit(s.condition), go(s.body), span=s.span)
        elif isinstance(s, tirx.AttrStmt):
            s = tirx.AttrStmt(s.node, s.attr_key, ex.visit(s.value), go(s.body), span=s.span)
        elif isinstance(s, tirx.Bind):
            s = tirx.Bind(s.var, ex.visit(s.value), span=s.span)
        elif isinstance(s, tirx.BufferStore):
            s = tirx.BufferStore(s.buffer, ex.visit(s.value), [ex.visit(i) for i in s.indices], span=s.span)
        elif isinstance(s, tirx.Evaluate):
            s = tirx.Evaluate(ex.visit(s.value), span=s.span)
        got = call(postorder, s)
        return s if got is None else got

    return go(node)


def flat_index(buf, indices):
    """The flat element offset of ``buf[indices]`` (its strides, else row-major; its element
    offset added), or None when the rank disagrees."""
    if buf.strides:
        strides = list(buf.strides)
    else:
        strides, acc = [], i32(1)
        for extent in reversed(list(buf.shape)):
            strides.append(acc)
            acc = acc * extent
        strides.reverse()
    if len(strides) != len(indices):
        return None
    flat = None
    for i, st in zip(indices, strides):
        term = i if isinstance(st, tirx.IntImm) and st.value == 1 else i * st
        flat = term if flat is None else flat + term
    flat = i32(0) if flat is None else flat
    offset = buf.elem_offset
    return flat if isinstance(offset, tirx.IntImm) and offset.value == 0 else offset + flat


def map_stmts(stmt, pre: Callable | None = None, loop: Callable | None = None):
    """``stmt`` rewritten: a statement for which ``pre(s)`` is not None is replaced by that (and not
    entered); every ``For`` is replaced by ``loop(for)`` after its body (innermost first). Only the
    statements on a changed path are rebuilt; sequences, branches, attributes and while loops are
    walked through (0.27's Bind has no body: what it binds is visible to the statements after it)."""

    def go(st):
        if pre is not None:
            new = pre(st)
            if new is not None:
                return new
        if isinstance(st, tirx.SeqStmt):
            parts = [go(x) for x in st.seq]
            return st if all(a.same_as(b) for a, b in zip(parts, st.seq)) else seq(parts)
        if isinstance(st, tirx.IfThenElse):
            then = go(st.then_case)
            other = None if st.else_case is None else go(st.else_case)
            if then.same_as(st.then_case) and (other is None or other.same_as(st.else_case)):
                return st
            return tirx.IfThenElse(st.condition, then, other, span=st.span)
        if isinstance(st, tirx.For):
            body = go(st.body)
            if not body.same_as(st.body):
                st = tirx.For(st.loop_var, st.min, st.extent, st.kind, body, thread_binding=st.thread_binding,
                              annotations=st.annotations, step=st.step, span=st.span)
            return loop(st) if loop is not None else st
        if isinstance(st, tirx.AttrStmt):
            body = go(st.body)
            return st if body.same_as(st.body) else tirx.AttrStmt(st.node, st.attr_key, st.value, body,
                                                                   span=st.span)
        if isinstance(st, tirx.While):
            body = go(st.body)
            return st if body.same_as(st.body) else tirx.While(st.condition, body, span=st.span)
        return st

    return go(stmt)



def map_sequences(stmt, step: Callable):
    """``stmt`` with a peephole run over every sequence (flattened across nested ones): each of its
    statements, rewritten the same way first, goes in order through ``step(out, x)``, which appends
    ``x`` to the list ``out`` of those kept so far or edits that list instead."""
    def pre(st):
        if not isinstance(st, tirx.SeqStmt):
            return None
        out = []
        for x in flatten([st]):
            step(out, map_sequences(x, step))
        return seq(out)

    return map_stmts(stmt, pre=pre)


def any_stmt(stmt, pred: Callable) -> bool:
    """Whether some statement under ``stmt`` (itself included) satisfies ``pred``."""
    return pred(stmt) or any(any_stmt(c, pred) for c in children(stmt))


def map_loops(stmt, fn: Callable):
    """``stmt`` with every ``For`` replaced by ``fn(loop)`` (innermost first: ``fn`` sees the loop
    with its body already mapped); see ``map_stmts``."""
    return map_stmts(stmt, loop=fn)
