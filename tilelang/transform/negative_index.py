"""Negative lanes of vector indices count from the end of the dimension (upstream's semantics).

A vector index written by the user (``A[T.Ramp(t - 2, 1, 4)]``, ``A[T.Broadcast(i, 4)]``) may
reach below zero in some lanes; like a Python index, such a lane means ``extent + index``. Every
index is bounded over the loop, thread and block ranges around it (and the values bound before
it):
- no lane can be negative: unchanged (the vector access stays one wide load or store);
- every lane is negative: ``extent`` is added to the whole vector;
- otherwise each lane becomes ``index < 0 ? extent + index : index`` (lanes provably on one side
  take that side only), and the access is one element per lane.

Runs on the kernel as written, before the tile lowering, so that only vectors the user wrote are
examined (never those the lowering builds). A kernel without vector indices is returned as is.
Scalar indices are left alone: one that may be negative is guarded by the tile lowering like one
past the end (``Lowerer.global_guard``: store skipped, load reads 0).
"""

from __future__ import annotations

import tvm
from tvm import ir, tirx

from tilelang.tir_utils import ExprRewriter, any_expr, const_int, dtype_of, seq

_INF = 1 << 62


def _lanes(expr) -> int:
    return tvm.DataType(dtype_of(expr)).lanes


def _is_vector_index(e) -> bool:
    return isinstance(e, (tirx.Ramp, tirx.Broadcast)) and const_int(e.lanes) is not None


def _has_vector_index(body) -> bool:
    found = [False]

    def on_expr(e):
        if isinstance(e, ir.TensorLoad) and any(_is_vector_index(i) for i in e.indices):
            found[0] = True
        return found[0]

    def on_stmt(st):
        if isinstance(st, tirx.BufferStore) and any(_is_vector_index(i) for i in st.indices):
            found[0] = True

    from tilelang.tir_utils import walk_stmts

    walk_stmts(body, on_stmt)
    return found[0] or any_expr(body, on_expr)


class _Legalizer(ExprRewriter):
    def __init__(self, an):
        self.an = an
        self.changed = False

    def bounds(self, e):
        b = self.an.const_int_bound(e)
        return b.min_value, b.max_value

    def index(self, index, extent):
        """``index`` (one of a vector access's indices) with its negative lanes wrapped."""
        if isinstance(index, tirx.Broadcast):
            lo, hi = self.bounds(index.value)
            if lo >= 0:
                return index
            self.changed = True
            if hi < 0:
                return tirx.Broadcast(self.an.simplify(index.value + extent), index.lanes)
            v = index.value
            return tirx.Broadcast(tirx.Select(v < 0, self.an.simplify(v + extent), v), index.lanes)
        if not isinstance(index, tirx.Ramp):
            return index
        lanes = const_int(index.lanes)
        base_lo, base_hi = self.bounds(index.base)
        s_lo, s_hi = self.bounds(index.stride)
        if max(abs(base_lo), abs(base_hi), abs(s_lo), abs(s_hi)) >= _INF:
            lo, hi = (-_INF, _INF) if base_lo < 0 or s_lo < 0 else (0, _INF)
        else:
            lo = base_lo + min(0, s_lo) * (lanes - 1)
            hi = base_hi + max(0, s_hi) * (lanes - 1)
        if lo >= 0:
            return index
        self.changed = True
        if hi < 0:
            return tirx.Ramp(self.an.simplify(index.base + extent), index.stride, index.lanes)
        values = []
        for k in range(lanes):
            lane = self.an.simplify(index.base + index.stride * k)
            if self.an.can_prove(lane < 0):
                lane = self.an.simplify(lane + extent)
            elif not self.an.can_prove(lane >= 0):
                lane = tirx.Select(lane < 0, self.an.simplify(lane + extent), lane)
            values.append(lane)
        return tirx.Shuffle(values, [tirx.IntImm("int32", k) for k in range(lanes)])

    def indices(self, buf, indices):
        if not any(_is_vector_index(i) for i in indices):
            return indices
        shape = list(buf.shape)
        if len(shape) != len(indices):
            return indices
        return [self.index(i, n) if _is_vector_index(i) else i for i, n in zip(indices, shape)]

    def visit_load(self, load, indices):
        return super().visit_load(load, self.indices(load.source, indices))

    def visit_Shuffle(self, e):
        return e


def _map(st, lg, an):
    if isinstance(st, tirx.SeqStmt):
        parts = [_map(x, lg, an) for x in st.seq]
        return st if all(a.same_as(b) for a, b in zip(parts, st.seq)) else seq(parts)
    if isinstance(st, tirx.For):
        an.bind(st.loop_var, ir.Range.from_min_extent(st.min, st.extent), allow_override=True)
        body = _map(st.body, lg, an)
        return st if body.same_as(st.body) else tirx.For(
            st.loop_var, st.min, st.extent, st.kind, body, thread_binding=st.thread_binding,
            annotations=st.annotations, step=st.step, span=st.span)
    if isinstance(st, tirx.AttrStmt):
        if st.attr_key == "thread_extent" and isinstance(st.node, tirx.IterVar):
            an.bind(st.node.var, ir.Range.from_min_extent(0, st.value), allow_override=True)
        body = _map(st.body, lg, an)
        return st if body.same_as(st.body) else tirx.AttrStmt(st.node, st.attr_key, st.value, body, span=st.span)
    if isinstance(st, tirx.IfThenElse):
        then = _map(st.then_case, lg, an)
        other = None if st.else_case is None else _map(st.else_case, lg, an)
        return tirx.IfThenElse(lg.visit(st.condition), then, other, span=st.span)
    if isinstance(st, tirx.While):
        return tirx.While(lg.visit(st.condition), _map(st.body, lg, an), span=st.span)
    if isinstance(st, tirx.BufferStore):
        value = lg.visit(st.value)
        indices = lg.indices(st.buffer, [lg.visit(i) for i in st.indices])
        return tirx.BufferStore(st.buffer, value, indices, span=st.span)
    if isinstance(st, tirx.Evaluate):
        return tirx.Evaluate(lg.visit(st.value), span=st.span)
    if isinstance(st, tirx.Bind):
        value = lg.visit(st.value)
        if _lanes(st.var) == 1 and dtype_of(st.var).startswith("int"):
            an.bind(st.var, value, allow_override=True)
        return tirx.Bind(st.var, value, span=st.span)
    return st


def legalize_negative_indices(body):
    """``body`` with the negative lanes of its vector indices wrapped (see the module docstring);
    ``body`` itself where nothing changes."""
    if not _has_vector_index(body):
        return body
    an = tvm.sym.Analyzer()
    lg = _Legalizer(an)
    out = _map(body, lg, an)
    return out if lg.changed else body


__all__ = ["legalize_negative_indices"]
