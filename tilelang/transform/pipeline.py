"""Software pipelining of ``T.Pipelined(n, num_stages=S)`` loops.

Input: a serial loop annotated ``tl.num_stages``. Its top-level global->shared ``T.copy``s are the
producers; every other statement is a consumer. Output (S >= 2):

    prologue: for s < S-1: if s < n: producers(iteration s) into stage s; commit
    for k in [0, n):
        if k+S-1 < n: producers(iteration k+S-1) into stage (k+S-1) % S
        commit                      # always, so group counting stays uniform
        cp.async.wait_group(S-1)    # iteration k's group has landed
        __syncthreads()             # ... for every thread
        consumers(iteration k) reading stage k % S
        __syncthreads()             # nobody still reads the stage the next producer overwrites
    cp.async.wait_group(0)

The shared buffers written by producers get S copies (``plan_stages``). Trip counts of 1, 2 or
anything not a multiple of S are handled by the guards.
"""

from __future__ import annotations

from tvm import tirx

from tilelang.transform import thread_sync
from tilelang.transform.ir_utils import const_int, evaluate_extern, i32, seq, walk_stmts
from tilelang.transform.kernel import SHARED_SCOPES, decode_region, op_name, scope_of


def _num_stages(loop) -> int:
    value = loop.annotations.get("tl.num_stages")
    return int(value) if value is not None else 0


def _is_producer(stmt) -> bool:
    if op_name(stmt) != "copy":
        return False
    src, dst = decode_region(stmt.value.args[0]), decode_region(stmt.value.args[1])
    return scope_of(src.buffer) == "global" and scope_of(dst.buffer) in SHARED_SCOPES


def _body_list(loop):
    return list(loop.body.seq) if isinstance(loop.body, tirx.SeqStmt) else [loop.body]


def plan_stages(info) -> dict:
    """Shared buffer -> number of copies, for buffers filled by pipelined producers."""
    stages = {}

    def visit(s):
        if isinstance(s, tirx.For) and _num_stages(s) >= 2:
            for p in _body_list(s):
                if _is_producer(p):
                    buf = decode_region(p.value.args[1]).buffer
                    stages[buf] = max(stages.get(buf, 1), _num_stages(s))

    walk_stmts(info.body, visit)
    return stages


def lower_pipelined(lw, loop):
    S = _num_stages(loop)
    stmts = _body_list(loop)
    producers = [s for s in stmts if _is_producer(s)]
    if S < 2 or not producers:
        return _plain(lw, loop)
    consumers = [s for s in stmts if not _is_producer(s)]
    k, start, n = loop.loop_var, lw.rewrite(loop.min), lw.rewrite(loop.extent)
    bufs = [decode_region(p.value.args[1]).buffer for p in producers]
    lw.bind_loop(k, n) if const_int(start) == 0 else None
    commit = evaluate_extern("tl::cp_async_commit")

    def produce(iteration, stage):
        saved_vmap, saved_stage = dict(lw.vmap), dict(lw.stage)
        lw.vmap[k] = start + iteration
        for b in bufs:
            lw.stage[b] = stage
        lw.in_producer = True
        try:
            return seq([lw.lower(p) for p in producers])
        finally:
            lw.in_producer = False
            lw.vmap, lw.stage = saved_vmap, saved_stage

    prologue = []
    for s in range(S - 1):
        body = produce(i32(s), i32(s))
        if not lw.prove(tirx.LT(i32(s), n)):
            body = tirx.IfThenElse(tirx.LT(i32(s), n), body, None)
        prologue += [body, commit]
    j = k - start
    with lw.an.constraint_scope(tirx.LT(j + (S - 1), n)):
        nxt = produce(j + (S - 1), tirx.floormod(j + (S - 1), i32(S)))
    nxt = tirx.IfThenElse(tirx.LT(j + (S - 1), n), nxt, None)
    saved_stage = dict(lw.stage)
    for b in bufs:
        lw.stage[b] = tirx.floormod(j, i32(S))
    consumer = thread_sync.lower_sequence(lw, consumers) if consumers else None
    lw.stage = saved_stage
    sync = thread_sync.sync_stmt()
    body = seq([nxt, commit, evaluate_extern(f"tl::cp_async_wait<{S - 1}>"), sync, consumer, sync])
    new_loop = tirx.For(k, start, n, tirx.ForKind.SERIAL, body, span=loop.span)
    return seq(prologue + [new_loop, evaluate_extern("tl::cp_async_wait<0>")])


def _plain(lw, loop):
    body = thread_sync.lower_loop_body(lw, loop.body)
    return tirx.For(loop.loop_var, lw.rewrite(loop.min), lw.rewrite(loop.extent), tirx.ForKind.SERIAL, body,
                    span=loop.span)
