"""Barrier insertion: a ``__syncthreads()`` wherever one statement's shared-memory accesses can
race with an earlier statement's (read-after-write, write-after-read, write-after-write between
different statements), and in a loop body whose next iteration's first accesses race with this
iteration's last ones, at its end (or, with ``tl.enable_loop_head_barrier``, before the first
statement of the body that races with them). A loop ending with that barrier leaves nothing of its
own pending for the statements after it (``closes_with_barrier``).

The analysis runs on the tile-level statements: a tile op's operands say which shared buffers it
reads and writes. It is conservative: two statements touching the same buffer are assumed to use
different thread mappings, and buffers that share bytes (disjoint lifetimes, ``smem_plan``) count
as the same buffer, with one exception (``thread_elements``): where every statement involved is a
synchronous threaded ``T.copy``, a ``T.Parallel`` nest or a statement addressed by the thread index
(``indexed_elements``) whose per-thread shared elements are known exactly (the copy's partition,
the nest's loop layout, the addresses at every thread and iteration), and every element both touch
belongs to one and the same thread, the thread reads back only what it wrote itself and no barrier
goes between them (upstream's rms_norm: a copy into a tile, an element-wise loop over it, a copy
out of it).

In a wgmma kernel a barrier gets ``fence.proxy.async`` only where the writes it publishes reach a
buffer the async proxy reads (``needs_fence``). A lone cp.async copy of a sequence is waited for
just before the first statement touching its tile (``_place_waits``).
"""

from __future__ import annotations

from tvm import ir, tirx

from tilelang.language._ops import is_tl_call
from tilelang.tir_utils import (any_expr, const_int, dtype_of, eval_int, evaluate_extern, extern_name, flatten, i32,
                                map_sequences, map_stmts, seq, tvm_ffi_walk, walk_stmts)
from tilelang.transform import thread_regions, user_ws
from tilelang.transform.kernel import SHARED_SCOPES, decode_region, is_parallel_nest, scope_of
from tilelang.transform.pass_config import PassConfigKey

ASYNC_COPY_FLAG = 3     # the T.copy flag of T.async_copy (language/tile.py: committed, not waited for)


def is_async_copy(stmt) -> bool:
    """``stmt`` is a ``T.async_copy`` (a ``T.copy`` with ``ASYNC_COPY_FLAG``: committed, not waited for)."""
    v = stmt.value if isinstance(stmt, tirx.Evaluate) else None
    return v is not None and is_tl_call(v, "copy") and len(v.args) > 3 and const_int(v.args[3]) == ASYNC_COPY_FLAG


def as_async_copy(stmt):
    """The ``T.copy`` statement ``stmt`` as a ``T.async_copy``."""
    v = stmt.value
    args = list(v.args) + [tirx.IntImm("int32", 0)] * (4 - len(v.args))
    args[3] = tirx.IntImm("int32", ASYNC_COPY_FLAG)
    return tirx.Evaluate(ir.Call(v.op, args, ret_ty=v.ty), span=stmt.span)


def shared_rw(stmt):
    """(reads, writes): sets of shared buffers a statement (and everything in it) touches."""
    return buffer_rw(stmt, SHARED_SCOPES)


def tile_rw(stmt):
    """``shared_rw`` of the tile ops in ``stmt`` only (``user_placed``)."""
    return buffer_rw(stmt, SHARED_SCOPES, plain=False)


def _mbarrier_load(stmt) -> bool:
    """A ``T.tma_copy(global, shared, barrier=bar)``: its tile is written by the copy engine (or,
    where it cannot be one TMA load, by threads that fence and arrive on ``bar``), and the
    threads that read it wait on ``bar`` first, as the user wrote: it waits for the accesses
    before it as any write does, but what comes after it is ordered by the user's mbarrier, not
    by a block barrier (``plan_sequence``)."""
    if not user_ws.is_tma_copy(stmt) or not isinstance(stmt.value.args[4], ir.TensorLoad):
        return False
    src, dst = (decode_region(a) for a in stmt.value.args[:2])
    return scope_of(src.buffer) == "global" and scope_of(dst.buffer) in SHARED_SCOPES


def buffer_rw(stmt, scopes, plain=True):
    """(reads, writes): the buffers of the given scopes a statement touches (a tile operand
    counts as read even when it is only written: conservative); ``plain`` False: only the
    operands of tile ops, not element loads, stores and atomics. A global -> shared
    ``T.tma_copy`` with a barrier writes its tile and reads nothing (``_mbarrier_load``)."""
    reads, writes = set(), set()
    awaited = []        # the operands of T.tma_copy loads the user's mbarriers order
    import tvm_ffi

    def on_stmt(s):
        if _mbarrier_load(s):
            awaited.extend(a.args[0] for a in s.value.args[:2] if is_tl_call(a, "region"))
            dst = decode_region(s.value.args[1]).buffer
            if scope_of(dst) in scopes:
                writes.add(dst)
            return
        if isinstance(s, tirx.Evaluate) and is_tl_call(s.value):
            for arg in s.value.args:
                if is_tl_call(arg, "region"):
                    r = decode_region(arg)
                    if scope_of(r.buffer) in scopes:
                        if r.access & 1:
                            reads.add(r.buffer)
                        if r.access & 2:
                            writes.add(r.buffer)
        elif plain and isinstance(s, tirx.BufferStore) and scope_of(s.buffer) in scopes:
            writes.add(s.buffer)

    def on_load(e):
        if isinstance(e, ir.TensorLoad) and scope_of(e.source) in scopes \
                and not any(e.same_as(x) for x in awaited):
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
    if plain and not is_annotation(stmt):
        tvm_ffi.structural_walk(stmt, [(ir.TensorLoad, on_load), (ir.Call, on_call)], order="pre")
    return reads, writes


def is_annotation(stmt) -> bool:
    """Annotations name a buffer without touching its contents."""
    return isinstance(stmt, tirx.Evaluate) and is_tl_call(stmt.value) and stmt.value.op.name in (
        "tl.annotate_layout", "tl.use_swizzle")


def conflict(r, w, pend_r, pend_w) -> bool:
    """Whether accesses ``(r, w)`` race with the pending ``(pend_r, pend_w)``: read-after-write,
    write-after-read or write-after-write on a common buffer."""
    return bool((r & pend_w) or (w & pend_r) or (w & pend_w))


def sync_stmt(lw=None, writes=None):
    """``__syncthreads()``; in a kernel whose gemms read shared memory through wgmma (the async
    proxy), preceded by ``fence.proxy.async`` so that this thread's ordinary shared-memory writes
    are visible to the wgmma of every thread after the barrier. In a warp-specialised kernel the
    barrier is named barrier 1 over the consumer threads only. ``writes``: the shared buffers
    written since the last barrier where the caller knows them; the fence then goes only where
    one of them (or a buffer sharing its bytes) is read by the async proxy (``needs_fence``)."""
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
    return fenced(lw, sync, writes)


_BARRIERS = ("__syncthreads", "tl::named_barrier_sync")


def _barrier_call(stmt):
    """What a block or named barrier statement synchronises, or None: ("__syncthreads",) or
    ("tl::named_barrier_sync", id, threads); a user's ``T.sync_threads()`` (an int32 call) and
    ``T.sync_threads(id, n)`` (``tl::__sync_thread_partial``, the same barrier) compare equal to
    ours."""
    if not isinstance(stmt, tirx.Evaluate):
        return None
    name = extern_name(stmt)
    if name == "tl::__sync_thread_partial":
        name = "tl::named_barrier_sync"
    if name not in _BARRIERS:
        return None
    args = [(const_int(a), a) for a in stmt.value.args[1:]]
    return (name,) + tuple(c if c is not None else str(a) for c, a in args)


def is_barrier(stmt) -> bool:
    """A block or named barrier statement (ours or the user's ``T.sync_threads``)."""
    return _barrier_call(stmt) is not None


def _is_block_barrier(stmt) -> bool:
    """A ``__syncthreads()`` statement (ours or the user's ``T.sync_threads()``)."""
    return _barrier_call(stmt) == ("__syncthreads",)


def _is_fence(stmt) -> bool:
    return isinstance(stmt, tirx.Evaluate) and extern_name(stmt) == "tl::fence_proxy_async"


def drop_repeated_barriers(stmt):
    """``stmt`` without the barriers that repeat the same barrier with nothing in between (across
    nested sequences) but ``fence.proxy.async``: a tile op that opens or closes with a barrier of
    its own (``T.cumsum``), or a TMA store's fenced barrier, next to the one the sequence plan puts
    there. Of ``B; B`` one goes; of ``B; fence; B`` the first (a thread's fence orders its own
    earlier writes, before or after the first barrier alike, and the second barrier publishes
    them); of ``fence; fence`` one."""
    def step(out, x):
        if _is_fence(x) and out and _is_fence(out[-1]):
            return                      # fence; fence
        b = _barrier_call(x)
        if b is not None:
            j = len(out) - 1
            while j >= 0 and _is_fence(out[j]):
                j -= 1
            prev = _barrier_call(out[j]) if j >= 0 else None
            if prev is not None and b == prev:
                if j == len(out) - 1:
                    return              # B; B
                del out[j]              # B; fence; B
                if 0 < j < len(out) and _is_fence(out[j - 1]) and _is_fence(out[j]):
                    del out[j]          # (fence; B; fence; B)
        out.append(x)

    return map_sequences(stmt, step)


# fences only where a buffer written or one sharing its bytes is read by the async proxy otherwise
# than as a TMA store's source (``needs_fence``); opt-in until measured on a GPU
EXACT_STORE_FENCES_KEY = PassConfigKey.TL_ENABLE_EXACT_STORE_FENCES.value


def fenced(lw, sync, writes=None):
    """``sync`` preceded by ``fence.proxy.async`` where ``needs_fence``."""
    if needs_fence(lw, writes):
        return seq([evaluate_extern("tl::fence_proxy_async"), sync])
    return sync


def needs_fence(lw, writes=None) -> bool:
    """Whether a barrier after ordinary (generic-proxy) writes to the shared buffers ``writes``
    (None: unknown, any) needs ``fence.proxy.async`` before it: in a kernel with wgmma gemms,
    where one of them shares bytes with a buffer the async proxy reads (``async_read_buffers``:
    a wgmma reads what the threads wrote only after such a fence). A barrier that orders only
    reduction workspaces, or tiles only threads read, goes without it."""
    if lw is None or not lw.layouts.wgmma:
        return False
    if writes is None:
        return True
    readers = async_read_buffers(lw)
    alias = getattr(lw, "smem_alias", None) or {}
    if any(b not in _known_shared(lw) for b in writes):
        return True
    if not (getattr(lw, "configs", None) or {}).get(EXACT_STORE_FENCES_KEY):
        return bool(widen(set(writes), alias) & readers)
    # A buffer the async proxy reads only as the source of a TMA store, and only the threads write,
    # gets its bytes from generic writes followed by a fenced barrier before the store (the
    # planner's, or ``lower_copy._bulk_store``'s own): that fence orders every earlier generic
    # write of the thread too, so buffers merely sharing its bytes need no fence of their own.
    # (Buffers sharing bytes have disjoint lifetimes: the store source's writes come after theirs.)
    direct, others = lw._async_direct
    return bool(set(writes) & direct) or bool(widen(set(writes), alias) & others)


def async_read_buffers(lw):
    """The shared buffers of the kernel the async proxy may read (memoised on ``lw``), a superset:
    every shared operand of a gemm, the shared side of a copy to global memory (a TMA store), and
    every shared buffer handed to a call by address (a user's TMA store or wgmma), with the
    buffers sharing their bytes."""
    found = getattr(lw, "_async_readers", None)
    if found is not None:
        return found
    found, stores, loaded = set(), set(), set()

    def on_stmt(st):
        if not (isinstance(st, tirx.Evaluate) and is_tl_call(st.value)):
            return
        name = st.value.op.name[3:]
        regions = [decode_region(a) for a in st.value.args if is_tl_call(a, "region")]
        shared = [r.buffer for r in regions if scope_of(r.buffer) in SHARED_SCOPES]
        if name in _GENERIC_OPS:
            return
        if name in ("copy", "im2col"):     # the shared side of a store to global memory
            if any(scope_of(r.buffer) == "global" and r.access & 2 for r in regions):
                stores.update(r.buffer for r in regions if scope_of(r.buffer) in SHARED_SCOPES and r.access & 1)
            if any(scope_of(r.buffer) == "global" and r.access & 1 for r in regions):    # (may be a TMA load)
                loaded.update(r.buffer for r in regions if scope_of(r.buffer) in SHARED_SCOPES and r.access & 2)
            return
        found.update(shared)    # gemms (wgmma), cluster copies, tile atomics (bulk reductions), others

    def on_expr(e):
        found.update(_shared_by_address(e))
        return None

    import tvm_ffi
    walk_stmts(lw.info.body, on_stmt)
    tvm_ffi.structural_walk(lw.info.body, [(ir.Expr, on_expr)], order="pre")
    lw._async_readers = widen(found | stores, getattr(lw, "smem_alias", None) or {})
    # (as named: all of them; those the async proxy touches otherwise than as a TMA store's source
    # that only the threads write)
    lw._async_direct = (found | stores, found | (stores & loaded))
    return lw._async_readers


# tile ops that touch shared memory only through the threads' own loads and stores
_GENERIC_OPS = ("fill", "reduce", "cumsum", "annotate_layout", "use_swizzle", "print", "barrier_init", "wait_wgmma",
                "warpgroup_fence_operand",
                "reducer_decl", "reducer_init", "reducer_update", "finalize_reducer")


def _known_shared(lw):
    """The kernel's shared buffers the barrier planner names (``lw.layouts.shared``)."""
    return getattr(lw.layouts, "shared", {}) or {}


def region_sync(lw):
    """``__syncthreads()`` (``sync_stmt()`` without the kernel's extras), or under conditions on
    the thread index the barrier over the threads they select (``thread_regions.guarded_sync``)."""
    guarded = thread_regions.guarded_sync(lw) if lw is not None and lw.ws is None else None
    return guarded if guarded is not None else evaluate_extern("__syncthreads")


def widen(bufs, alias):
    """A set of buffers plus every buffer sharing bytes with one of them (``smem_plan``)."""
    out = set(bufs)
    for b in bufs:
        out |= alias.get(b, set())
    return out


def plan_sequence(stmts, alias=None, rw=shared_rw, owners=None, written=None, head=None, user_barriers=False,
                  closing=()):
    """Indices before which a barrier goes, plus the (reads, writes) pending at the end and the
    accesses made before the first barrier. ``alias``: buffer -> buffers sharing its bytes;
    ``rw(stmt) -> (reads, writes)`` says what a statement touches (``storage_sync`` passes its own
    for thread-level TIR); ``owners(k)``: ``thread_elements`` of statement k (None: unknown), to
    skip a barrier between statements whose common elements each belong to one thread.
    ``written``: a dict given by the caller, filled with barrier index -> the buffers written
    since the previous barrier (as the statements name them, without aliases: ``needs_fence``).
    ``head``: a list given by the caller, filled with (k, reads, writes) of each statement before
    the first barrier (with aliases: the accesses made before the first barrier are their union).
    ``user_barriers``: a ``__syncthreads()`` statement of the sequence (the user's ``T.sync_threads()``)
    orders what came before it as a planned barrier would (``_orders_like_ours``).
    ``closing``: indices of statements that end every iteration with a barrier publishing all they
    wrote (``closes_with_barrier``): after one, what it touched is no longer pending."""
    syncs, pend_r, pend_w = [], set(), set()
    head_r, head_w, head_open = set(), set(), True
    touching = 0
    in_flight = []      # destinations of T.async_copy issued in this sequence, one commit group each
    pending = []        # (k, reads, writes) of the statements since the last barrier
    own_r, own_w = set(), set()     # what they read and write, without aliases
    for k, s in enumerate(stmts):
        if user_barriers and _is_block_barrier(s):
            pend_r, pend_w, own_r, own_w = set(), set(), set(), set()
            pending = []
            head_open = False
            continue
        # a T.ws block is ordered against the others by the user's mbarriers
        r, w = (set(), set()) if user_ws.is_role(s) else rw(s)
        # a load landing behind the user's mbarrier: it waits for what came before it like any
        # write, and is not pending for what comes after (its readers wait on the mbarrier; two
        # such loads do not race)
        awaited, w = (w, set()) if _mbarrier_load(s) else (set(), w)
        if user_barriers and _leads_with_barrier(s):
            # (a loop whose body opens with the user's barrier: whatever it touches, it touches
            # after one; what came before stays pending, and the statements after it still count
            # as before the first barrier: the loop may not run)
            pend_r, pend_w = pend_r | r, pend_w | w
            own_r, own_w = own_r | r, own_w | w
            pending.append((None, r, w))
            touching += 1 if (r or w) else 0
            continue
        # cp.async data lands at the wait retiring its group, not at the issue: from there on
        # the tile counts as written again (a reader after a barrier between issue and wait
        # needs one more, after the wait)
        landed, in_flight = _async_landing(s, in_flight)
        direct_r, direct = r, w | landed
        if alias:
            r, w, landed, awaited = widen(r, alias), widen(w, alias), widen(landed, alias), widen(awaited, alias)
        if r or w or awaited:
            touching += 1
        # (this statement's buffers with their aliases against the pending ones as named: two
        # buffers that each share bytes with a third, at different bytes, do not conflict)
        if conflict(r, w | awaited, own_r, own_w) and not (
                owners is not None and not landed and not awaited and _same_owner([(k, r, w)], pending, owners)):
            syncs.append(k)
            if written is not None:
                written[k] = own_w
            pend_r, pend_w, own_r, own_w = set(), set(), set(), set()
            pending = []
            head_open = False
        before = (pend_r, pend_w, own_r, own_w, list(pending)) if k in closing else None
        if head_open:
            head_r |= r
            head_w |= w | landed | awaited
            if head is not None:
                head.append((k, r, w | landed | awaited))
        pend_r |= r
        pend_w |= w | landed
        own_r, own_w = own_r | direct_r, own_w | direct
        pending.append((k, r, w | landed) if not landed else (None, r, w | landed))
        if before is not None and not landed:
            # (whether the loop runs or not, only what was pending before it still is)
            pend_r, pend_w, own_r, own_w, pending = before
    if written is not None:
        written["end"] = own_w
    return syncs, (pend_r, pend_w), (head_r, head_w), touching


def _same_owner(later, earlier, owners) -> bool:
    """Whether no access of the statements ``later`` [(k, reads, writes)] races with one of
    ``earlier``: for every shared buffer written on one side and touched on the other, each
    statement touching it has known per-thread elements of it (``owners(k)``) and every element
    of it that both sides touch is touched by one thread only. ``k`` None: unknown."""
    for k1, r1, w1 in later:
        for k2, r2, w2 in earlier:
            for b in (r1 & w2) | (w1 & r2) | (w1 & w2):
                o1 = owners(k1) if k1 is not None else None
                o2 = owners(k2) if k2 is not None else None
                if o1 is None or o2 is None:
                    return False
                if b not in o1 and b not in o2:
                    continue    # (both only through buffers sharing its bytes: those are checked)
                if b not in o1 or b not in o2:
                    return False
                e1, e2 = o1[b], o2[b]
                if len(e2) < len(e1):
                    e1, e2 = e2, e1
                for e, t1 in e1.items():
                    t2 = e2.get(e)
                    if t2 is not None and (len(t1) != 1 or t1 != t2):
                        return False
    return True


def _async_landing(stmt, in_flight):
    """(buffers whose cp.async data a ``tl::cp_async_wait<n>`` in ``stmt`` retires, the groups
    still in flight after ``stmt``): each ``T.async_copy`` commits one group; a wait keeps the
    last n in flight."""
    landed = set()

    def visit(s):
        nonlocal in_flight
        if not isinstance(s, tirx.Evaluate):
            return
        v = s.value
        if is_async_copy(s):
            in_flight = in_flight + [decode_region(v.args[1]).buffer]
        elif isinstance(v, tirx.Call) and getattr(v.op, "name", None) == "tirx.call_extern" and v.args:
            fn = str(getattr(v.args[0], "value", ""))
            if fn.startswith("tl::cp_async_wait<"):
                n = int(fn[len("tl::cp_async_wait<"):-1])
                keep = in_flight[len(in_flight) - n:] if n else []
                landed.update(in_flight[:len(in_flight) - len(keep)])
                in_flight = keep

    walk_stmts(stmt, visit)
    return landed, in_flight


def lower_sequence(lw, stmts):
    return seq(_lower_planned(lw, stmts)[0])


def lower_sequence_written(lw, stmts):
    """(``lower_sequence``'s result, the shared buffers written after its last barrier): what a
    barrier the caller puts after it publishes (``sync_stmt``'s ``writes``)."""
    lowered, _, _, written, _, _ = _lower_planned(lw, stmts)
    return seq(lowered), written


USER_SYNC_KEY = "tl.disable_thread_storage_sync"


def user_placed(lw) -> bool:
    """``tl.disable_thread_storage_sync`` (upstream's: no ThreadSync pass): the barriers around the
    kernel's element accesses (loads, stores, atomics, T.Parallel nests) are the user's
    (``T.sync_threads``); barriers are planned between tile ops only (``tile_rw``: ours, and the
    staging copies our passes add), inside a tile op's own lowering, and, unchanged, in a
    pipelined or warp-specialised loop's schedule."""
    return bool(lw.configs.get(USER_SYNC_KEY)) and not getattr(lw, "pipelining", 0)


def _leads_with_barrier(stmt) -> bool:
    """A serial loop whose body's first statement is a ``__syncthreads()``."""
    if not (isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.SERIAL):
        return False
    first = flatten([stmt.body])
    return bool(first) and _is_block_barrier(first[0])


def _orders_like_ours(lw) -> bool:
    """Whether a user's ``__syncthreads()`` orders shared memory as a barrier we would place there:
    in a kernel without wgmma (ours would carry no ``fence.proxy.async``), outside warp
    specialisation and T.ws roles (where ours is a named barrier over some warps)."""
    return (getattr(lw, "ws", None) is None and getattr(lw, "role_block", None) is None
            and not lw.layouts.wgmma)


def _lower_planned(lw, stmts):
    """(the lowered statements with the barriers of the plan, a list; the plan:
    ``plan_sequence``'s result; the owners function; the buffers written after the last barrier;
    the statements planned: ``stmts`` with the waits of deferred copies; ``plan_sequence``'s
    ``head``, whose statement k is the list's item k). Statements are lowered before the final
    plan is made, so that it can use how they were lowered (``thread_elements``).

    A ``T.copy`` of this sequence that the lowering makes a lone cp.async (``lower_copy``: its
    registers are not to spare) is committed without its wait: one ``cp_async_wait<n>`` goes
    before the first statement that touches its tile (n: the deferred copies issued after it,
    still in flight), or at the end of the sequence. Consecutive copies are then in flight
    together and under the statements up to their first reader; the plan sees the copy as
    ``T.async_copy`` and its tile written at the wait (``_async_landing``)."""
    planned = stmts
    if getattr(lw, "ws", None) is not None and lw.ws.heads:
        # a head copy is the TMA producer's, behind an mbarrier the consumers wait on: no barrier
        planned = [tirx.Evaluate(tirx.IntImm("int32", 0)) if lw.ws.is_head(s) else s for s in stmts]
    alias = getattr(lw, "smem_alias", None)
    rw = tile_rw if user_placed(lw) else shared_rw
    mine = _orders_like_ours(lw)
    conservative = plan_sequence(planned, alias, rw=rw, user_barriers=mine)
    defer = _may_defer_waits(lw, stmts)
    # barriers are built in program order, interleaved with the lowering as always (a barrier
    # over a thread range takes the next free id when first built); their fences once the final
    # plan says what each one publishes
    syncs, lowered, deferred = {}, [], {}
    saved = getattr(lw, "defer_copy", None)
    for k, s in enumerate(stmts):
        if k in conservative[0]:
            syncs[k] = sync_stmt(lw, writes=())
        lw.defer_copy, lw.deferred_dst = (s if defer else None), None
        try:
            lowered.append(lw.lower(s))
        finally:
            lw.defer_copy = saved
        if lw.deferred_dst is not None:
            deferred[k] = lw.deferred_dst
        lw.deferred_dst = None      # (read once: a nested sequence's copy is that sequence's)
    origin = list(range(len(stmts)))
    if deferred:
        stmts, planned, lowered, origin = _place_waits(lw, stmts, planned, lowered, deferred)
    owners = _owners_fn(lw, stmts)
    written, head = {}, []
    closing = {k for k, low in enumerate(lowered) if closes_with_barrier(lw, low)}
    plan = plan_sequence(planned, alias, rw=rw, owners=owners, written=written, head=head, user_barriers=mine,
                         closing=closing)
    out = []
    for k, s in enumerate(lowered):
        if k in plan[0]:
            o = origin[k]
            out.append(fenced(lw, syncs[o], written[k]) if o is not None and o in syncs else sync_stmt(lw, written[k]))
        out.append(s)
    return out, plan, owners, written["end"], stmts, head


# calls that leave shared memory in flight past the statement issuing them (cp.async, TMA, bulk
# copies, asynchronous wgmma and its waits) or order it by other means than the block barrier
_IN_FLIGHT = ("async", "tma", "mbarrier", "bulk", "wgmma_wait", "wait_wgmma", "cluster", "arrive")


def _leaves_in_flight(stmt) -> bool:
    """Whether something ``stmt`` (a loop: its body, statement by statement) issues may still be in
    flight after it. A TMA store group that waits for its own reads of shared memory
    (``lower_copy``'s stores: issue, arrive, ``tma_store_wait<0>`` in one thread's branch) has
    nothing in flight; cp.async groups are retired by a later ``cp_async_wait<0>`` of the body."""
    def names(st):
        found = set()

        def visit(e):
            if isinstance(e, tirx.Call):
                name = extern_name(e) or getattr(e.op, "name", "")
                if name != "tl::fence_proxy_async" and any(x in name for x in _IN_FLIGHT):
                    found.add(name)

        tvm_ffi_walk(map_stmts(st, pre=lambda s: tirx.Evaluate(i32(0)) if _settled_store(s) else None), visit)
        return found

    pending = set()
    for st in flatten([stmt.body]) if isinstance(stmt, tirx.For) else [stmt]:
        if isinstance(st, tirx.Evaluate) and extern_name(st) == "tl::cp_async_wait<0>":
            pending = {n for n in pending if not n.startswith("tl::cp_async")}
        else:
            pending |= names(st)
    return bool(pending)


def _settled_store(st) -> bool:
    """A statement (or one thread's branch) of TMA store calls only, the last of them a wait until
    no store group still reads shared memory."""
    if isinstance(st, tirx.IfThenElse) and st.else_case is None:
        st = st.then_case
    calls = flatten([st])
    names = [extern_name(c) if isinstance(c, tirx.Evaluate) else None for c in calls]
    return (bool(names) and all(n is not None and n.startswith("tl::tma_store") for n in names)
            and names[-1].startswith("tl::tma_store_wait<0"))


def closes_with_barrier(lw, lowered) -> bool:
    """Whether the lowered statement is a loop whose every iteration ends with its loop-back barrier
    (``lower_loop_body``), which publishes, fenced where they need it, all the writes of the
    iteration since the body's last planned barrier (those before it were published there):
    nothing the loop touched races with what comes after it (a gemm's loop over K: the statement
    after it needs no barrier of its own for the loop's accesses). Not where something of the loop
    may still be in flight at the barrier (cp.async, TMA, asynchronous wgmma)."""
    if not isinstance(lowered, tirx.For) or lowered.kind not in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED):
        return False
    body = flatten([lowered.body])
    if not body or not any(body[-1].same_as(b) for b in lw.loop_back_barriers):
        return False
    return not _leaves_in_flight(lowered)


def _may_defer_waits(lw, stmts) -> bool:
    """Whether lone cp.async copies of this sequence may leave their wait to their first reader:
    not in a pipeline's producer, and no statement of it issues or waits for cp.async groups of
    its own (T.async_copy, an explicit ``cp_async_wait``: their counts assume no other group)."""
    if getattr(lw, "in_producer", False) or lw.configs.get("tl.disable_deferred_copy_wait", False):
        return False
    found = []

    def visit(s):
        if isinstance(s, tirx.Evaluate):
            v = s.value
            if is_async_copy(s):
                found.append(s)
            elif isinstance(v, ir.Call) and ("cp_async" in getattr(v.op, "name", "") or (
                    v.args and "cp_async" in str(getattr(v.args[0], "value", "")))):
                found.append(s)     # (T.ptx_cp_async, a commit or a wait of the user's)

    for s in stmts:
        walk_stmts(s, visit)
    return not found


def _place_waits(lw, stmts, planned, lowered, deferred):
    """The sequence with a ``cp_async_wait<n>`` before the first statement touching the tile of
    each deferred copy (``deferred``: index -> its shared buffer), the copies marked as
    ``T.async_copy`` for the plan: (stmts, planned, lowered, origin index or None per entry)."""
    alias = getattr(lw, "smem_alias", None) or {}
    out_s, out_p, out_l, origin, inflight = [], [], [], [], []

    def wait(n):
        w = evaluate_extern(f"tl::cp_async_wait<{n}>")
        out_s.append(w)
        out_p.append(w)
        out_l.append(w)
        origin.append(None)

    for k, s in enumerate(stmts):
        if inflight:
            r, w = shared_rw(s)     # (a buffer sharing bytes with the tile is in its alias set)
            if passes_shared_pointers(s):      # (what a pointer reaches is unknown: all of them)
                need = list(range(len(inflight)))
            else:
                need = [i for i, (_, b) in enumerate(inflight) if widen({b}, alias) & (r | w)]
            if need:
                last = max(need)
                wait(len(inflight) - 1 - last)
                inflight = inflight[last + 1:]
        p = planned[k]
        if k in deferred:
            p = as_async_copy(p)
            inflight.append((k, deferred[k]))
        out_s.append(p if k in deferred else s)
        out_p.append(p)
        out_l.append(lowered[k])
        origin.append(k)
    if inflight:
        wait(0)
    return out_s, out_p, out_l, origin


_POINTER_OPS = ("tirx.tvm_access_ptr", "tirx.address_of", "tl.access_ptr")


def _shared_by_address(e) -> list:
    """The shared buffers a call hands over by address (``T.access_ptr``, ``T.address_of``: what
    it does with them is unknown), [] for any other expression."""
    if not (isinstance(e, ir.Call) and getattr(e.op, "name", "") in _POINTER_OPS):
        return []
    out = []
    for a in e.args:
        if isinstance(a, ir.TensorLoad):
            a = a.source
        elif isinstance(a, ir.Call) and getattr(a.op, "name", "") == "tirx.buffer_data":
            a = a.args[0]       # (a buffer's data pointer)
        if hasattr(a, "shape") and scope_of(a) in SHARED_SCOPES:
            out.append(a)
    return out


def passes_shared_pointers(stmt) -> bool:
    """Whether ``stmt`` hands shared memory to something by address, which may read any of it."""
    import tvm_ffi

    found = []
    tvm_ffi.structural_walk(stmt, [(ir.Expr, lambda e: (found.extend(_shared_by_address(e)), None)[1])],
                            order="pre")
    return bool(found)


# opt-in until measured on the GPU: the loop-back barrier before the first racing statement
HEAD_BARRIER_KEY = "tl.enable_loop_head_barrier"
HEAD_BARRIER_DEFAULT = False


def lower_loop_body(lw, body):
    """A loop body (statement or list of statements) with its barriers, plus one when the next
    iteration's first accesses race with this iteration's last ones: at the end of the body, or
    with ``tl.enable_loop_head_barrier`` just before the first statement of the body that races
    with them (upstream's placement). The statements before it and the last ones of the previous
    iteration (atomics to global memory, say) then run without waiting for the slowest thread, and
    where that statement comes right before the body's first barrier (a tile written, then read by
    other threads) the two barriers meet the threads at one point of the iteration instead of two."""
    if isinstance(body, list):
        stmts = body
    else:
        stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    lowered, plan, owners, tail_written, stmts, head = _lower_planned(lw, stmts)
    syncs, (tail_r, tail_w), (head_r, head_w), touching = plan
    if (touching > 1 or _touching_leaves(stmts) > 1) and conflict(head_r, head_w, tail_r, tail_w) \
            and not _wraps_same_owner(lw, stmts, syncs, owners):
        if lw.configs.get(HEAD_BARRIER_KEY, HEAD_BARRIER_DEFAULT):
            # (before the first barrier: no barrier of the plan precedes it in ``lowered``)
            first = next(k for k, r, w in head if conflict(r, w, tail_r, tail_w))
            lowered.insert(first, sync_stmt(lw, tail_written))
        else:
            back = sync_stmt(lw, tail_written)
            lowered.append(back)
            # (it publishes every write of the iteration: those before the body's last planned
            # barrier at that barrier, the rest here; ``closes_with_barrier``)
            lw.loop_back_barriers.append(flatten([back])[-1])
    return seq(lowered)


def _wraps_same_owner(lw, stmts, syncs, owners) -> bool:
    """Whether the next iteration's accesses up to the first barrier cannot race with this
    iteration's since the last one (``_same_owner``: each common element belongs to one thread)."""
    if owners is None:
        return False
    first = syncs[0] if syncs else len(stmts)
    last = syncs[-1] if syncs else 0
    alias = getattr(lw, "smem_alias", None)

    def accesses(ks):
        out = []
        for k in ks:
            r, w = (set(), set()) if user_ws.is_role(stmts[k]) else shared_rw(stmts[k])
            if alias:
                r, w = widen(r, alias), widen(w, alias)
            if _async_landing(stmts[k], [])[1] or _has_async_wait(stmts[k]):
                return None
            if r or w:
                out.append((k, r, w))
        return out

    head, tail = accesses(range(first)), accesses(range(last, len(stmts)))
    return head is not None and tail is not None and _same_owner(head, tail, owners)


def _has_async_wait(stmt) -> bool:
    found = []

    def visit(s):
        if isinstance(s, tirx.Evaluate) and isinstance(s.value, tirx.Call) and s.value.args \
                and str(getattr(s.value.args[0], "value", "")).startswith("tl::cp_async_wait<"):
            found.append(s)

    walk_stmts(stmt, visit)
    return bool(found)


# ----------------------------------------------------------------------- per-thread elements
MAX_PAIRS = 1 << 14     # (thread, element) pairs enumerated per statement; past it: unknown
MAX_INDEXED = 1 << 17  # (thread, loop iteration) points of a thread-indexed statement; past it: unknown


def _owners_fn(lw, stmts):
    """``owners(k)`` for ``plan_sequence``: ``thread_elements`` of statement k, memoised. Under
    warp specialisation or in a T.ws role only statements addressed by the raw thread index
    (``indexed_elements``) answer: the tile ops there are lowered over a part of the block."""
    partial = getattr(lw, "ws", None) is not None or getattr(lw, "role_block", None) is not None
    memo = {}

    def owners(k):
        if k not in memo:
            found = None if partial else thread_elements(lw, stmts[k])
            if found is None and not partial:
                found = compound_elements(lw, stmts[k])
            memo[k] = found if found is not None else indexed_elements(lw, stmts[k])
        return memo[k]

    return owners


def compound_elements(lw, stmt):
    """``thread_elements`` of a serial loop, sequence or branch of tile-level statements: the union,
    over every iteration and branch, of what its statements touch (more elements, never fewer), so
    that a loop filling and reading a tile thread by thread (rms_norm_splitk's two passes over one
    row) needs no barrier before the next statement that touches the same elements from the same
    threads. None where a statement touching shared memory has unknown elements or addresses it
    through a variable of the compound statement's own loops (its elements would then move from
    one iteration to the next)."""
    if is_parallel_nest(stmt) or not isinstance(stmt, (tirx.For, tirx.SeqStmt, tirx.IfThenElse)):
        return None
    bound, leaves = [], []

    def go(s):
        if s is None:
            return True
        if isinstance(s, tirx.SeqStmt):
            return all(go(c) for c in s.seq)
        if isinstance(s, tirx.IfThenElse):
            return go(s.then_case) and go(s.else_case)
        if isinstance(s, tirx.For) and not is_parallel_nest(s):
            # (a pipelined or otherwise annotated loop may run its copies as cp.async)
            if s.kind not in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED) or s.annotations:
                return False
            bound.append(s.loop_var)
            return go(s.body)
        leaves.append(s)
        return True

    if not go(stmt):
        return None
    out = {}
    for leaf in leaves:
        r, w = shared_rw(leaf)
        if not (r or w):
            continue
        if any(v.same_as(b) for v in _shared_index_vars(leaf) for b in bound):
            return None
        found = thread_elements(lw, leaf)
        if found is None:
            found = indexed_elements(lw, leaf)
        if found is None:
            return None
        for buf, table in found.items():
            mine = out.setdefault(buf, {})
            for elem, threads in table.items():
                mine.setdefault(elem, set()).update(threads)
    return out


def _shared_index_vars(stmt) -> list:
    """The variables in the indices (tile-op regions: starts) by which ``stmt`` addresses shared memory."""
    import tvm_ffi
    exprs = []

    def on_stmt(s):
        if isinstance(s, tirx.Evaluate) and is_tl_call(s.value):
            for arg in s.value.args:
                if is_tl_call(arg, "region"):
                    r = decode_region(arg)
                    if scope_of(r.buffer) in SHARED_SCOPES:
                        exprs.extend(r.starts)
        elif isinstance(s, tirx.BufferStore) and scope_of(s.buffer) in SHARED_SCOPES:
            exprs.extend(s.indices)

    def on_load(e):
        if isinstance(e, ir.TensorLoad) and scope_of(e.source) in SHARED_SCOPES:
            exprs.extend(e.indices)
        return None

    walk_stmts(stmt, on_stmt)
    tvm_ffi.structural_walk(stmt, [(ir.TensorLoad, on_load)], order="pre")
    out = []
    for e in exprs:
        out.extend(tirx.analysis.undefined_vars(e) if isinstance(e, ir.Expr) else [])
    return out


def thread_elements(lw, stmt):
    """{shared buffer: {element index tuple: set of thread slots}} for a statement whose per-thread
    shared accesses are known exactly once it is lowered: a ``T.copy`` lowered as a synchronous
    threaded copy (``lower_copy.copy_thread_elements``) or a ``T.Parallel`` nest (its loop layout,
    every shared access's indices evaluated at every (thread, register)). None otherwise. Both
    record the thread index they were lowered with; statements lowered over different thread
    ranges never compare equal (the slot numbers would mean different threads)."""
    from tilelang.transform import lower_copy
    rec = getattr(lw, "sync_copies", {}).get(stmt)
    if rec is not None:
        out = lower_copy.copy_thread_elements(lw, rec, MAX_PAIRS)
        return None if out is None else _tagged(out, rec[6], rec[7])
    rec = getattr(lw, "nest_layouts", {}).get(stmt)
    if rec is not None and is_parallel_nest(stmt):
        out = _nest_elements(stmt, *rec[:2])
        return None if out is None else _tagged(out, rec[1], rec[2])
    return None


def indexed_elements(lw, stmt):
    """``thread_elements`` of a statement written by hand at the thread level: element stores and
    loads in loops of constant extent, addressed by the block's thread index
    (``tx = T.get_thread_binding()``; ``B_s[(i * T + tx) * 8 + v] = ...`` in a dequantising loop).
    Every variable of an address is enumerated over its whole range (the thread indices, the
    statement's own loops and the enclosing loops the lowering has bound): the union over every
    iteration of the enclosing loops, so that it holds between one iteration and the next.
    The conditions the statement runs under (the enclosing ones on the thread index,
    ``lw.thread_conds``, and an ``if`` around the whole statement, with no else and no shared load in
    its condition) drop the points where they are false: those threads do not run the statement
    then (under ``if tx % 2 == 0:``, ``s[tx ^ 1] = ...`` touches the odd elements only). Other
    conditions, and one over a variable not enumerated, are ignored (more elements, never fewer).
    None where an address is not an integer function of those variables, a tile op, a
    ``T.Parallel`` nest or a pointer to shared memory is involved, or there are more than
    ``MAX_INDEXED`` points."""
    import numpy as np
    import tvm_ffi

    accesses, loops, opaque = [], {}, []
    guards, inner = list(getattr(lw, "thread_conds", ())), stmt
    while isinstance(inner, tirx.IfThenElse) and inner.else_case is None and not _reads_shared(inner.condition):
        guards.append(inner.condition)
        inner = inner.then_case

    def on_stmt(s):
        if isinstance(s, tirx.BufferStore) and scope_of(s.buffer) in SHARED_SCOPES:
            accesses.append((s.buffer, list(s.indices)))
        elif isinstance(s, tirx.For):
            loops[s.loop_var] = (s.min, s.extent)
            if is_parallel_nest(s):
                opaque.append(s)
        elif isinstance(s, tirx.Evaluate) and is_tl_call(s.value):
            opaque.append(s)

    def on_expr(e):
        if isinstance(e, ir.TensorLoad) and scope_of(e.source) in SHARED_SCOPES:
            accesses.append((e.source, list(e.indices)))
        elif _shared_by_address(e):
            opaque.append(e)
        return None

    walk_stmts(stmt, on_stmt)
    tvm_ffi.structural_walk(stmt, [(ir.Expr, on_expr)], order="pre")
    if opaque or not accesses:
        return None if opaque else {}
    tvars = [v for v in lw.thread_vars if _extent(lw, v, None) not in (None, 1)]
    free = list(tvars)
    for _, indices in accesses:
        for i in indices:
            for v in tirx.analysis.undefined_vars(i):
                if hasattr(v, "shape") or not dtype_of(v).startswith(("int", "uint")):
                    return None     # (a buffer read inside an address: a gather)
                if not any(v.same_as(f) for f in free):
                    free.append(v)
    ranges = []
    own = _own_threads(lw, tvars)
    for v in free:
        rng = loops.get(v)
        lo_n = None
        if rng is not None and const_int(rng[0]) is not None and const_int(rng[1]) is not None:
            lo_n = (const_int(rng[0]), const_int(rng[1]))
        elif own is not None and v.same_as(tvars[0]):
            lo_n = own
        elif rng is None:
            ext = _extent(lw, v, None)
            lo_n = None if ext is None else (_extent(lw, v, "min"), ext)
        if lo_n is None:
            return None
        ranges.append(lo_n)
    points = 1
    for _, n in ranges:
        points *= max(n, 1)
    if points > MAX_INDEXED or points == 0:
        return None
    grids = np.meshgrid(*[np.arange(lo, lo + n, dtype=np.int64) for lo, n in ranges], indexing="ij")
    env = {v: g.ravel() for v, g in zip(free, grids)}
    slot = np.zeros(points, dtype=np.int64)
    for v in tvars:     # one number per thread of the block
        slot = slot * (_extent(lw, v, None) + 1) + env[v]
    runs = np.ones(points, dtype=bool)
    for g in guards:
        try:
            runs &= np.broadcast_to(np.asarray(_eval_condition(g, env), dtype=bool), (points,))
        except (KeyError, ValueError, ZeroDivisionError, AttributeError, TypeError):
            pass        # (not a function of the enumerated variables: every point may run)
    out = {}
    try:
        for buf, indices in accesses:
            cols = [np.broadcast_to(np.asarray(eval_int(i, env, arrays=True), dtype=np.int64), (points,))[runs]
                    for i in indices]
            table = out.setdefault(buf, {})
            for elem, t in zip(zip(*[c.tolist() for c in cols]), slot[runs].tolist()):
                table.setdefault(elem, set()).add((("threads", tuple(str(v) for v in tvars)), t))
    except (KeyError, ValueError, ZeroDivisionError, AttributeError, TypeError):
        return None
    return out


_COMPARE = {"EQ": "__eq__", "NE": "__ne__", "LT": "__lt__", "LE": "__le__", "GT": "__gt__", "GE": "__ge__"}


def _eval_condition(cond, env):
    """A boolean TIR condition over ``env``'s integer arrays (comparisons of integer expressions,
    and / or / not), as a numpy bool array; ValueError or KeyError where it is not one."""
    import numpy as np

    name = type(cond).__name__
    if name in _COMPARE:
        a, b = eval_int(cond.a, env, arrays=True), eval_int(cond.b, env, arrays=True)
        return getattr(np.asarray(a), _COMPARE[name])(np.asarray(b))
    if name in ("And", "Or"):
        a, b = _eval_condition(cond.a, env), _eval_condition(cond.b, env)
        return np.logical_and(a, b) if name == "And" else np.logical_or(a, b)
    if name == "Not":
        return np.logical_not(_eval_condition(cond.a, env))
    if name == "IntImm" and str(cond.dtype) == "bool":
        return np.asarray(bool(cond.value))
    raise ValueError(f"not a condition over integers: {cond}")


def _reads_shared(expr) -> bool:
    """Whether an expression loads from shared memory."""
    return any_expr(expr, lambda e: isinstance(e, ir.TensorLoad) and scope_of(e.source) in SHARED_SCOPES)


def _own_threads(lw, tvars):
    """(first, count) of the raw thread index over the threads lowering the code (a warp-specialised
    kernel's consumers, a T.ws role: ``lw.tid`` is the raw index less their first thread), or None
    (several thread dimensions, or a thread index of another form: its whole range then)."""
    if len(tvars) != 1 or const_int(getattr(lw, "T", None)) is None:
        return None
    raw, tid = tvars[0], lw.tid
    if isinstance(tid, tirx.Var) and tid.same_as(raw):
        return 0, const_int(lw.T)
    if isinstance(tid, tirx.Sub) and isinstance(tid.a, tirx.Var) and tid.a.same_as(raw) and const_int(tid.b) is not None:
        return const_int(tid.b), const_int(lw.T)
    return None


def _extent(lw, var, which):
    """The extent (``which`` None) or first value (``"min"``) of a variable the lowering's
    analyzer bounds, None where it has no finite bound."""
    b = lw.an.const_int_bound(var)
    lo, hi = int(b.min_value), int(b.max_value)
    if abs(lo) > 1 << 30 or abs(hi) > 1 << 30:
        return None
    return lo if which == "min" else hi - lo + 1


def _tagged(out, threads, tid):
    """Thread slots qualified by the thread count and index expression they were lowered with."""
    key = (int(threads), str(tid))
    return {b: {e: {(key, t) for t in ts} for e, ts in owners.items()} for b, owners in out.items()}


def _nest_elements(stmt, layout, threads):
    loop_vars = list(_nest_vars(stmt))
    body = stmt
    for _ in loop_vars:
        body = body.body
    if int(getattr(layout, "num_threads", -1)) != int(threads):
        return None
    n = max(int(layout.local_size), 1)
    if int(threads) * n > MAX_PAIRS:
        return None
    accesses = []   # (buffer, indices)

    def on_stmt(s):
        if isinstance(s, tirx.BufferStore) and scope_of(s.buffer) in SHARED_SCOPES:
            accesses.append((s.buffer, list(s.indices)))

    def on_load(e):
        if isinstance(e, ir.TensorLoad) and scope_of(e.source) in SHARED_SCOPES:
            accesses.append((e.source, list(e.indices)))
        return None

    import tvm_ffi
    walk_stmts(body, on_stmt)
    tvm_ffi.structural_walk(body, [(ir.TensorLoad, on_load)], order="pre")
    if not accesses:
        return {}
    tid_v, loc_v = tirx.Var("t", "int32"), tirx.Var("r", "int32")
    idx = layout.index(tid_v, loc_v)
    out = {}
    try:
        for t in range(int(threads)):
            for v in range(n):
                env = {tid_v: t, loc_v: v}
                env = {lv: _eval(e, env) for lv, e in zip(loop_vars, idx)}
                for buf, indices in accesses:
                    elem = tuple(_eval(i, env) for i in indices)
                    out.setdefault(buf, {}).setdefault(elem, set()).add(t)
    except _Unknown:
        return None
    return out


def _nest_vars(stmt):
    from tilelang.transform.kernel import parallel_nest
    return parallel_nest(stmt)[0]


class _Unknown(Exception):
    """An index that is not an integer function of the loop's thread and register."""


def _eval(e, env):
    """The integer value of index expression ``e``, ``env`` giving its variables (by identity);
    ``_Unknown`` where it is not an integer function of them."""
    try:
        return eval_int(e, env)
    except (KeyError, ValueError, ZeroDivisionError, AttributeError, TypeError):
        raise _Unknown from None


def _touching_leaves(stmts) -> int:
    """How many tile-level statements (tile ops, T.Parallel nests, element stores) under
    ``stmts`` touch shared memory. A body of one compound statement (``if a >= 0:`` around a copy
    into a tile and a store out of it) races with its own next iteration as a sequence does."""
    count = 0

    def go(s):
        nonlocal count
        if s is None:
            return
        if isinstance(s, (tirx.Evaluate, tirx.BufferStore)) or is_parallel_nest(s) or user_ws.is_role(s):
            r, w = (set(), set()) if user_ws.is_role(s) else shared_rw(s)
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
