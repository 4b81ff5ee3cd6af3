"""Two clean-ups of loops around the tile lowering.

``drop_empty_loops`` (before it): a loop with a constant trip count of 0 (``T.Pipelined(T.ceildiv(K,
32))`` with ``K = 0``, ``T.serial(0)``) is removed with its body, so that no pass plans stages,
copies or address arithmetic for iterations that never run (apache-tvm's simplifier divides by
the zero extent otherwise); a serial loop of one trip from a variable start (``T.serial(s, s + 1)``)
becomes its body with the loop variable replaced by the start.

``unroll_vector_loops_with_locals`` (after it): ``v = A[i, j]`` inside ``T.vectorized`` (or a
macro called there) declares a one-element local buffer per iteration. apache-tvm 0.27's loop
vectorizer does not widen such an allocation: it keeps one element for all lanes, so every lane
reads the last lane's value (silently wrong results). A vectorized loop whose body allocates
anything is therefore emitted as an unrolled loop: each iteration gets its own variable, and nvcc
still merges adjacent loads and stores where it can. Loops without allocations are left exactly
as they are.
"""

from __future__ import annotations

from tvm import tirx

from tilelang.tir_utils import const_int, map_loops, substitute_stmt


def _allocates(stmt) -> bool:
    if isinstance(stmt, (tirx.AllocBuffer, tirx.DeclBuffer)):
        return True
    if isinstance(stmt, tirx.SeqStmt):
        return any(_allocates(s) for s in stmt.seq)
    if isinstance(stmt, tirx.IfThenElse):
        return _allocates(stmt.then_case) or (stmt.else_case is not None and _allocates(stmt.else_case))
    body = getattr(stmt, "body", None)
    return body is not None and _allocates(body)


def _unroll_if_allocating(loop):
    if loop.kind != tirx.ForKind.VECTORIZED or not _allocates(loop.body):
        return loop
    return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.UNROLLED, loop.body,
                    thread_binding=loop.thread_binding, annotations=loop.annotations, step=loop.step, span=loop.span)


def unroll_vector_loops_with_locals(stmt):
    """``stmt`` with every vectorized loop that allocates turned into an unrolled loop."""
    return map_loops(stmt, _unroll_if_allocating)


def _drop_if_empty(loop):
    trips = const_int(loop.extent)
    if trips == 0:
        return tirx.Evaluate(0, span=loop.span)
    if trips == 1 and const_int(loop.min) is None and loop.kind == tirx.ForKind.SERIAL:
        # one trip from a variable start: the body with the variable bound to the start
        # (apache-tvm's simplifier fails on such a loop: it binds the variable twice)
        return substitute_stmt(loop.body, {loop.loop_var: loop.min})
    return loop


def drop_empty_loops(stmt):
    """``stmt`` without the loops whose trip count is the constant 0, and with the single-trip
    serial loops from a variable start replaced by their body."""
    return map_loops(stmt, _drop_if_empty)


__all__ = ["drop_empty_loops", "unroll_vector_loops_with_locals"]
