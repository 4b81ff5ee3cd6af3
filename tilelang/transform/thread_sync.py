"""Barrier insertion: a ``__syncthreads()`` wherever one statement's shared-memory accesses can
race with an earlier statement's (read-after-write, write-after-read, write-after-write between
different statements), and at the end of a loop body when the next iteration's first accesses
race with this iteration's last ones.

The analysis runs on the tile-level statements before lowering: a tile op's operands say which
shared buffers it reads and writes, so no per-element reasoning is needed. It is conservative:
two statements touching the same buffer are assumed to use different thread mappings, and
buffers that share bytes (disjoint lifetimes, ``smem_plan``) count as the same buffer.
"""

from __future__ import annotations

from tvm import ir, tirx

from tilelang.language._ops import is_tl_call
from tilelang.tir_utils import evaluate_extern, seq, walk_stmts
from tilelang.transform import thread_regions, user_ws
from tilelang.transform.kernel import SHARED_SCOPES, decode_region, is_parallel_nest, scope_of


def shared_rw(stmt):
    """(reads, writes): sets of shared buffers a statement (and everything in it) touches."""
    return buffer_rw(stmt, SHARED_SCOPES)


def buffer_rw(stmt, scopes):
    """(reads, writes): the buffers of the given scopes a statement touches (a tile operand
    counts as read even when it is only written: conservative)."""
    reads, writes = set(), set()
    import tvm_ffi

    def on_stmt(s):
        if isinstance(s, tirx.Evaluate) and is_tl_call(s.value):
            for arg in s.value.args:
                if is_tl_call(arg, "region"):
                    r = decode_region(arg)
                    if scope_of(r.buffer) in scopes:
                        if r.access & 1:
                            reads.add(r.buffer)
                        if r.access & 2:
                            writes.add(r.buffer)
        elif isinstance(s, tirx.BufferStore) and scope_of(s.buffer) in scopes:
            writes.add(s.buffer)

    def on_load(e):
        if isinstance(e, ir.TensorLoad) and scope_of(e.source) in scopes:
            reads.add(e.source)
        return None

    def on_call(e):
        # an element's address handed to an atomic or a store (T.atomic_add(shared[i], v),
        # T.sts32) is written through: count it as a write too
        if not (isinstance(e, ir.Call) and getattr(e.op, "name", None) == "tirx.call_extern" and e.args):
            return None
        fn = str(getattr(e.args[0], "value", "")).lower()
        if "atomic" not in fn and "store_shared" not in fn:
            return None
        for arg in e.args[1:]:
            if isinstance(arg, ir.Call) and getattr(arg.op, "name", None) == "tirx.address_of" and arg.args:
                ref = arg.args[0]
                if isinstance(ref, ir.TensorLoad) and scope_of(ref.source) in scopes:
                    writes.add(ref.source)
        return None

    walk_stmts(stmt, on_stmt)
    if not _is_annotation(stmt):
        tvm_ffi.structural_walk(stmt, [(ir.TensorLoad, on_load), (ir.Call, on_call)], order="pre")
    return reads, writes


def _is_annotation(stmt) -> bool:
    """Annotations name a buffer without touching its contents."""
    return isinstance(stmt, tirx.Evaluate) and is_tl_call(stmt.value) and stmt.value.op.name in (
        "tl.annotate_layout", "tl.use_swizzle")


def conflict(r, w, pend_r, pend_w) -> bool:
    """Whether accesses ``(r, w)`` race with the pending ``(pend_r, pend_w)``: read-after-write,
    write-after-read or write-after-write on a common buffer."""
    return bool((r & pend_w) or (w & pend_r) or (w & pend_w))


def sync_stmt(lw=None):
    """``__syncthreads()``; in a kernel whose gemms read shared memory through wgmma (the async
    proxy), preceded by ``fence.proxy.async`` so that this thread's ordinary shared-memory writes
    are visible to the wgmma of every thread after the barrier. In a warp-specialised kernel the
    barrier is named barrier 1 over the consumer threads only."""
    sync = evaluate_extern("__syncthreads")
    role = user_ws.role_sync(lw) if lw is not None else None
    guarded = thread_regions.guarded_sync(lw) if lw is not None and role is None and lw.ws is None else None
    if guarded is not None:
        sync = guarded      # under `if tx < n:`: only the selected threads meet (or hoisted)
    elif role is not None:
        sync = role     # inside a T.ws block: only its warp groups meet
    elif lw is not None and lw.ws is not None:
        # Warp-specialised kernel: the producer warpgroup never meets the consumers' barriers.
        sync = evaluate_extern("tl::named_barrier_sync", 1, lw.T)
    if lw is not None and lw.layouts.wgmma:
        return seq([evaluate_extern("tl::fence_proxy_async"), sync])
    return sync


def region_sync(lw):
    """``__syncthreads()`` (``sync_stmt()`` without the kernel's extras), or under conditions on
    the thread index the barrier over the threads they select (``thread_regions.guarded_sync``)."""
    guarded = thread_regions.guarded_sync(lw) if lw is not None and lw.ws is None else None
    return guarded if guarded is not None else evaluate_extern("__syncthreads")


def _widen(bufs, alias):
    """A set of buffers plus every buffer sharing bytes with one of them (``smem_plan``)."""
    out = set(bufs)
    for b in bufs:
        out |= alias.get(b, set())
    return out


def plan_sequence(stmts, alias=None, rw=shared_rw):
    """Indices before which a barrier goes, plus the (reads, writes) pending at the end and the
    accesses made before the first barrier. ``alias``: buffer -> buffers sharing its bytes;
    ``rw(stmt) -> (reads, writes)`` says what a statement touches (``storage_sync`` passes its own
    for thread-level TIR)."""
    syncs, pend_r, pend_w = [], set(), set()
    head_r, head_w, head_open = set(), set(), True
    touching = 0
    for k, s in enumerate(stmts):
        # a T.ws block is ordered against the others by the user's mbarriers
        r, w = (set(), set()) if user_ws.is_ws(s) else rw(s)
        if alias:
            r, w = _widen(r, alias), _widen(w, alias)
        if r or w:
            touching += 1
        if conflict(r, w, pend_r, pend_w):
            syncs.append(k)
            pend_r, pend_w = set(), set()
            head_open = False
        if head_open:
            head_r |= r
            head_w |= w
        pend_r |= r
        pend_w |= w
    return syncs, (pend_r, pend_w), (head_r, head_w), touching


def lower_sequence(lw, stmts):
    planned = stmts
    if getattr(lw, "ws", None) is not None and lw.ws.heads:
        # a head copy is the TMA producer's, behind an mbarrier the consumers wait on: no barrier
        planned = [tirx.Evaluate(tirx.IntImm("int32", 0)) if lw.ws.is_head(s) else s for s in stmts]
    syncs, _, _, _ = plan_sequence(planned, getattr(lw, "smem_alias", None))
    out = []
    for k, s in enumerate(stmts):
        if k in syncs:
            out.append(sync_stmt(lw))
        out.append(lw.lower(s))
    return seq(out)


def lower_loop_body(lw, body):
    """A loop body (statement or list of statements) with its barriers, plus one at the end when
    the next iteration's first accesses race with this iteration's last ones."""
    if isinstance(body, list):
        stmts = body
    else:
        stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    syncs, (tail_r, tail_w), (head_r, head_w), touching = plan_sequence(stmts, getattr(lw, "smem_alias", None))
    lowered = lower_sequence(lw, stmts)
    if (touching > 1 or _touching_leaves(stmts) > 1) and conflict(head_r, head_w, tail_r, tail_w):
        lowered = seq([lowered, sync_stmt(lw)])
    return lowered


def _touching_leaves(stmts) -> int:
    """How many tile-level statements (tile ops, T.Parallel nests, element stores) under
    ``stmts`` touch shared memory. A body of one compound statement (``if a >= 0:`` around a copy
    into a tile and a store out of it) races with its own next iteration as a sequence does."""
    count = 0

    def go(s):
        nonlocal count
        if s is None:
            return
        if isinstance(s, (tirx.Evaluate, tirx.BufferStore)) or is_parallel_nest(s) or user_ws.is_ws(s):
            r, w = (set(), set()) if user_ws.is_ws(s) else shared_rw(s)
            count += bool(r or w)
            return
        if isinstance(s, tirx.SeqStmt):
            for c in s.seq:
                go(c)
        elif isinstance(s, tirx.IfThenElse):
            go(s.then_case)
            go(s.else_case)
        else:
            go(getattr(s, "body", None))

    for s in stmts:
        go(s)
    return count
