"""Fragment reads the inferred layouts cannot serve (TL0203), checked by enumeration.

Input: a ``Kernel`` whose ``layouts`` were inferred. Layout inference verifies the accesses
indexed by plain loop variables; an access such as ``x[i, j // 2]`` inside ``T.Parallel`` is
lowered as "this thread's register for that element", which is only right if the thread that
runs iteration (i, j) holds the element. This check evaluates the index for every iteration of
the loop's layout and compares with the fragment's layout; a mismatch would read another
thread's register, so it is an error. An index that also uses an enclosing serial loop's
variable or a block index (``lse[k, j]`` inside ``for k in T.serial(4)``) is checked for every
value they take when their ranges are constant. Loops too large to enumerate cheaply are
skipped.
"""

from __future__ import annotations

import numpy as np
from tvm import tirx

from tilelang.diagnostics import Note, Severity
from tilelang.tir_utils import children, const_int, uses_vars
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
    loop = k.layouts.loops.get(loop_vars[0])
    if loop is None:
        return
    owners = loop.owners()                            # [T, L] flat iteration index
    coords = np.unravel_index(owners, loop.shape)     # per loop dimension, [T, L]
    env = dict(zip(loop_vars, coords))
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
    rep.emit("TL0203", f"fragment '{buf.name}' is read as {access} inside T.Parallel, but the thread "
             f"that runs an iteration does not always hold that element (thread {tid} runs {iteration}): "
             f"it would read another thread's register", rep.header_span(nest),
             notes=[Note(f"'{buf.name}' has its layout from {origin}", rep.alloc_span(buf)),
                    Note(f"read '{buf.name}' from shared memory instead (T.copy it to a T.alloc_shared "
                         f"buffer), or index it with the loop variables of a loop over its own shape")],
             severity=Severity.ERROR)
