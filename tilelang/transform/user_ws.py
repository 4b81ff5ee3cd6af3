"""Warp-group roles the user writes: ``with T.ws(g...)`` blocks, and ``T.tma_copy``.

Contract. A kernel whose body holds ``T.ws`` blocks (``tl.ws`` attribute statements whose value
is a bitmask of 128-thread warp groups) is lowered as written: each block becomes ``if <the
thread is in those groups>:`` and the user's mbarriers order the roles; no pipelining or
automatic warp specialisation applies.

* The *compute role* is the set of warp groups of the blocks that hold fragment work (gemm,
  reductions, T.Parallel, fragments). Every such block names the same contiguous groups
  ``[lo, hi)``; the kernel's tile layouts are then built for ``128 (hi - lo)`` threads whose
  thread index is ``threadIdx.x - 128 lo`` (``apply`` narrows ``KernelInfo.threads``; the
  launch keeps the block the user asked for). Tile ops outside every ``T.ws`` block are refused
  in such a kernel: the threads outside the role would run them with indices of no element.
  Blocks that compute on *different* groups (each on fragments of its own) instead become
  ``if <thread in its groups>:`` branches before analysis, which ``thread_regions`` lays out
  for their own threads (tile ops outside them run on the whole block, and the barrier planner
  orders shared memory between them); that form takes no user mbarriers (TL0002).
* Any other block (a producer) spreads its memory-to-memory copies over its own threads, and
  issues ``T.tma_copy`` loads from one of them.
* Barriers the compiler inserts inside a block are named barriers over that block's threads
  (``thread_sync.sync_stmt``); between blocks the user's barriers order shared memory, so the
  barrier planner sees a block as touching nothing.
* ``T.tma_copy(src, dst, barrier=bar)`` (``tl.copy`` with a fifth operand, the barrier):
  global -> shared. Where the tile is in the swizzled wgmma operand layout and the copy is a TMA
  box (``tma.tma_box_spec``), one thread of the block adds the tile's bytes to ``bar``'s
  transaction count and issues the boxes; otherwise the block's threads copy the tile
  themselves (their arrivals on ``bar`` then publish it). A shared -> global ``T.tma_copy`` is
  a plain copy by the block's threads. With ``cluster_mask`` the load is multicast
  (``tma.multicast``) and must be a TMA load; ``T.copy_cluster(src, dst, cluster_mask=m)``
  without a barrier is the same load completing on a barrier of its own (``lower_copy._tma_load``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import ir, tirx

from tilelang.language._ops import is_tl_call
from tilelang.tir_utils import children, const_int, evaluate_extern, i32, seq, walk_stmts
from tilelang.transform.kernel import FRAGMENT_SCOPE, LoweringError, decode_region, is_parallel_nest, scope_of

WS_ATTR = "tl.ws"
GROUP = 128
_COMPUTE_OPS = ("gemm", "reduce", "cumsum")
_PIPELINE_KEYS = ("tl.num_stages", "tl.pipeline_order", "tl.pipeline_stage")


@dataclass
class Roles:
    lo: int          # the compute role: warp groups [lo, hi)
    hi: int
    total: int       # threads of the block as launched


def is_ws(stmt) -> bool:
    return isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == WS_ATTR


def ws_blocks(body) -> list:
    out = []
    walk_stmts(body, lambda s: out.append(s) if is_ws(s) else None)
    return out


def _groups(mask: int) -> list:
    return [g for g in range(8) if (mask >> g) & 1]


def _touches_fragments(stmt) -> bool:
    found = []

    def visit(s):
        if isinstance(s, tirx.Evaluate) and is_tl_call(s.value):
            name = s.value.op.name[3:]
            if name in _COMPUTE_OPS:
                found.append(s)
            for a in s.value.args:
                if is_tl_call(a, "region") and scope_of(decode_region(a).buffer) == FRAGMENT_SCOPE:
                    found.append(s)
        elif is_parallel_nest(s):
            found.append(s)
        elif isinstance(s, tirx.BufferStore) and scope_of(s.buffer) == FRAGMENT_SCOPE:
            found.append(s)

    walk_stmts(stmt, visit)
    return bool(found)


def _barrier_buffers(body) -> list:
    """The buffers of T.alloc_barrier: live for the whole kernel (``Lowerer._plan_memory``), so
    no tile borrows their bytes while a phase may still complete on them."""
    out = []
    walk_stmts(body, lambda s: out.append(s.value.args[0].source)
               if isinstance(s, tirx.Evaluate) and is_tl_call(s.value, "barrier_init") else None)
    return out


def _has_user_sync(body) -> bool:
    """A T.tma_copy load or a user mbarrier operation anywhere in the body."""
    found = []

    def visit(s):
        if is_tma_copy(s) and scope_of(decode_region(s.value.args[0]).buffer) == "global":
            found.append(s)
        elif isinstance(s, tirx.Evaluate) and is_tl_call(s.value) and s.value.op.name[3:] in (
                "barrier_init", "mbarrier_wait", "mbarrier_arrive", "mbarrier_expect_tx",
                "mbarrier_arrive_expect_tx", "mbarrier_arrive_cluster", "copy_cluster", "cp_async_barrier_noinc"):
            found.append(s)

    walk_stmts(body, visit)
    return bool(found)


def _has_gemm(stmt) -> bool:
    found = []
    walk_stmts(stmt, lambda s: found.append(s) if isinstance(s, tirx.Evaluate) and is_tl_call(s.value, "gemm")
               else None)
    return bool(found)


def _is_tile_stmt(s) -> bool:
    return (isinstance(s, tirx.Evaluate) and is_tl_call(s.value) and s.value.op.name[3:] in
            ("copy", "fill", "gemm", "reduce", "cumsum", "atomic")) or is_parallel_nest(s)


def apply(info):
    """Narrow ``info`` to the compute role of a kernel with ``T.ws`` blocks (see the module
    docstring); ``info`` unchanged when it has none."""
    info.barrier_buffers = _barrier_buffers(info.body)
    blocks = ws_blocks(info.body)
    if not blocks:
        if _has_user_sync(info.body):
            # the user's mbarriers order the loop as written: no pipelining, no automatic roles
            info.body = _strip_pipelining(info.body)
            info.user_ws, info.has_user_ws = None, True
        return info
    total = info.num_threads
    compute = [b for b in blocks if _touches_fragments(b.body)]
    masks = {int(b.value.value) for b in compute}
    if len(masks) > 1:
        if _has_user_sync(info.body):
            raise LoweringError("TL0002", "the T.ws blocks that compute on fragments name different warp groups "
                                f"({', '.join(str(_groups(m)) for m in sorted(masks))}) in a kernel ordered by "
                                "the user's mbarriers: this TileLang builds such roles without user barriers "
                                "only", compute[-1].span,
                                notes=["give every block that computes the same T.ws(...) groups"])
        # several computing roles: each block is a thread region of its own threads
        info.body = _as_thread_branches(_strip_pipelining(info.body), info.tid)
        info.user_ws, info.has_user_ws = None, True
        return info
    info.body = _strip_pipelining(info.body)
    roles = None
    if masks:
        groups = _groups(masks.pop())
        lo, hi = groups[0], groups[-1] + 1
        if groups != list(range(lo, hi)):
            raise LoweringError("TL0002", f"T.ws{tuple(groups)}: a compute role must be consecutive warp groups",
                                compute[0].span)
        if len(info.threads) != 1:
            raise LoweringError("TL0002", "T.ws needs a one-dimensional thread block (threads=N)", compute[0].span)
        roles = Roles(lo, hi, total)
        info.threads = [GROUP * (hi - lo)]
        _refuse_outside(info.body)
    info.user_ws = roles
    info.has_user_ws = True
    return info


def _group_cond(tid, groups):
    """``tid`` in the warp groups ``groups`` (runs of consecutive groups as ranges)."""
    runs = []
    for g in groups:
        if runs and runs[-1][1] == g:
            runs[-1][1] = g + 1
        else:
            runs.append([g, g + 1])
    cond = None
    for lo, hi in runs:
        part = tirx.And(tirx.GE(tid, i32(GROUP * lo)), tirx.LT(tid, i32(GROUP * hi)))
        cond = part if cond is None else tirx.Or(cond, part)
    return cond, runs


def _as_thread_branches(body, tid):
    """Every ``T.ws`` block -> ``if <thread in its groups>: body``: with several computing roles
    the blocks are thread regions (``thread_regions``), each laid out for its own warp groups,
    and the compiler orders shared memory between them as between any branches."""
    def go(s):
        if s is None:
            return None
        if is_ws(s):
            cond, _ = _group_cond(tid, _groups(int(s.value.value)))
            return tirx.IfThenElse(cond, seq([go(s.body)]), None, span=s.span)
        if isinstance(s, tirx.SeqStmt):
            return seq([go(x) for x in s.seq])
        if isinstance(s, tirx.IfThenElse):
            return tirx.IfThenElse(s.condition, go(s.then_case), go(s.else_case), span=s.span)
        if isinstance(s, tirx.AttrStmt):
            return tirx.AttrStmt(s.node, s.attr_key, s.value, go(s.body), span=s.span)
        if isinstance(s, tirx.For):
            return tirx.For(s.loop_var, s.min, s.extent, s.kind, go(s.body), thread_binding=s.thread_binding,
                            annotations=s.annotations, step=s.step, span=s.span)
        return s

    return go(body)


def _refuse_outside(body):
    """Tile ops at the top of a role-split kernel (outside every T.ws block)."""
    def check(s):
        if is_ws(s):
            return
        if _is_tile_stmt(s):
            raise LoweringError("TL0002", "a tile operator outside every `with T.ws(...)` block of a kernel "
                                "that assigns warp-group roles: its elements are spread over the compute "
                                "role's threads only", s.span,
                                notes=["move it into the `with T.ws(...)` block of the role that computes"])
        for c in children(s):
            check(c)
    check(body)


def _strip_pipelining(body):
    """Loops of a role-split kernel run as written: drop T.Pipelined's stage annotations."""
    def go(s):
        if s is None:
            return None
        if isinstance(s, tirx.SeqStmt):
            return seq([go(x) for x in s.seq])
        if isinstance(s, tirx.IfThenElse):
            return tirx.IfThenElse(s.condition, go(s.then_case), go(s.else_case), span=s.span)
        if isinstance(s, tirx.AttrStmt):
            return tirx.AttrStmt(s.node, s.attr_key, s.value, go(s.body), span=s.span)
        if isinstance(s, tirx.For):
            if not (ws_blocks(s.body) or _has_user_sync(s.body)):
                return s        # a loop the user's barriers do not order keeps its pipeline
            ann = {k: v for k, v in s.annotations.items() if k not in _PIPELINE_KEYS}
            return tirx.For(s.loop_var, s.min, s.extent, s.kind, go(s.body), thread_binding=s.thread_binding,
                            annotations=ann, step=s.step, span=s.span)
        return s

    return go(body)


# ----- lowering -------------------------------------------------------------------------------
def lower_block(lw, stmt):
    """``with T.ws(g...)`` -> ``if <thread in g...>: body`` with the block's threads in force."""
    groups = _groups(int(stmt.value.value))
    phys = lw.info.tid
    cond = None
    runs, g = [], 0
    for g in groups:
        if runs and runs[-1][1] == g:
            runs[-1][1] = g + 1
        else:
            runs.append([g, g + 1])
    for lo, hi in runs:
        part = tirx.And(tirx.GE(phys, i32(GROUP * lo)), tirx.LT(phys, i32(GROUP * hi)))
        cond = part if cond is None else tirx.Or(cond, part)
    roles = getattr(lw.info, "user_ws", None)
    saved = (lw.T, lw.tid, lw.thread_guard, getattr(lw, "role_block", None))
    try:
        compute = roles is not None and groups == list(range(roles.lo, roles.hi))
        if compute:
            if roles.lo and not lw.layouts.wgmma and _has_gemm(stmt.body):
                # (tl::gemm_ss / gemm_rs place warps by threadIdx.x / 32 from warp 0)
                raise LoweringError("TL0002", f"T.ws{tuple(groups)}: an mma.sync gemm runs on the first warp "
                                    "groups of the block; give the computing role warp group 0", stmt.span)
            lw.thread_guard, lw.role_block = None, (roles.lo, roles.hi)
        elif len(runs) == 1:
            lo, hi = runs[0]
            lw.T, lw.tid = GROUP * (hi - lo), (phys - i32(GROUP * lo) if lo else phys)
            lw.thread_guard, lw.role_block = None, (lo, hi)
        else:
            lw.thread_guard = tirx.IfThenElse(cond, stmt.body, None, span=stmt.span)
            lw.role_block = None
        body = lw.lower(stmt.body)
    finally:
        lw.T, lw.tid, lw.thread_guard, lw.role_block = saved
    return tirx.IfThenElse(cond, seq([body]), None, span=stmt.span)


def role_sync(lw):
    """The barrier the compiler inserts inside a T.ws block: a named barrier over its threads
    (1 + its first warp group), or None outside such blocks."""
    block = getattr(lw, "role_block", None)
    if block is None:
        return None
    return evaluate_extern("tl::named_barrier_sync", 1 + block[0], lw.T)


def is_tma_copy(stmt) -> bool:
    return isinstance(stmt, tirx.Evaluate) and is_tl_call(stmt.value, "copy") and len(stmt.value.args) > 4


def lower_tma_copy(lw, stmt):
    """``T.tma_copy``: TMA boxes or one bulk copy issued by a leader thread with ``expect_tx`` on
    the barrier, or the block's threads copying the tile (see the module docstring)."""
    from tilelang.transform import lower_copy, tma

    call = stmt.value
    src, dst = decode_region(call.args[0]), decode_region(call.args[1])
    bar = call.args[4]
    scope = const_int(call.args[5]) if len(call.args) > 5 else 0
    mask = tma.multicast_mask(lw, stmt)
    plain = tirx.Evaluate(ir.Call(call.op, list(call.args[:4]), ret_ty="handle"), span=stmt.span)
    if mask and (src.scope != "global" or dst.scope not in ("shared", "shared.dyn")):
        raise LoweringError("TL0002", f"cluster_mask multicasts a load from a global tensor into shared memory; "
                            f"'{src.buffer.name}' -> '{dst.buffer.name}' is {src.scope} -> {dst.scope}", stmt.span)
    if src.scope != "global" or dst.scope not in ("shared", "shared.dyn"):
        return lower_copy.lower_copy(lw, plain)
    if mask and not isinstance(bar, ir.TensorLoad):
        # T.copy_cluster(cluster_mask=...) without a barrier: a synchronous load on a barrier of its own
        out = lower_copy.lower_copy(lw, stmt)
        if out is None or not _has_call(out, "tl::tma_load_multicast"):
            raise LoweringError("TL0002", f"T.copy_cluster(cluster_mask=...): the copy of '{src.buffer.name}' into "
                                f"'{dst.buffer.name}' cannot be one TMA load (a whole, linearly laid out shared "
                                "tile of a plain tensor parameter), so it cannot be multicast", stmt.span)
        return out
    if not isinstance(bar, ir.TensorLoad):
        raise LoweringError("TL0002", "T.tma_copy from global to shared memory needs barrier=<an mbarrier from "
                            "T.alloc_barrier>", stmt.span)
    bar_ptr = tirx.address_of(lw.rewrite(bar))
    issue = _bulk(lw, src, dst, bar_ptr)
    if issue is None:
        index = len(lw.tensormaps)
        spec = tma.tma_box_spec(lw, src, dst, index) if dst.is_whole() else "a part of the shared tile"
        if isinstance(spec, str) and mask:
            raise LoweringError("TL0002", f"T.tma_copy(cluster_mask=...): the copy of '{src.buffer.name}' into "
                                f"'{dst.buffer.name}' is not one TMA load ({spec}), so it cannot be multicast",
                                stmt.span)
        if isinstance(spec, str):
            return lower_copy.lower_copy(lw, plain)
        lw.tensormaps.append(spec)
        issue = _boxes(lw, src, dst, spec, index, bar_ptr)
    if mask:
        issue = [issue[0]] + [tma.multicast(lw, s, mask, stmt.span) for s in issue[1:]]
    return tirx.IfThenElse(_leader(lw, scope), seq(issue), None, span=stmt.span)


def _has_call(stmt, prefix) -> bool:
    found = []

    def visit(node):
        if isinstance(node, tirx.Call) and node.args and isinstance(node.args[0], tirx.StringImm) \
                and node.args[0].value.startswith(prefix):
            found.append(node)

    tirx.stmt_functor.post_order_visit(stmt, visit)
    return bool(found)


def uses_multicast(body) -> bool:
    """Whether a kernel body multicasts a TMA load (a ``tl.copy`` with a cluster mask)."""
    found = []
    walk_stmts(body, lambda s: found.append(s) if isinstance(s, tirx.Evaluate) and is_tl_call(s.value, "copy")
               and len(s.value.args) > 6 and const_int(s.value.args[6]) else None)
    return bool(found)


def _leader(lw, scope):
    """The thread that issues a copy: the first of each ``scope`` threads (default: the block or
    the T.ws block being lowered)."""
    n = scope or lw.T
    block = getattr(lw, "role_block", None)
    base = GROUP * block[0] if block else 0
    if n % 32 == 0 and base % n == 0 and lw.T % n == 0:
        return tirx.call_extern("bool", f"tl::tl_shuffle_elect<{n}>")
    return tirx.EQ(tirx.floormod(lw.tid, i32(n)), i32(0))


def _contiguous(region):
    """Whether a region is one contiguous run of its buffer (row-major): after the first dimension
    of extent other than 1, every dimension is whole."""
    ext = [const_int(e) for e in region.extents]
    shape = [const_int(n) for n in region.buffer.shape]
    if None in ext or None in shape:
        return False
    d = next((k for k, e in enumerate(ext) if e != 1), len(ext))
    return all(ext[k] == shape[k] and const_int(region.starts[k]) == 0 for k in range(d + 1, len(ext)))


def _bulk(lw, src, dst, bar_ptr):
    """One ``cp.async.bulk`` of a contiguous run (no tensor map), or None."""
    from tilelang.language.dtypes import nbytes

    layout = lw.layouts.shared.get(dst.buffer)
    if getattr(layout, "group", 1) != 1 or getattr(layout, "slab", False) or dst.buffer in lw.strided:
        return None
    if src.buffer.strides or str(src.buffer.dtype) != str(dst.buffer.dtype):
        return None
    if not (_contiguous(src) and _contiguous(dst)):
        return None
    n = 1
    for e in dst.extents:
        n *= const_int(e)
    esize = nbytes(str(dst.buffer.dtype))
    if (n * esize) % 16:
        return None
    flat = i32(0)
    for st, dim in zip(src.starts, src.buffer.shape):
        flat = flat * dim + lw.rewrite(st)
    mod = lw.an.modular_set(flat)
    if (mod.coeff * esize) % 16 or (mod.base * esize) % 16:
        return None
    soff = lw.shared_offset(dst.buffer, [lw.rewrite(x) for x in dst.starts])
    smod = lw.an.modular_set(soff)
    if (smod.coeff * esize) % 16 or (smod.base * esize) % 16:
        return None
    view = lw.smem_views[dst.buffer]
    dst_ptr = tirx.address_of(tirx.BufferLoad(view, [soff]))
    src_ptr = tirx.address_of(lw.rewrite(tirx.BufferLoad(src.buffer, list(src.starts))))
    return [evaluate_extern("tl::mbarrier_expect_tx", bar_ptr, i32(n * esize)),
            evaluate_extern("tl::tma_load_bulk", dst_ptr, src_ptr, i32(n * esize), bar_ptr)]


def _boxes(lw, src, dst, spec, index, bar_ptr):
    """The TMA boxes of a whole slab-laid-out tile (tensor map ``index``), after ``expect_tx``."""
    from tilelang.transform import tma

    width = spec["box"][0]
    rows, cols = (const_int(x) for x in dst.buffer.shape)
    coords = [lw.rewrite(x) for x in src.starts[::-1]]
    view = lw.smem_views[dst.buffer]
    base = lw.shared_offset(dst.buffer, [i32(0)] * len(dst.buffer.shape))
    out = [evaluate_extern("tl::mbarrier_expect_tx", bar_ptr, i32(rows * cols * 2))]
    for s in range(cols // width):
        dst_ptr = tirx.address_of(tirx.BufferLoad(view, [base + i32(s * rows * width)]))
        out.append(evaluate_extern(f"tl::tma_load_{len(coords)}d", dst_ptr, tma.tmap(index), bar_ptr,
                                   coords[0] + i32(s * width), *coords[1:]))
    return out


__all__ = ["Roles", "apply", "is_tma_copy", "is_ws", "lower_block", "lower_tma_copy", "role_sync", "uses_multicast",
           "ws_blocks"]
