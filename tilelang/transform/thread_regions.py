"""Thread-range regions: tile work under a user's ``if`` on the thread index.

Contract. A branch of an ``if`` whose condition selects a contiguous, warp-aligned range of the
block's threads (``if tx < 32:`` / its ``else``, ``elif 128 <= tx < 256:``), and whose body holds
fragment work (a tile op with a fragment operand, a gemm or reduction, a T.Parallel nest touching
a fragment), is a *region*: its tile ops are laid out for the ``count`` threads of the range,
thread index ``tid - first`` (upstream's thread bounds of a tile op). ``regions(info)`` maps each
statement inside a region to its ``Region``; layout inference and the lowering both consult it,
so the fragments of a region are built and indexed for the same threads. Every fragment a region
touches must be touched nowhere else in the kernel, or only in other branches that select the same
range (they share its layout); else the branch is no region. A branch that
selects no such range (``tx == 0``, ``tx % 2 == 0``, a range not a multiple of 32 threads) stays
as before: its memory-only tile ops are spread over the selected threads, fragment work there is
refused. A branch whose fragment work all lies under ``if``s on the thread index nested in it
(the ``else`` of an ``if tx < 128: ... elif tx < 256: ... else: ...`` chain) is no region itself:
those inner branches are. Barriers the compiler inserts under conditions on the thread index (``guarded_sync``)
are named barriers over the threads those conditions select (``__syncwarp`` over lanes of one
warp), and are left out where they select part of several warps or an unknown set (no barrier can
be met there).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import tvm
from tvm import tirx

from tilelang.language._ops import is_tl_call
from tilelang.tir_utils import children, evaluate_extern, i32, uses_vars, walk_stmts
from tilelang.transform.kernel import FRAGMENT_SCOPE, buffer_accesses, decode_region, is_parallel_nest, scope_of

WARP = 32
_FRAGMENT_OPS = ("gemm", "reduce", "cumsum")
FIRST_BARRIER = 3     # named barriers 1 and 2 are kept for reductions (as upstream reserves them)
MAX_BARRIER = 15


@dataclass(frozen=True)
class Region:
    first: int      # first thread of the range
    count: int      # threads in it (a multiple of 32)


def conjunction(conds):
    out = conds[0]
    for c in conds[1:]:
        out = tirx.And(out, c)
    return out


def _sync_range(lw):
    """The threads that reach a barrier placed here: (first, count), None (no condition on the
    thread index encloses it) or "none" (the enclosing conditions select no such range)."""
    conds = getattr(lw, "thread_conds", None)
    if not conds:
        return None
    rng = selected_range(tvm.sym.Analyzer(), lw.info.tid, conjunction(conds), lw.info.num_threads)
    if rng is None or rng[0] % WARP or rng[1] % WARP:
        return "none"
    return rng


def guarded_sync(lw):
    """The barrier the compiler places here under conditions on the thread index: None where no
    such condition encloses it (the caller's own barrier), ``__syncthreads()`` where they select
    the whole block, a named barrier over a warp-aligned range they select (one id per range, from
    3, as upstream numbers them), ``__syncwarp(lanes)`` over a range inside one warp, and otherwise
    none (a no-op): part of several warps, or an unknown set, gets there, and no barrier can order
    them; the statement holding the `if` is ordered against its neighbours by the barriers around
    it."""
    rng = _sync_range(lw)
    if rng is None:
        return None
    if rng == "none":
        lanes = _warp_lanes(lw)
        if lanes is not None:       # threads of one warp: they order themselves
            return evaluate_extern("__syncwarp", tirx.const(lanes, "uint32"))
        return tirx.Evaluate(i32(0))
    if rng == (0, lw.info.num_threads):
        return evaluate_extern("__syncthreads")
    ids = lw.__dict__.setdefault("partial_barrier_ids", {})
    if rng not in ids:
        ids[rng] = min(FIRST_BARRIER + len(ids), MAX_BARRIER)
    return evaluate_extern("tl::named_barrier_sync", ids[rng], rng[1])


def _warp_lanes(lw):
    """The lane mask of the threads the enclosing conditions select when they are a contiguous
    range inside one warp (``tx == 0``, ``tx < 16``), else None."""
    rng = selected_range(tvm.sym.Analyzer(), lw.info.tid, conjunction(lw.thread_conds), lw.info.num_threads)
    if rng is None or rng[0] // WARP != (rng[0] + rng[1] - 1) // WARP:
        return None
    return ((1 << rng[1]) - 1) << (rng[0] % WARP)


def selected_range(analyzer, tid, cond, num_threads):
    """(first, count) when ``cond`` holds exactly for threads first <= tid < first + count."""
    cond = analyzer.simplify(cond)     # (``not (tx < 32)`` -> ``32 <= tx``: bounds the analyzer reads)
    with analyzer.constraint_scope(tirx.And(tirx.GE(tid, i32(0)), tirx.LT(tid, i32(num_threads)))):
        with analyzer.constraint_scope(cond):
            bound = analyzer.const_int_bound(tid)
        lo, hi = int(bound.min_value), int(bound.max_value) + 1
        if not 0 <= lo < hi <= num_threads:
            return None
        with analyzer.constraint_scope(tirx.And(tirx.GE(tid, i32(lo)), tirx.LT(tid, i32(hi)))):
            if not _proved(analyzer, cond):
                return None
    return lo, hi - lo


def _proved(analyzer, cond) -> bool:
    got = analyzer.simplify(cond)
    return isinstance(got, tirx.IntImm) and bool(got.value)


def has_fragment_work(stmt) -> bool:
    """Whether ``stmt`` holds a tile op on a fragment, a gemm/reduction, or a T.Parallel nest that
    touches a fragment."""
    found = []

    def visit(s):
        if found:
            return
        if isinstance(s, tirx.Evaluate) and is_tl_call(s.value):
            name = s.value.op.name[3:]
            if name in _FRAGMENT_OPS:
                found.append(s)
                return
            for a in s.value.args:
                if is_tl_call(a, "region") and scope_of(decode_region(a).buffer) == FRAGMENT_SCOPE:
                    found.append(s)
                    return
        elif is_parallel_nest(s) and any(scope_of(b) == FRAGMENT_SCOPE for b, _, _ in buffer_accesses(s)):
            found.append(s)

    walk_stmts(stmt, visit)
    return bool(found)


def _own_fragment_work(stmt, tvars) -> bool:
    """Whether ``stmt`` holds fragment work outside the ``if``s on the thread index nested in it."""
    if isinstance(stmt, tirx.IfThenElse) and uses_vars(stmt.condition, tvars):
        return False
    if isinstance(stmt, tirx.Evaluate) or is_parallel_nest(stmt):
        return has_fragment_work(stmt)
    return any(_own_fragment_work(c, tvars) for c in children(stmt))


def _fragment_uses(stmt) -> Counter:
    """How many times each fragment is accessed under ``stmt`` (elements and tile-op operands)."""
    uses = Counter(b for b, _, _ in buffer_accesses(stmt) if scope_of(b) == FRAGMENT_SCOPE)

    def visit(s):
        if isinstance(s, tirx.Evaluate) and is_tl_call(s.value):
            for a in s.value.args:
                if is_tl_call(a, "region") and scope_of(decode_region(a).buffer) == FRAGMENT_SCOPE:
                    uses[decode_region(a).buffer] += 1

    walk_stmts(stmt, visit)
    return uses


def _shared_range_uses(body, tvars, analyzer, tid, T) -> dict:
    """Fragment -> (range, uses) for a fragment every use of which lies in branches (of ``if``s on
    the thread index, not nested in one another) that select the same range ``range``: such
    branches share its layout (``with T.ws(1): T.clear(C)`` ... ``with T.ws(1): T.copy(C, ...)``)."""
    seen = {}       # fragment -> set of ranges, use count within such branches

    def go(s, cond):
        if s is None:
            return
        if isinstance(s, tirx.IfThenElse) and uses_vars(s.condition, tvars):
            here = s.condition if cond is None else tirx.And(cond, s.condition)
            other = tirx.Not(s.condition) if cond is None else tirx.And(cond, tirx.Not(s.condition))
            for body, c in ((s.then_case, here), (s.else_case, other)):
                if body is None:
                    continue
                rng = selected_range(analyzer, tid, c, T)
                if rng is not None and not _has_thread_if(body, tvars):
                    for b, n in _fragment_uses(body).items():
                        ranges, count = seen.get(b, (set(), 0))
                        seen[b] = (ranges | {rng}, count + n)
                else:
                    go(body, c)
            return
        for c in children(s):
            go(c, cond)

    go(body, None)
    return {b: (next(iter(r)), n) for b, (r, n) in seen.items() if len(r) == 1}


def _has_thread_if(stmt, tvars) -> bool:
    found = []
    walk_stmts(stmt, lambda s: found.append(s) if isinstance(s, tirx.IfThenElse)
               and uses_vars(s.condition, tvars) else None)
    return bool(found)


def regions(info, thread_vars=None) -> dict:
    """Statement -> Region for every statement inside a region of the kernel body ``info.body``
    (keys: the statement objects, compared by identity)."""
    if getattr(info, "user_ws", None) is not None:
        return {}       # T.ws roles: their own thread plans
    tid = info.tid
    T = info.num_threads
    tvars = thread_vars if thread_vars is not None else list(info.thread_vars.values())
    analyzer = tvm.sym.Analyzer()
    out = {}

    def mark(s, region):
        out[s] = region
        walk_stmts(s, lambda x: out.__setitem__(x, region))

    total = _fragment_uses(info.body)
    shared = _shared_range_uses(info.body, tvars, analyzer, tid, T)

    def branch(body, cond):
        if body is None:
            return False
        rng = selected_range(analyzer, tid, cond, T)
        if rng is None or rng[0] % WARP or rng[1] % WARP or rng[1] == T or not has_fragment_work(body):
            return False
        if not _own_fragment_work(body, tvars):
            return False    # all of it under inner conditions (an `elif` chain): those are the regions
        mine = _fragment_uses(body)
        if any(total[b] != n and shared.get(b) != (rng, total[b]) for b, n in mine.items()):
            return False    # a fragment the rest of the kernel uses too: laid out for the whole block
        mark(body, Region(*rng))
        return True

    def go(s, cond):
        if s is None:
            return
        if isinstance(s, tirx.IfThenElse) and uses_vars(s.condition, tvars):
            here = s.condition if cond is None else tirx.And(cond, s.condition)
            other = tirx.Not(s.condition) if cond is None else tirx.And(cond, tirx.Not(s.condition))
            if not branch(s.then_case, here):
                go(s.then_case, here)
            if s.else_case is not None and not branch(s.else_case, other):
                go(s.else_case, other)
            return
        for c in children(s):
            go(c, cond)

    go(info.body, None)
    return out


__all__ = ["Region", "conjunction", "guarded_sync", "has_fragment_work", "regions", "selected_range"]
