"""``ThreadSync(scope)``: barrier insertion as a TVM pass over thread-level TIR (upstream's
``tilelang.transform.ThreadSync``), for hand-written low-level kernels and IR tooling
(``tilelang.utils.pass_diff``). Our own pipeline places its barriers on the tile-level program
(``thread_sync``); this pass reuses that planner on the statements of thread-level TIR.

Contract:
- ``ThreadSync("shared")`` / ``ThreadSync("shared.dyn")`` returns a module pass (``tl.ThreadSync``)
  that inserts ``T.tvm_storage_sync(scope)`` (``__syncthreads()`` in CUDA) before a statement whose
  accesses to buffers of that scope race with an earlier statement's (read-after-write,
  write-after-read, write-after-write) and at the end of a serial loop body whose first accesses
  race with its last ones. Any other scope is a ``ValueError``.
- Accesses are found per allocation (a ``decl_buffer(data=B.data)`` view counts as ``B``): loads,
  stores, tile-op regions, ``tvm_access_ptr`` masks and addresses handed to atomics. It is
  conservative, as ``thread_sync`` is: two statements touching one buffer are assumed to use
  different threads' elements, and an atomic counts as a read and a write. Accesses within one
  statement never get a barrier (element atomics from every thread, e.g.
  ``tl.atomic_add_elem_op``, need none).
- A barrier is never placed where only some threads would reach it: the pass does not enter
  branches whose condition, or loops whose bounds, depend on ``threadIdx`` (directly or through a
  bound variable), nor vectorized/parallel/thread-bound loops.

Also registers ``tl.atomic_add_elem_op(dst_ptr, value, memory_order)`` (upstream's element atomic
of thread-level TIR, ``memory_order`` numbered as C++'s ``std::memory_order``: 0 relaxed ... 5
seq_cst), lowered for CUDA to ``tl::atomic_add(dst_ptr, value)``, or for another order to
``tl::atomic_add_ordered<ORDER>`` (the fences of ``T.atomic_add(..., memory_order=...)``).
"""

from __future__ import annotations

import tvm
from tvm import ir, tirx

from tilelang.language._ops import get_op
from tilelang.tir_utils import any_expr, buffer_roots, data_buffer, map_stmts, seq, walk_stmts
from tilelang.transform.kernel import scope_of
from tilelang.transform.thread_sync import buffer_rw, conflict, plan_sequence

__all__ = ["ThreadSync", "insert_storage_syncs"]

SYNC_SCOPES = ("shared", "shared.dyn")
ATOMIC_ADD_ELEM = "tl.atomic_add_elem_op"


# ----------------------------------------------------------------------- tl.atomic_add_elem_op
# std::memory_order's numbering (relaxed, consume, acquire, release, acq_rel, seq_cst) -> the
# device library's ORDER (src/tl/atomic.h: 0 relaxed, 1 acquire, 2 release, 3 seq_cst, 4 acq_rel)
_STD_ORDERS = {0: 0, 1: 1, 2: 1, 3: 2, 4: 4, 5: 3}


def _lower_atomic_add_elem(call):
    order = call.args[2] if len(call.args) > 2 else None
    if order is None:
        return tirx.call_extern(call.dtype, "tl::atomic_add", call.args[0], call.args[1])
    if not (isinstance(order, tirx.IntImm) and int(order.value) in _STD_ORDERS):
        raise ValueError(f"{ATOMIC_ADD_ELEM}: memory order {order} is not a constant 0-5 (std::memory_order: "
                         "relaxed, consume, acquire, release, acq_rel, seq_cst)")
    ours = _STD_ORDERS[int(order.value)]
    name = "tl::atomic_add" if not ours else f"tl::atomic_add_ordered<{ours}>"
    return tirx.call_extern(call.dtype, name, call.args[0], call.args[1])


get_op("atomic_add_elem_op")
tirx.op.register_intrin_lowering(ATOMIC_ADD_ELEM, target="cuda", f=_lower_atomic_add_elem, level=99)


# ----------------------------------------------------------------------- accesses
def _statement_rw(stmt, scope: str, roots: dict):
    """(reads, writes): the allocations of ``scope`` buffers that ``stmt`` touches."""
    reads, writes = buffer_rw(stmt, (scope,))
    reads = {roots.get(b, b) for b in reads}
    writes = {roots.get(b, b) for b in writes}

    def on_call(e):
        if isinstance(e, ir.Call) and getattr(e.op, "name", None) == "tirx.tvm_access_ptr" and len(e.args) >= 5:
            buf, mask = data_buffer(e.args[1]), e.args[4]
            if buf is not None and scope_of(buf) == scope:
                bits = int(mask.value) if isinstance(mask, tirx.IntImm) else 3
                if bits & 1:
                    reads.add(roots.get(buf, buf))
                if bits & 2:
                    writes.add(roots.get(buf, buf))
        return False

    any_expr(stmt, on_call)
    return reads, writes


# ----------------------------------------------------------------------- uniformity
def _thread_dependent_vars(body) -> list:
    """``threadIdx`` variables plus every variable bound (Bind/LetStmt) to an expression of them."""
    found = []

    def on_stmt(s):
        if isinstance(s, tirx.AttrStmt) and s.attr_key == "thread_extent":
            iv = s.node
            if str(getattr(iv, "thread_tag", "")).startswith("threadIdx"):
                found.append(iv.var)
        elif isinstance(s, (tirx.Bind, tirx.LetStmt)) and found and _uses(s.value, found):
            found.append(s.var)

    walk_stmts(body, on_stmt)
    return found


def _uses(node, variables) -> bool:
    return any_expr(node, lambda e: isinstance(e, tirx.Var) and any(e.same_as(v) for v in variables))


# ----------------------------------------------------------------------- insertion
def insert_storage_syncs(body, scope: str = "shared"):
    """``body`` (thread-level TIR) with ``tvm_storage_sync(scope)`` barriers inserted."""
    if scope not in SYNC_SCOPES:
        raise ValueError(f"ThreadSync: storage scope must be one of {SYNC_SCOPES}, got {scope!r}")
    divergent = _thread_dependent_vars(body)
    roots = buffer_roots(body)

    def rw(s):
        return _statement_rw(s, scope, roots)

    def sync():
        return tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", scope))

    def block(stmts, in_loop):
        syncs, (tail_r, tail_w), (head_r, head_w), touching = plan_sequence(stmts, rw=rw)
        out = []
        for k, s in enumerate(stmts):
            if k in syncs:
                out.append(sync())
            out.append(visit(s))
        if in_loop and touching > 1 and conflict(head_r, head_w, tail_r, tail_w):
            out.append(sync())
        return out

    def pre(s):
        if isinstance(s, tirx.SeqStmt):
            return seq(block(list(s.seq), in_loop=False))
        if isinstance(s, tirx.IfThenElse) and divergent and _uses(s.condition, divergent):
            return s
        if isinstance(s, tirx.For):
            if s.kind not in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED) or (
                    divergent and (_uses(s.min, divergent) or _uses(s.extent, divergent))):
                return s
            stmts = list(s.body.seq) if isinstance(s.body, tirx.SeqStmt) else [s.body]
            new = seq(block(stmts, in_loop=True))
            return tirx.For(s.loop_var, s.min, s.extent, s.kind, new, thread_binding=s.thread_binding,
                            annotations=s.annotations, step=s.step, span=s.span)
        if isinstance(s, tirx.While) and divergent and _uses(s.condition, divergent):
            return s
        return None

    def visit(s):
        return map_stmts(s, pre=pre)

    return visit(body)


def ThreadSync(storage_scope: str = "shared"):  # noqa: N802 - upstream's name
    """A module pass inserting ``tvm_storage_sync(storage_scope)`` barriers (module docstring)."""
    scope = str(storage_scope)
    if scope not in SYNC_SCOPES:
        raise ValueError(f"ThreadSync: storage scope must be one of {SYNC_SCOPES}, got {scope!r} "
                         "(grid-wide 'global' synchronisation is T.sync_grid)")

    def run(func, _mod, _ctx):
        return func.with_body(insert_storage_syncs(func.body, scope))

    return tvm.tirx.transform.prim_func_pass(run, opt_level=0, name="tl.ThreadSync")
