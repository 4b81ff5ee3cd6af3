"""Lowering of ``T.print`` on a buffer: each element printed once, by the thread that holds it
(fragments, thread-local arrays) or by thread 0 (shared and global memory). Printing only reads,
so inserting a print never changes results; barriers around shared reads come from thread_sync."""

from __future__ import annotations

import math

from tvm import tirx

from tilelang.tir_utils import const_int, evaluate_extern, i32
from tilelang.transform.kernel import FRAGMENT_SCOPE, LoweringError, decode_region, scope_of


def lower_print(lw, stmt):
    region = decode_region(stmt.value.args[0])
    msg = stmt.value.args[1]
    buf = region.buffer
    shape = [const_int(s) for s in buf.shape]
    if None in shape:
        raise LoweringError("TL0002", "T.print of a buffer needs a constant shape", stmt.span)
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    scope = scope_of(buf)
    v = tirx.Var("v", "int32")
    if scope == FRAGMENT_SCOPE:
        layout = lw.layouts.fragments[buf]
        idx = layout.index(lw.tid, v)
        flat = sum((e * s for e, s in zip(idx, strides)), i32(0))
        value = tirx.BufferLoad(lw.frag[buf], [v])
        body = evaluate_extern("tl::print_element", msg, lw.an.simplify(flat), value, span=stmt.span)
        if layout.replication > 1:
            body = tirx.IfThenElse(tirx.EQ(layout.replica_index(lw.tid), i32(0)), body, None)
        return tirx.For(v, i32(0), i32(max(layout.local_size, 1)), tirx.ForKind.SERIAL, body)
    n = math.prod(shape)
    idx, rest = [], v
    for extent in reversed(shape):
        idx.append(tirx.floormod(rest, i32(extent)))
        rest = tirx.floordiv(rest, i32(extent))
    target, flat_idx = lw.element(buf, list(reversed(idx)))
    body = evaluate_extern("tl::print_element", msg, v, tirx.BufferLoad(target, flat_idx), span=stmt.span)
    loop = tirx.For(v, i32(0), i32(n), tirx.ForKind.SERIAL, body)
    if scope == "local":
        return loop
    return tirx.IfThenElse(tirx.EQ(lw.tid, i32(0)), loop, None)
