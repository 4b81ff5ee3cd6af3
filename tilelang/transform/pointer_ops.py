"""Lowering of the raw-pointer ops (``T.access_ptr``, ``T.ptx_cp_async``), before any other pass.

Contract: ``lower_pointer_ops(func)`` returns ``func`` itself when its body holds neither op (so
no other kernel changes), else a copy where
- ``tl.access_ptr(A[i, j], extent, rw_mask)`` is ``address_of(A[i, j])``: the extent and the
  read/write mask only document the access;
- a vectorized loop whose body is a single ``tl.ptx_cp_async`` of element pointers that advance
  by one element per iteration (``for i in T.vectorized(4): T.ptx_cp_async(T.access_ptr(S[i]),
  T.access_ptr(A[i]), 1)``) is one copy of ``extent * num_elems`` elements from the first ones;
- ``tl.ptx_cp_async(dst, src, num_elems[, predicate])`` is ``tl::cp_async_gs<bytes>(dst, src)``
  (``tl::cp_async_gs_conditional<bytes>(dst, src, predicate)``: zero-filled when false), with
  ``bytes = num_elems * element bits / 8`` of the source's element type (4, 8 or 16).
Anything malformed is a ``LoweringError`` (TL0002) at the op's statement.
"""

from __future__ import annotations

import contextvars

from tvm import ir, tirx

from tilelang.tir_utils import ExprRewriter, any_expr, const_int, dtype_of, seq, simplify, substitute, walk_stmts
from tilelang.transform.kernel import LoweringError

ACCESS_PTR = "tl.access_ptr"
PTX_CP_ASYNC = "tl.ptx_cp_async"
_OPS = (ACCESS_PTR, PTX_CP_ASYNC)


def _op_name(e) -> str | None:
    op = getattr(e, "op", None)
    return getattr(op, "name", None) if isinstance(op, ir.Op) else None


def _is_ours(e) -> bool:
    return isinstance(e, ir.Call) and _op_name(e) in _OPS


def _has_ours(node) -> bool:
    return any_expr(node, _is_ours)


class _Rewriter(ExprRewriter):
    def __init__(self, span):
        self.span = span

    def visit_Call(self, e):
        e = super().visit_Call(e)
        name = _op_name(e)
        if name == ACCESS_PTR:
            load = e.args[0]
            if not isinstance(load, ir.TensorLoad):
                raise LoweringError("TL0002", f"T.access_ptr: expected an element A[...] as its base, got "
                                    f"{type(load).__name__}", self.span)
            return tirx.address_of(load)
        return e


# data variable -> Buffer of the function being lowered (``lower_pointer_ops``), for TVM's
# ``T.tvm_access_ptr``, which names a buffer by its data variable
_BUFFERS: contextvars.ContextVar = contextvars.ContextVar("tl_pointer_ops_buffers", default=())


def _element(ptr, what, span):
    """The element load an access pointer (or address_of) points at; TVM's
    ``T.tvm_access_ptr(T.type_annotation(dtype), buf.data, offset, extent, rw)`` (TileOPs' norms)
    the element at ``offset`` (row-major) of the buffer whose data it names, in that dtype."""
    if isinstance(ptr, ir.Call) and _op_name(ptr) == ACCESS_PTR:
        return ptr.args[0]
    if isinstance(ptr, ir.Call) and getattr(ptr.op, "name", "") == "tirx.address_of":
        return ptr.args[0]
    if isinstance(ptr, ir.Call) and getattr(ptr.op, "name", "") == "tirx.tvm_access_ptr" and len(ptr.args) == 5:
        data = ptr.args[1]
        if isinstance(data, ir.Call) and getattr(data.op, "name", "") == "tirx.buffer_data":
            data = data.args[0]         # (``s.data`` in a script)
        buf = next((b for v, b in _BUFFERS.get() if v.same_as(data) or b.same_as(data)), None)
        if buf is not None and dtype_of(ptr.args[0]) == str(buf.dtype):
            idx, rest = [], ptr.args[2]
            for n in reversed(list(buf.shape)[1:]):
                idx.append(tirx.floormod(rest, n))
                rest = tirx.floordiv(rest, n)
            return tirx.BufferLoad(buf, [simplify(i) for i in [rest] + idx[::-1]])
    raise LoweringError("TL0002", f"T.ptx_cp_async: the {what} must be T.access_ptr(...) or T.address_of(...) "
                        f"of an element, got {ptr}", span)


def _cp_async(call, span):
    args = list(call.args)
    if len(args) not in (3, 4):
        raise LoweringError("TL0002", "T.ptx_cp_async takes (dst, src, num_elems[, predicate])", span)
    dst, src = _element(args[0], "destination", span), _element(args[1], "source", span)
    n = const_int(args[2])
    if n is None or n <= 0:
        raise LoweringError("TL0002", f"T.ptx_cp_async: num_elems must be a positive constant, got {args[2]}", span)
    bits = tirx.BufferLoad(src.source, list(src.indices)).source.dtype.bits
    if (n * bits) % 8:
        raise LoweringError("TL0002", f"T.ptx_cp_async: {n} elements of {src.source.dtype} are not whole bytes", span)
    nbytes = n * bits // 8
    if nbytes not in (4, 8, 16):
        raise LoweringError("TL0002", f"T.ptx_cp_async copies 4, 8 or 16 bytes; {n} elements of "
                            f"{src.source.dtype} are {nbytes}", span)
    d_ptr, s_ptr = tirx.address_of(dst), tirx.address_of(src)
    if len(args) == 4:
        return tirx.call_extern("void", f"tl::cp_async_gs_conditional<{nbytes}>", d_ptr, s_ptr, args[3])
    return tirx.call_extern("void", f"tl::cp_async_gs<{nbytes}>", d_ptr, s_ptr)


def _unit_stride(load, var) -> bool:
    """Does ``load``'s address advance by exactly one element per step of ``var``?"""
    idx = list(load.indices)
    if not idx:
        return False
    for k, i in enumerate(idx):
        step = simplify(substitute(i, {var: tirx.IntImm("int32", 1)}) - substitute(i, {var: tirx.IntImm("int32", 0)}))
        want = 1 if k == len(idx) - 1 else 0
        if const_int(step) != want:
            return False
    return True


def _fold_vectorized(loop):
    """A vectorized loop of one element-wise cp.async: one wide copy (None when it is not one)."""
    body = loop.body
    if not (isinstance(body, tirx.Evaluate) and isinstance(body.value, ir.Call)
            and _op_name(body.value) == PTX_CP_ASYNC):
        return None
    extent, start = const_int(loop.extent), const_int(loop.min)
    args = list(body.value.args)
    if extent is None or start is None or len(args) not in (3, 4) or const_int(args[2]) is None:
        return None
    if len(args) == 4 and any_expr(args[3], lambda e: isinstance(e, tirx.Var) and e.same_as(loop.loop_var)):
        return None   # a per-element predicate: not one copy
    loads = [_element(args[0], "destination", loop.span), _element(args[1], "source", loop.span)]
    if not all(_unit_stride(ld, loop.loop_var) for ld in loads) or const_int(args[2]) != 1:
        return None
    first = {loop.loop_var: tirx.IntImm("int32", start)}
    wide = [substitute(args[0], first), substitute(args[1], first), tirx.IntImm("int32", extent)] + args[3:]
    return tirx.Evaluate(ir.Call(body.value.op, wide, ret_ty=body.value.ty), span=body.span)


def _stmt(s):
    if s is None:
        return None
    if not _has_ours(s):
        return s
    if isinstance(s, tirx.SeqStmt):
        return seq([_stmt(x) for x in s.seq])
    if isinstance(s, tirx.For):
        if s.kind == tirx.ForKind.VECTORIZED:
            folded = _fold_vectorized(s)
            if folded is not None:
                return _stmt(folded)
        return tirx.For(s.loop_var, s.min, s.extent, s.kind, _stmt(s.body), thread_binding=s.thread_binding,
                        annotations=s.annotations, step=s.step, span=s.span)
    if isinstance(s, tirx.IfThenElse):
        rw = _Rewriter(s.span)
        return tirx.IfThenElse(rw.visit(s.condition), _stmt(s.then_case), _stmt(s.else_case), span=s.span)
    if isinstance(s, tirx.AttrStmt):
        return tirx.AttrStmt(s.node, s.attr_key, _Rewriter(s.span).visit(s.value), _stmt(s.body), span=s.span)
    if isinstance(s, tirx.While):
        return tirx.While(_Rewriter(s.span).visit(s.condition), _stmt(s.body), span=s.span)
    if isinstance(s, tirx.Evaluate):
        value = s.value
        if isinstance(value, ir.Call) and _op_name(value) == PTX_CP_ASYNC:
            value = _cp_async(value, s.span)
        return tirx.Evaluate(_Rewriter(s.span).visit(value), span=s.span)
    if isinstance(s, tirx.BufferStore):
        rw = _Rewriter(s.span)
        return tirx.BufferStore(s.buffer, rw.visit(s.value), [rw.visit(i) for i in s.indices], span=s.span)
    if isinstance(s, tirx.Bind):
        return tirx.Bind(s.var, _Rewriter(s.span).visit(s.value), span=s.span)
    raise LoweringError("TL0002", f"T.access_ptr / T.ptx_cp_async inside a {type(s).__name__} statement is not "
                        "supported", s.span)


def lower_pointer_ops(func):
    """``func`` with ``tl.access_ptr`` and ``tl.ptx_cp_async`` lowered (see the module doc)."""
    if not _has_ours(func.body):
        return func
    bufs = [(b.data, b) for b in func.buffer_map.values()]
    walk_stmts(func.body, lambda st: bufs.append((st.buffer.data, st.buffer))
               if isinstance(st, (tirx.AllocBuffer, tirx.DeclBuffer)) else None)
    token = _BUFFERS.set(tuple(bufs))
    try:
        return func.with_body(_stmt(func.body))
    finally:
        _BUFFERS.reset(token)
