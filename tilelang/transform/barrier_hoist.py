"""Barriers out of branches that only some threads take.

Contract. A barrier needed inside a branch that selects part of several warps, or a set of threads
only known at run time (``if tx < 48:`` in a block of 64, ``if Mask[tx] != 0:``), can be met by
no barrier instruction there (``thread_regions.guarded_sync`` answers ``marker()``). The lowered
``if`` is then split at the marker: ``if c: A; <barrier>; if c: B``, the barrier at the level of
the ``if``, where every thread of the enclosing context meets it (upstream's ThreadSync hoists
the same way). A user's ``T.sync_threads()`` in such a branch is split out alike (upstream refuses
it, or leaves it where not every thread gets). The condition is evaluated once, where the ``if``
was (bound to a variable where it reads memory, which the branch may write); registers the branch
declares, and values one part binds and another reads, live before the parts; a marker inside a
serial loop of the branch whose bounds every thread computes alike (no thread index, no memory,
nothing the branch defines) moves out with the loop (``for i: if c: A; <barrier>; if c: B``).
Where a marker lies anywhere else (a ``while``, a loop of per-thread trip count), the split is
not made: an auto barrier stays left out (the barriers around the ``if`` order it against its
neighbours; ``tilelang-check`` reports an exchange there, TL0404) and a user's barrier stays where
they wrote it (``settle``).
"""

from __future__ import annotations

from tvm import tirx

from tilelang.tir_utils import (any_expr, const_int, dtype_of, evaluate_extern, extern_name, flatten, i32, map_stmts,
                                seq, substitute_stmt, tensor_loads, uses_vars, walk_stmts)

MARKER = "tl::hoisted_barrier"      # (auto = 0 | user = 1): a barrier waiting to be split out


def marker(user: bool = False):
    return evaluate_extern(MARKER, i32(1 if user else 0))


def is_marker(st) -> bool:
    return isinstance(st, tirx.Evaluate) and extern_name(st) == MARKER


def _has_marker(st) -> bool:
    found = []
    walk_stmts(st, lambda s: found.append(s) if is_marker(s) else None)
    return bool(found)


def settle(body):
    """``body`` with the markers no split took: an auto barrier left out, a user's kept."""
    def pre(st):
        if not is_marker(st):
            return None
        if const_int(st.value.args[1]) == 1:
            return evaluate_extern("__syncthreads", dtype="int32")
        return tirx.Evaluate(i32(0))

    return map_stmts(body, pre=pre)


def _register_alloc(st) -> bool:
    return isinstance(st, tirx.AllocBuffer) and not str(st.buffer.scope()).startswith("shared")


def _cut(lw, stmts, local):
    """A branch's statements cut at its markers into a tree of ("part", [statements]), ("sync",)
    and ("loop", For, tree), or None where a marker lies under a statement that not every thread
    of the enclosing context may run alike. ``local``: variables the branch defines."""
    out, cur = [], []
    for s in stmts:
        if is_marker(s):
            out += [("part", cur), ("sync",)]
            cur = []
        elif not _has_marker(s):
            cur.append(s)
        elif isinstance(s, tirx.For) and loop_alike(s, getattr(lw, "thread_vars", None) or [],
                                                    getattr(lw, "_varies", lambda e: False), local):
            inner = _cut(lw, flatten([s.body]), local)
            if inner is None:
                return None
            out += [("part", cur), ("loop", s, inner)]
            cur = []
        else:
            return None
    return out + [("part", cur)]


def loop_alike(loop, thread_vars, varies, local=()) -> bool:
    """Whether every thread runs ``loop`` alike outside the branch, so that a barrier in it can be
    split out with it: a serial or unrolled loop whose bounds read no thread index, no value that
    differs between threads (``varies``), no memory and nothing the branch defines (``local``).
    The checker's TL0404 asks the same (``analysis/divergence.py``)."""
    if loop.kind not in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED):
        return False
    return not any(uses_vars(e, thread_vars) or varies(e) or tensor_loads(e) or (local and uses_vars(e, local))
                   for e in (loop.min, loop.extent))


def _parts(tree):
    for node in tree:
        if node[0] == "part":
            yield node[1]
        elif node[0] == "loop":
            yield from _parts(node[2])


def _build(tree, cond, sync, vmap, keep_bind):
    out = []
    for node in tree:
        if node[0] == "sync":
            out.append(sync())
        elif node[0] == "loop":
            loop = node[1]
            out.append(tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind,
                                seq(_build(node[2], cond, sync, vmap, keep_bind)),
                                annotations=loop.annotations, span=loop.span))
        else:
            body = []
            for st in node[1]:
                if _register_alloc(st):
                    continue        # (declared before the parts)
                if isinstance(st, tirx.Bind) and not keep_bind(st):
                    buf = vmap[st.var].source
                    st = tirx.BufferStore(buf, st.value, [i32(0)], span=st.span)
                body.append(substitute_stmt(st, vmap) if vmap else st)
            if body:
                out.append(tirx.IfThenElse(cond, seq(body), None))
    return out


def split_if(lw, stmt, sync):
    """The lowered ``if`` ``stmt`` with the markers of its branches split out (module docstring):
    a statement, or ``stmt`` itself where there are none or the split cannot be made. ``sync()``
    builds the barrier at the level of the ``if``."""
    then = flatten([stmt.then_case])
    other = flatten([stmt.else_case]) if stmt.else_case is not None else []
    if not any(_has_marker(s) for s in then + other):
        return stmt
    local = []
    walk_stmts(stmt, lambda s: local.append(s.var) if isinstance(s, tirx.Bind) else (
        local.append(s.buffer.data) if isinstance(s, tirx.AllocBuffer) else None))
    trees = []
    for body in (then, other):
        tree = _cut(lw, body, local) if any(_has_marker(s) for s in body) else [("part", body)]
        if tree is None:
            return stmt
        trees.append(tree)
    # the condition is evaluated once, where the `if` was; a register declared in one part, and a
    # value bound in one part and read in another, live before the parts
    cv, head = stmt.condition, []
    if tensor_loads(cv) or any_expr(cv, lambda e: isinstance(e, tirx.Call)):
        cv = tirx.Var("cond", "bool")
        head.append(tirx.Bind(cv, stmt.condition, span=stmt.span))
    parts = [p for tree in trees for p in _parts(tree)]
    vmap = {}
    for k, part in enumerate(parts):
        for st in part:
            if _register_alloc(st):
                head.append(st)
            elif isinstance(st, tirx.Bind) and any(uses_vars(seq(o), [st.var]) for j, o in enumerate(parts)
                                                   if j != k and o):
                buf = tirx.decl_buffer((1,), dtype_of(st.var), st.var.name, scope="local")
                head.append(tirx.AllocBuffer(buf))
                vmap[st.var] = tirx.BufferLoad(buf, [i32(0)])

    def keep(b):
        return not any(b.var.same_as(v) for v in vmap)

    out = _build(trees[0], cv, sync, vmap, keep)
    if other:
        rest = _build(trees[1], tirx.Not(cv), sync, vmap, keep)
        first = out[0] if out else None
        if len(trees[1]) == 1 and isinstance(first, tirx.IfThenElse) and first.else_case is None:
            # no split in the else: it stays the first part's else
            out[0] = tirx.IfThenElse(cv, first.then_case, rest[0].then_case if rest else None, span=stmt.span)
        else:
            out += rest
    return seq(head + out)
