"""Lowering of the user-written mbarrier operations (``tilelang.language.barrier``).

``tl.barrier_init(bars[0], c0, c1, ...)``: thread 0 initialises barrier i with arrival count
ci, makes the inits visible (``fence_barrier_init``) and the block meets at ``__syncthreads``;
it stands where ``T.alloc_barrier`` was called, so every thread must reach it. Back-to-back
``T.alloc_barrier`` calls initialise together and meet once (``merge_inits``). Barriers that a
pipelined loop of T.ws blocks uses have one copy per stage (``user_ws.pipeline_roles``): every
copy is initialised.
``tl.mbarrier_wait(bar, parity)``, ``tl.mbarrier_arrive(bar)``, ``tl.mbarrier_expect_tx(bar, n)``,
``tl.mbarrier_arrive_expect_tx(bar, n)``, ``tl.mbarrier_arrive_cluster(bar, cta)`` and
``tl.cp_async_barrier_noinc(bar)`` become the
calls of ``src/tl/barrier.h`` / ``src/tl/cluster.h`` on the barrier's shared-memory address.
"""

from __future__ import annotations

import tvm
from tvm import ir, tirx

from tilelang.tir_utils import evaluate_extern, extern_name, flatten, i32, map_sequences, seq
from tilelang.transform.kernel import LoweringError

OPS = {
    "mbarrier_wait": "tl::mbarrier_wait",
    "mbarrier_arrive": "tl::mbarrier_arrive",
    "mbarrier_expect_tx": "tl::mbarrier_expect_tx",
    "mbarrier_arrive_expect_tx": "tl::mbarrier_arrive_expect_tx",
    "mbarrier_arrive_cluster": "tl::mbarrier_arrive_cluster",
    "cp_async_barrier_noinc": "tl::mbarrier_cp_async_arrive_noinc",
}


def _ptr(lw, load, span):
    if not isinstance(load, ir.TensorLoad):
        raise LoweringError("TL0002", "a barrier operand must be an element of T.alloc_barrier(...)", span)
    return tirx.address_of(lw.rewrite(load))


def lower(lw, stmt, name):
    if name == "copy_cluster":
        return lower_copy_cluster(lw, stmt)
    call = stmt.value
    span = stmt.span
    if name == "barrier_init":
        if lw.thread_guard is not None or getattr(lw, "role_block", None) is not None:
            raise LoweringError("TL0002", "T.alloc_barrier initialises its barriers with a block-wide barrier: "
                                "call it where every thread of the block runs (the top of the kernel "
                                "body), not inside `if` or `with T.ws(...)`", span)
        load = call.args[0]
        buf = load.source
        inits = []
        # a barrier of a staged loop of T.ws blocks has a copy per stage (user_ws.pipeline_roles)
        copies = lw.stages.get(buf, 1)
        saved = dict(lw.stage)
        try:
            for s in range(copies):
                if copies > 1:
                    lw.stage[buf] = i32(s)
                for i, count in enumerate(call.args[1:]):
                    ptr = _ptr(lw, tirx.BufferLoad(buf, [i32(i)]), span)
                    inits.append(tirx.Evaluate(tirx.call_extern("void", "tl::mbarrier_init", ptr, count), span=span))
        finally:
            lw.stage = saved
        inits.append(tirx.Evaluate(tirx.call_extern("void", "tl::fence_barrier_init"), span=span))
        # a kernel that multicasts TMA loads completes bytes on its peers' barriers: every block
        # of the cluster has initialised its barriers before any block goes on
        meet = "tl::cluster_sync" if _multicasts(lw) else "__syncthreads"
        return seq([tirx.IfThenElse(tirx.EQ(lw.info.tid, i32(0)), seq(inits), None, span=span),
                    tirx.Evaluate(tirx.call_extern("void", meet), span=span)])
    fn = OPS[name]
    args = [_ptr(lw, call.args[0], span)] + [lw.rewrite(a) for a in call.args[1:]]
    return tirx.Evaluate(tirx.call_extern("void", fn, *args), span=span)


_INIT_CALLS = ("tl::mbarrier_init", "tl::fence_barrier_init")


def _init_block(stmt):
    """(condition, the mbarrier_init statements) of a lowered ``barrier_init``'s ``if tid == 0``
    (inits, then ``fence_barrier_init``), else None."""
    if not isinstance(stmt, tirx.IfThenElse) or stmt.else_case is not None:
        return None
    body = flatten([stmt.then_case])
    names = [extern_name(x) for x in body]
    if len(body) < 2 or names[-1] != "tl::fence_barrier_init" or any(n != _INIT_CALLS[0] for n in names[:-1]):
        return None
    return stmt.condition, body[:-1]


def merge_inits(body):
    """``body`` with each run of back-to-back barrier initialisations (one per ``T.alloc_barrier``:
    ``if tid == 0 { inits; fence }`` and the block meeting) as one: every init, one fence, one
    meeting (nothing runs between them, so no barrier is used before the meeting either way)."""
    def step(out, x):
        out.append(x)
        # [..., init A, meet, init B, meet]: A and B become one init and one meet
        if len(out) >= 4 and _is_meet(out[-1]) and _is_meet(out[-3]) and extern_name(out[-1]) == extern_name(out[-3]):
            a, b = _init_block(out[-4]), _init_block(out[-2])
            if a is not None and b is not None and tvm.ir.structural_equal(a[0], b[0]):
                merged = tirx.IfThenElse(a[0], seq(a[1] + b[1] + [evaluate_extern(_INIT_CALLS[1])]), None,
                                         span=out[-4].span)
                out[-4:] = [merged, out[-1]]

    return map_sequences(body, step)


def _is_meet(stmt) -> bool:
    return extern_name(stmt) in ("__syncthreads", "tl::cluster_sync")


def _multicasts(lw) -> bool:
    cached = getattr(lw, "_tl_multicasts", None)
    if cached is None:
        from tilelang.transform import user_ws

        cached = user_ws.uses_multicast(lw.info.func.body)
        lw._tl_multicasts = cached
    return cached


def handles(name: str) -> bool:
    return name in ("barrier_init", "copy_cluster") or name in OPS


def lower_copy_cluster(lw, stmt):
    """``T.copy_cluster(src, dst, dst_block=r, remote_barrier=bar)``: one bulk copy into block
    r's shared memory completing on its ``bar`` (a contiguous run of a multiple of 16 bytes), or
    every thread storing its elements through ``map_shared_rank`` and, with a barrier, one
    cluster-scope release arrival on the peer's ``bar`` once the block is done."""
    from tilelang.language.dtypes import nbytes
    from tilelang.tir_utils import const_int, evaluate_extern
    from tilelang.transform import thread_sync, user_ws
    from tilelang.transform.kernel import decode_region

    call = stmt.value
    src, dst = decode_region(call.args[0]), decode_region(call.args[1])
    rank = tirx.Cast("uint32", lw.rewrite(call.args[2]))
    bar = call.args[3]
    span = stmt.span
    for r, what in ((src, "source"), (dst, "destination")):
        if r.scope not in ("shared", "shared.dyn"):
            raise LoweringError("TL0002", f"T.copy_cluster copies between shared tiles; its {what} "
                                f"'{r.buffer.name}' is in {r.scope} memory", span)
    ext = [const_int(e) for e in src.extents]
    if None in ext:
        raise LoweringError("TL0002", "T.copy_cluster needs extents known at compile time", span)
    n = 1
    for e in ext:
        n *= e
    esize = nbytes(str(src.buffer.dtype))
    has_bar = isinstance(bar, ir.TensorLoad)
    bar_ptr = _ptr(lw, bar, span) if has_bar else None
    src_off = lw.shared_offset(src.buffer, [lw.rewrite(x) for x in src.starts])
    dst_off = lw.shared_offset(dst.buffer, [lw.rewrite(x) for x in dst.starts])
    plain = all(getattr(lw.layouts.shared.get(b), "group", 1) == 1 for b in (src.buffer, dst.buffer))
    aligned = all((lw.an.modular_set(o).coeff * esize) % 16 == 0 and (lw.an.modular_set(o).base * esize) % 16 == 0
                  for o in (src_off, dst_off))
    sync = thread_sync.sync_stmt(lw) if user_ws.role_sync(lw) is not None else \
        evaluate_extern("__syncthreads", span=span)
    if has_bar and plain and aligned and (n * esize) % 16 == 0 and user_ws._contiguous(src) and \
            user_ws._contiguous(dst) and str(src.buffer.dtype) == str(dst.buffer.dtype):
        s_ptr = tirx.address_of(tirx.BufferLoad(lw.smem_views[src.buffer], [src_off]))
        d_ptr = tirx.address_of(tirx.BufferLoad(lw.smem_views[dst.buffer], [dst_off]))
        issue = evaluate_extern("tl::tma_store_cluster", d_ptr, s_ptr, rank, i32(n * esize), bar_ptr, span=span)
        return seq([evaluate_extern("tl::fence_proxy_async", span=span), sync,
                    tirx.IfThenElse(tirx.EQ(lw.tid, i32(0)), issue, None, span=span)])
    if has_bar:
        _warn_fallback(src, dst, n * esize, ext, esize, span)
    # SIMT: thread t stores elements t, t + T, ... of the region (row-major)
    T = lw.T
    q = tirx.Var("q", "int32")
    e = q * i32(T) + lw.tid
    idx, rest = [], e
    for d in range(len(ext) - 1, -1, -1):
        idx.append(tirx.floormod(rest, i32(ext[d])))
        rest = tirx.floordiv(rest, i32(ext[d]))
    idx = idx[::-1]
    s_idx = [lw.rewrite(st) + i for st, i in zip(src.starts, idx)]
    d_idx = [lw.rewrite(st) + i for st, i in zip(dst.starts, idx)]
    value = tirx.BufferLoad(lw.smem_views[src.buffer], [lw.shared_offset(src.buffer, s_idx)])
    d_ptr = tirx.address_of(tirx.BufferLoad(lw.smem_views[dst.buffer], [lw.shared_offset(dst.buffer, d_idx)]))
    store = evaluate_extern("tl::map_shared_rank_store", d_ptr, rank, value, span=span)
    trips = -(-n // T)
    if n % T:
        store = tirx.IfThenElse(tirx.LT(e, i32(n)), store, None, span=span)
    out = [tirx.For(q, i32(0), i32(trips), tirx.ForKind.SERIAL, store, span=span)]
    if has_bar:
        arrive = evaluate_extern("tl::mbarrier_arrive_cluster_release", bar_ptr, rank, span=span)
        out += [sync, tirx.IfThenElse(tirx.EQ(lw.tid, i32(0)), arrive, None, span=span)]
    return seq(out)


def _warn_fallback(src, dst, nbytes_total, ext, esize, span):
    """Say on stderr why a T.copy_cluster with a barrier stores element by element (upstream
    logs the same sentences)."""
    import sys

    from tilelang.tir_utils import span_line
    from tilelang.transform import user_ws

    line = span_line(span)
    where = f"T.copy_cluster (line {line})" if line else "T.copy_cluster"
    if user_ws._contiguous(src) and user_ws._contiguous(dst):
        why = f"Cluster bulk copy size {nbytes_total} bytes is not a multiple of 16"
    elif (ext[-1] * esize) % 16:
        why = f"Cluster bulk copy row size is not a multiple of 16 bytes ({ext[-1] * esize} bytes)"
    else:
        why = "the region is not one contiguous run of both tiles"
    sys.stderr.write(f"warning: {where}: {why}; storing through map_shared_rank instead\n")

