"""Thread-range regions: tile work under a user's ``if`` on the thread index.

Contract. A branch of an ``if`` whose condition selects a contiguous, warp-aligned range of the
block's threads (``if tx < 32:`` / its ``else``, ``elif 128 <= tx < 256:``), and whose body holds
fragment work (a tile op with a fragment operand, a gemm or reduction, a T.Parallel nest touching
a fragment), is a *region*: its tile ops are laid out for the ``count`` threads of the range,
thread index ``tid - first`` (upstream's thread bounds of a tile op). ``regions(info)`` maps each
statement inside a region to its ``Region``; layout inference and the lowering both consult it,
so the fragments of a region are built and indexed for the same threads. Every fragment a region
touches must be touched nowhere else in the kernel, or only in other branches that select the same
range (they share its layout); else the branch is no region. A branch that selects a single
thread (``if tx == 0:``, fragment work but no gemm) is a region of one thread: each fragment of it
lies whole in that thread (upstream's layout there). A branch that selects no such range
(``tx % 2 == 0``, a range not a multiple of 32 threads) stays as before: its memory-only tile ops
are spread over the selected threads, fragment work there is refused. A branch whose fragment
work all lies under ``if``s on the thread index nested in it (the ``else`` of an ``if tx < 128:
... elif tx < 256: ... else: ...`` chain) is no region itself: those inner branches are.
Barriers the compiler inserts under conditions on the thread index (``guarded_sync``) are named
barriers over the threads those conditions select (``__syncwarp`` over lanes of one
warp), and where they select part of several warps or an unknown set (no barrier can be met there) are
split out of the `if` (``barrier_hoist``). A condition on a value that differs between threads
(``c = Mask[tx] != 0; if c:``, ``thread_varying``) selects an unknown set.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import tvm
from tvm import tirx

from tilelang.language._ops import is_tl_call
from tilelang.transform import barrier_hoist
from tilelang.tir_utils import (ExprRewriter, any_stmt, children, const_int, evaluate_extern, i32, substitute,
                                tensor_loads, uses_vars, walk_stmts)
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


def thread_condition(conds, thread_vars, varies, values):
    """The conditions ``conds`` (those enclosing a statement) as one condition that tells threads
    of a block apart, on the thread index where it can be: conjuncts the same in every thread
    (``bx < 3`` of ``tx < 64 and bx < 3``; ``varies(c)`` says whether one without the thread index
    differs between threads) dropped, and the values ``values`` (``thread_values``) read through
    (``w = tx // 32; if w == 0``). None: every thread of the block gets there alike."""
    parts = []
    for c in conds:
        parts.extend(_conjuncts(c))
    keep = [c for c in parts if uses_vars(c, thread_vars) or varies(c)]
    if not keep:
        return None
    return _Inline(values).visit(conjunction(keep)) if values else conjunction(keep)


def _conjuncts(cond):
    if isinstance(cond, tirx.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def barrier_threads(info, cond):
    """Who meets a barrier placed under ``cond`` (``thread_condition``'s): None (the whole block,
    no condition), (first, count) of a range the compiler orders with ``__syncthreads()`` (the
    whole block) or a named barrier (whole warps), ``("lanes", mask)`` of a contiguous range
    inside one warp (``__syncwarp``), or "none": part of several warps, or an unknown set."""
    if cond is None:
        return None
    rng = selected_range(tvm.sym.Analyzer(), info.tid, cond, info.num_threads)
    if rng is None:
        return "none"
    if rng == (0, info.num_threads) or not (rng[0] % WARP or rng[1] % WARP):
        return rng
    if rng[0] // WARP == (rng[0] + rng[1] - 1) // WARP:
        return ("lanes", ((1 << rng[1]) - 1) << (rng[0] % WARP))
    return "none"


def _lowering_condition(lw):
    conds = getattr(lw, "thread_conds", None)
    if not conds:
        return None
    thread_vars = getattr(lw, "thread_vars", None) or list(lw.info.thread_vars.values())
    values = getattr(lw, "_thread_values", None)
    if values is None:
        values = lw.__dict__["_thread_values"] = thread_values(lw.info.body, thread_vars)
    return thread_condition(conds, thread_vars, getattr(lw, "_varies", lambda c: False), values)


def guarded_sync(lw):
    """The barrier the compiler places here under conditions on the thread index: None where no
    such condition encloses it (the caller's own barrier), ``__syncthreads()`` where they select
    the whole block, a named barrier over a warp-aligned range they select (one id per range, from
    3, as upstream numbers them), ``__syncwarp(lanes)`` over a range inside one warp, and otherwise
    (part of several warps, or an unknown set, gets there: no barrier there can order them) a
    marker the `if`'s lowering splits out (``barrier_hoist``) or, failing that, leaves out: the
    statement holding the `if` is then ordered against its neighbours by the barriers around it."""
    got = barrier_threads(lw.info, _lowering_condition(lw))
    if got is None:
        return None
    if got == "none":
        return barrier_hoist.marker()   # split out of the `if` by its lowering where it can be
    if got[0] == "lanes":           # threads of one warp: they order themselves
        return evaluate_extern("__syncwarp", tirx.const(got[1], "uint32"))
    if got == (0, lw.info.num_threads):
        return evaluate_extern("__syncthreads")
    ids = lw.__dict__.setdefault("partial_barrier_ids", {})
    if got not in ids:
        ids[got] = min(FIRST_BARRIER + len(ids), MAX_BARRIER)
    return evaluate_extern("tl::named_barrier_sync", ids[got], got[1])


_REGISTER_SCOPES = ("local", "local.var")


def thread_varying(body, thread_vars) -> list:
    """The variables and register buffers of ``body`` whose value may differ between the threads
    of a block: the thread indices, and let variables and register buffers (``T.alloc_var``, a
    rebound Python name) assigned a value that reads one of them (directly, or a load at an index
    that does) or assigned under an ``if`` whose condition does. ``c = Mask[tx] != 0``
    makes ``c`` vary; ``n = seq_lens[bx]`` does not. (A value that only looks thread-dependent,
    ``T.shfl_sync(.., 0)`` inside one warp, still counts: a block-wide barrier needs the whole
    block to agree.)"""
    varying = list(thread_vars)

    def known(var):
        return any(var.same_as(v) for v in varying)

    def reads_varying(e):
        return reads_any(e, varying)

    grew = True
    while grew:
        grew = False

        def add(var):
            nonlocal grew
            if not known(var):
                varying.append(var)
                grew = True

        def visit(stmt, under):
            if isinstance(stmt, tirx.Bind):
                if under or reads_varying(stmt.value):
                    add(stmt.var)
            elif isinstance(stmt, tirx.BufferStore) and str(stmt.buffer.scope()) in _REGISTER_SCOPES:
                if under or reads_varying(stmt.value) or any(reads_varying(i) for i in stmt.indices):
                    add(stmt.buffer)
            elif isinstance(stmt, tirx.IfThenElse):
                under = under or reads_varying(stmt.condition)
            elif isinstance(stmt, tirx.While):
                under = under or reads_varying(stmt.condition)
            elif isinstance(stmt, tirx.For):
                if reads_varying(stmt.min) or reads_varying(stmt.extent):
                    add(stmt.loop_var)
                    under = True
            for c in children(stmt):
                visit(c, under)

        visit(body, False)
    return varying


def thread_values(body, thread_vars) -> list:
    """Let variables and one-element register buffers given one value in ``body``, an expression
    of the thread and block indices alone (no load): [(is_buffer, variable or buffer, value)]. A register
    scalar may also have the constant store of its declaration right before that one
    (``w = T.alloc_var("int32"); w = tx // 32``)."""
    binds, stores, adjacent = [], [], []

    def visit(s):
        if isinstance(s, tirx.Bind):
            binds.append((s.var, s.value))
        elif isinstance(s, tirx.BufferStore) and str(s.buffer.scope()) in _REGISTER_SCOPES:
            stores.append(s)
        elif isinstance(s, tirx.SeqStmt):
            seq_ = list(s.seq)
            for a, b in zip(seq_, seq_[1:]):
                if (isinstance(a, tirx.BufferStore) and isinstance(b, tirx.BufferStore) and a.buffer.same_as(b.buffer)
                        and isinstance(a.value, (tirx.IntImm, tirx.FloatImm))):
                    adjacent.append(a)

    walk_stmts(body, visit)
    out = []
    for var, value in binds:
        if sum(1 for v, _ in binds if v.same_as(var)) == 1 and not tensor_loads(value):
            out.append((False, var, value))
    seen = []
    for st in stores:
        buf = st.buffer
        if any(buf.same_as(b) for b in seen):
            continue
        seen.append(buf)
        writes = [w for w in stores if w.buffer.same_as(buf) and not any(w.same_as(a) for a in adjacent)]
        if (len(writes) == 1 and len(buf.shape) == 1 and const_int(buf.shape[0]) == 1
                and not tensor_loads(writes[0].value) and uses_vars(writes[0].value, thread_vars)):
            out.append((True, buf, writes[0].value))
    return out


class _Inline(ExprRewriter):
    def __init__(self, values):
        self.values = values

    def visit_var(self, var):
        value = next((v for buffer, k, v in self.values if not buffer and k.same_as(var)), None)
        return var if value is None else self.visit(value)

    def visit_load(self, load, indices):
        value = next((v for buffer, k, v in self.values if buffer and k.same_as(load.source)), None)
        return super().visit_load(load, indices) if value is None else self.visit(value)


def reads_any(expr, variables) -> bool:
    """Whether ``expr`` mentions one of ``variables`` (``thread_varying``'s: let variables, and
    register buffers, whose loads name them) directly or through a load."""
    return bool(variables) and (uses_vars(expr, variables) or any(
        any(ld.source.same_as(v) for v in variables) for ld in tensor_loads(expr)))


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
                return _enumerated_range(analyzer, tid, cond, num_threads)
    return lo, hi - lo


def _enumerated_range(analyzer, tid, cond, num_threads):
    """``selected_range`` by evaluating ``cond`` for every thread, where the bounds analysis reads
    nothing out of it (``tx // 32 == 0``) and it depends on the thread index alone."""
    if not isinstance(tid, tirx.Var) or tensor_loads(cond) or num_threads > 1024:
        return None
    holds = []
    for t in range(num_threads):
        got = analyzer.simplify(substitute(cond, {tid: i32(t)}))
        if not isinstance(got, tirx.IntImm):
            return None
        holds.append(bool(got.value))
    first = holds.index(True) if True in holds else None
    if first is None:
        return None
    count = sum(holds)
    return (first, count) if all(holds[first:first + count]) else None


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


def _has_gemm(stmt) -> bool:
    return any_stmt(stmt, lambda s: isinstance(s, tirx.Evaluate) and is_tl_call(s.value) and "gemm" in s.value.op.name)


def _has_thread_if(stmt, tvars) -> bool:
    return any_stmt(stmt, lambda s: isinstance(s, tirx.IfThenElse) and uses_vars(s.condition, tvars))


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
        single = rng is not None and rng[1] == 1 and not _has_gemm(body)
        if rng is None or ((rng[0] % WARP or rng[1] % WARP) and not single) or rng[1] == T \
                or not has_fragment_work(body):
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


__all__ = ["Region", "barrier_threads", "conjunction", "guarded_sync", "has_fragment_work", "regions",
           "reads_any", "selected_range", "thread_condition", "thread_values", "thread_varying"]
