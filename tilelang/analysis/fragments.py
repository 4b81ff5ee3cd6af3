"""Fragment reads the inferred layouts cannot serve (TL0203), and fragment elements accumulated
by several threads at once (TL0405), checked by enumeration.

Input: a ``Kernel`` whose ``layouts`` were inferred. Layout inference verifies the accesses
indexed by plain loop variables; an access such as ``x[i, j // 2]`` inside ``T.Parallel`` is
lowered as "this thread's register for that element", which is only right if the thread that
runs iteration (i, j) holds the element. This check evaluates the index for every iteration of
the loop's layout and compares with the fragment's layout; a mismatch would read another
thread's register, so it is an error. An index that also uses an enclosing serial loop's
variable or a block index (``lse[k, j]`` inside ``for k in T.serial(4)``) is checked for every
value they take when their ranges are constant. Loops too large to enumerate cheaply are
skipped.

TL0405: a statement of a ``T.Parallel`` body that updates a fragment from its own value at the
same index (``acc[i] += ...``, ``acc[i] = T.max(acc[i], ...)``) where the index leaves out a
loop variable: when the loop's layout gives some of one element's iterations to a thread and the
rest to others, each thread accumulates its share into its own register copy and nothing combines
them (a ``T.alloc_reducer`` is the construct that does). A loop replicated over threads, each
running all of an element's iterations, is fine; statements under an ``if`` of their own inside
the body are skipped (a body-wide guard is honoured).
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import tirx

from tilelang.diagnostics import Note, Severity
from tilelang.tir_utils import children, const_int, tensor_loads, uses_vars
from tilelang.transform.kernel import FRAGMENT_SCOPE, buffer_accesses, parallel_nest
from tilelang.transform.layout_inference import body_guard, guard_mask

LIMIT = 1 << 24
_OPS = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "FloorDiv": np.floor_divide,
    "FloorMod": np.mod, "Min": np.minimum, "Max": np.maximum,
}


ENCLOSING_LIMIT = 256   # values of the enclosing loop / block indices enumerated per nest


def check_fragment_reads(k, rep) -> None:
    if k.layouts is None:
        return
    outer = _enclosing_ranges(k)
    for nest in k.nests:
        rep.guard("fragment access check", _check_nest, k, rep, nest, outer.get(nest, []))


def check_split_accumulation(k, rep) -> None:
    if k.layouts is None:
        return
    for nest in k.nests:
        rep.guard("split accumulation check", _check_accumulation, k, rep, nest)


def _check_accumulation(k, rep, nest) -> None:
    loop_vars, extents, body = parallel_nest(nest)
    guard = body_guard(body)
    stores = [s for s in _self_updates(body, guard)
              if k.scope(s.buffer) == FRAGMENT_SCOPE and s.buffer not in k.layouts.reducers]
    iterations = _iterations(k, loop_vars) if stores else None     # (most nests have no such store)
    if iterations is None or iterations[0].size > LIMIT:
        return
    owners, env = iterations
    active = guard_mask(guard, list(env.items()), owners.shape)
    seen = set()
    for store in stores:
        buf, idx = store.buffer, list(store.indices)
        if buf in seen:
            continue
        left_out = [v for v, n in zip(loop_vars, extents)
                    if (const_int(n) or 0) > 1 and not any(uses_vars(i, [v]) for i in idx)]
        values = [evaluate(i, env) for i in idx]
        if not left_out or any(v is None for v in values):
            continue
        split = _split_element(owners, values, active)
        if split is not None:
            seen.add(buf)
            _report_split(k, rep, nest, store, left_out, split)


def _iterations(k, loop_vars):
    """(owners [T, L]: the flat iteration index each thread runs, {loop var: its value there}) of
    the nest's inferred loop layout, or None when it has none."""
    loop = k.layouts.loops.get(loop_vars[0])
    if loop is None:
        return None
    owners = loop.owners()
    return owners, dict(zip(loop_vars, np.unravel_index(owners, loop.shape)))


def _self_updates(body, guard) -> list:
    """BufferStores of ``body`` (not under an ``if`` of their own; ``guard``, the body-wide one,
    is applied as a mask instead) whose value loads the stored element itself."""
    out = []

    def visit(s, guarded):
        if isinstance(s, tirx.IfThenElse):
            guarded = True
        if isinstance(s, tirx.BufferStore) and not guarded:
            if any(e.source.same_as(s.buffer) and len(e.indices) == len(s.indices)
                   and all(tvm.ir.structural_equal(a, b) for a, b in zip(e.indices, s.indices))
                   for e in tensor_loads(s.value)):
                out.append(s)
        for c in children(s):
            visit(c, guarded)

    top = body
    if guard is not None:
        while isinstance(top, tirx.IfThenElse) and top.else_case is None:
            top = top.then_case
    visit(top, False)
    return out


def _split_element(owners, values, active):
    """(thread, its iterations of the element, the element's iterations) for an element some of
    whose iterations a thread runs and others it does not, or None."""
    T = owners.shape[0]
    keys = np.zeros(owners.shape, dtype=np.int64)
    for v in values:
        a = np.broadcast_to(np.asarray(v, dtype=np.int64), owners.shape)
        keys = keys * (int(a.max()) - int(a.min()) + 1) + (a - int(a.min()))
    tids = np.broadcast_to(np.arange(T)[:, None], owners.shape)
    keep = np.ones(owners.shape, dtype=bool) if active is None else np.broadcast_to(active, owners.shape)
    keys, iters, tids = keys[keep], owners[keep], tids[keep]
    pairs = np.unique(np.stack([keys, iters]), axis=1)                 # distinct (element, iteration)
    elems, total = np.unique(pairs[0], return_counts=True)
    triples = np.unique(np.stack([tids, keys, iters]), axis=1)         # distinct (thread, element, iteration)
    tk, per = np.unique(triples[:2], axis=1, return_counts=True)
    want = total[np.searchsorted(elems, tk[1])]
    short = np.nonzero(per < want)[0]
    if not short.size:
        return None
    j = int(short[0])
    return int(tk[0, j]), int(per[j]), int(want[j])


def _report_split(k, rep, nest, store, left_out, split) -> None:
    tid, mine, total = split
    buf = store.buffer
    access = f"{buf.name}[{', '.join(str(i) for i in store.indices)}]"
    over = ", ".join(f"'{v.name}'" for v in left_out)
    _emit_at_nest(rep, "TL0405", nest, buf,
                  f"'{access}' is accumulated over {over} inside T.Parallel, but the loop's layout spreads "
                  f"those iterations over several threads (thread {tid} runs {mine} of an element's {total}): "
                  f"each updates its own register copy of '{buf.name}' and nothing adds the copies, so every "
                  f"copy holds part of the result",
                  f"'{buf.name}' is a fragment: one copy per thread that holds it",
                  f"make '{buf.name}' a T.alloc_reducer (with T.finalize_reducer after the loop), or keep the "
                  f"products in a fragment indexed by {over} too and T.reduce_sum it", Severity.WARNING)


def _emit_at_nest(rep, code, nest, buf, message, about, fix, severity) -> None:
    """``code`` at the nest's T.Parallel header, with a note at ``buf``'s allocation and the fix."""
    rep.emit(code, message, rep.header_span(nest),
             notes=[Note(about, rep.alloc_span(buf)), Note(fix)], severity=severity)


def _enclosing_ranges(k) -> dict:
    """nest -> [(var, first, count)] of the serial loops around it and the block indices, where
    the range is a compile-time constant: a fragment index that uses them (``lse[k, j]`` inside
    ``for k``) must be held by the running thread for every value they take."""
    launch = []
    for iv, extent in k.info.launch:
        n = const_int(extent)
        if str(iv.thread_tag).startswith("blockIdx") and n is not None:
            launch.append((iv.var, 0, n))
    out = {}

    def go(s, loops):
        if s in k.nests:
            out[s] = launch + loops
            return
        if isinstance(s, tirx.For):
            lo, n = const_int(s.min), const_int(s.extent)
            if lo is not None and n is not None and n > 0:
                loops = loops + [(s.loop_var, lo, n)]
        for c in children(s):
            go(c, loops)

    go(k.info.body, [])
    return out


def evaluate(expr, env: dict):
    """Evaluate an integer index expression on numpy arrays; None when it has other nodes."""
    value = const_int(expr) if isinstance(expr, tirx.IntImm) else None
    if value is not None:
        return value
    if isinstance(expr, tirx.Var):
        for var, arr in env.items():
            if var.same_as(expr):
                return arr
        return None
    name = type(expr).__name__
    if name == "Cast":
        return evaluate(expr.value, env)
    op = _OPS.get(name)
    if op is None:
        return None
    a, b = evaluate(expr.a, env), evaluate(expr.b, env)
    if a is None or b is None:
        return None
    return op(a, b)


def _check_nest(k, rep, nest, outer=()) -> None:
    loop_vars, extents, body = parallel_nest(nest)
    iterations = _iterations(k, loop_vars)
    if iterations is None:
        return
    owners, env = iterations
    seen = set()
    guard = body_guard(body)
    for buf, idx, _ in buffer_accesses(body):
        layout = k.layouts.fragments.get(buf)
        if k.scope(buf) != FRAGMENT_SCOPE or layout is None or buf in seen or _plain(idx, loop_vars):
            continue
        if owners.shape[0] * int(np.prod(layout.shape)) > LIMIT:
            continue
        for fixed in _outer_values(idx, outer):
            bad = _first_miss(layout, idx, {**env, **fixed}, guard)
            if bad is not None:
                seen.add(buf)
                _report(k, rep, nest, buf, idx, loop_vars, bad, fixed)
                break


def _outer_values(idx, outer):
    """Every assignment of the enclosing variables an index uses ([{}] when it uses none; no
    assignment when their combinations exceed ENCLOSING_LIMIT)."""
    used = [(v, lo, n) for v, lo, n in outer if any(uses_vars(i, [v]) for i in idx)]
    total = 1
    for _, _, n in used:
        total *= n
    if total > ENCLOSING_LIMIT:
        return []
    combos = [{}]
    for v, lo, n in used:
        combos = [{**c, v: x} for c in combos for x in range(lo, lo + n)]
    return combos


def _plain(idx, loop_vars) -> bool:
    return all(isinstance(i, tirx.Var) and any(v.same_as(i) for v in loop_vars) for i in idx)


def _first_miss(layout, idx, env, guard=None):
    """(thread, iteration coordinates) of the first iteration whose thread lacks the element;
    iterations a body-wide ``if`` (``guard``) switches off touch nothing."""
    values = [evaluate(i, env) for i in idx]
    if any(v is None for v in values):
        return None
    shape = tuple(layout.shape)
    T = layout.num_threads
    arrays = [np.broadcast_to(np.asarray(v), env_shape(env)) for v in values]
    inside = np.ones(env_shape(env), dtype=bool)
    for a, n in zip(arrays, shape):
        inside &= (a >= 0) & (a < n)
    flat = np.ravel_multi_index(tuple(np.clip(a, 0, n - 1) for a, n in zip(arrays, shape)), shape)
    held = np.zeros((T, int(np.prod(shape))), dtype=bool)
    held[np.arange(T)[:, None], layout.owners()] = True
    ok = held[np.arange(flat.shape[0])[:, None], flat] & inside
    if not ok.all():
        mask = guard_mask(guard, list(env.items()), ok.shape)
        if mask is not None:
            ok |= ~mask
    if ok.all():
        return None
    t, l = map(int, np.argwhere(~ok)[0])
    return t, [int(np.broadcast_to(np.asarray(c), ok.shape)[t, l]) for c in env.values()]


def env_shape(env):
    return next(iter(env.values())).shape


def _report(k, rep, nest, buf, idx, loop_vars, bad, fixed=None) -> None:
    tid, coords = bad
    access = f"{buf.name}[{', '.join(str(i) for i in idx)}]"
    iteration = ", ".join([f"{v.name}={c}" for v, c in zip(loop_vars, coords)]
                          + [f"{v.name}={c}" for v, c in (fixed or {}).items()])
    origin = k.layouts.origin.get(buf, "layout inference")
    _emit_at_nest(rep, "TL0203", nest, buf,
                  f"fragment '{buf.name}' is read as {access} inside T.Parallel, but the thread that runs an "
                  f"iteration does not always hold that element (thread {tid} runs {iteration}): it would read "
                  f"another thread's register",
                  f"'{buf.name}' has its layout from {origin}",
                  f"read '{buf.name}' from shared memory instead (T.copy it to a T.alloc_shared buffer), or index "
                  f"it with the loop variables of a loop over its own shape", Severity.ERROR)
