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

When the consumers first read the staged tiles (typically copies into registers) and the rest of
the body never touches them, a stage is free as soon as every thread has read it: the tile S
iterations ahead goes into it there, so S tiles (not S-1) are in flight while the rest computes
(``_lower_early_release``; upstream's schedule of such loops).

The shared buffers written by producers get S copies (``pipelined_loop.plan_stages``; the
producers and consumers are those of ``pipelined_loop.PipelinedLoop``). Trip counts of 1, 2 or
anything not a multiple of S are handled by the guards.

On sm_90a, a loop whose only consumer is one wgmma ``T.gemm`` from shared memory (the GEMM main
loop) keeps one wgmma in flight while the next tile's copies are issued (S >= 3):

    prologue: tiles 0 .. S-3 into stages 0 .. S-3, each committed
    for k in [0, n):
        cp.async.wait_group(S-3); fence.proxy.async; __syncthreads()
                                    # tile k is visible to the async proxy, and every thread has
                                    # retired wgmma(k-2): its stage is free
        if k+S-2 < n: producers(iteration k+S-2) into stage (k+S-2) % S
        commit
        wgmma(k) issued asynchronously; wgmma.wait_group(1)   # wgmma(k-1) done in this thread
    wgmma.wait_group(0); cp.async.wait_group(0)
"""

from __future__ import annotations

from tvm import tirx

from tilelang.tir_utils import const_int, evaluate_extern, i32, seq
from tilelang.transform import thread_sync
from tilelang.transform.kernel import decode_region
from tilelang.transform.pipelined_loop import PipelinedLoop


def lower_pipelined(lw, loop):
    pl = PipelinedLoop.of(loop)
    S, producers, consumers = pl.stages, list(pl.producers), list(pl.consumers)
    if S < 2 or not producers:
        return _plain(lw, loop)
    gemm = pl.async_wgmma(lw.layouts)
    if gemm is not None:
        return _lower_async_wgmma(lw, loop, S, producers, gemm)
    k, start, n = loop.loop_var, lw.rewrite(loop.min), lw.rewrite(loop.extent)
    lw.bind_loop(k, n) if const_int(start) == 0 else None
    commit = evaluate_extern("tl::cp_async_commit")
    produce, bufs = _producer_fn(lw, loop, producers)
    split = early_release_split(lw, pl.staged, consumers)
    if split is not None:
        return _lower_early_release(lw, loop, S, produce, bufs, consumers[:split], consumers[split:], commit)

    prologue, nxt = _prefetch(lw, loop, produce, S - 1, S, commit)
    j = k - start
    saved_stage = dict(lw.stage)
    for b in bufs:
        lw.stage[b] = tirx.floormod(j, i32(S))
    consumer = thread_sync.lower_sequence(lw, consumers) if consumers else None
    lw.stage = saved_stage
    body = seq([nxt, commit, evaluate_extern(f"tl::cp_async_wait<{S - 1}>"), thread_sync.sync_stmt(lw), consumer,
                thread_sync.region_sync(lw)])
    new_loop = tirx.For(k, start, n, tirx.ForKind.SERIAL, body, span=loop.span)
    return seq(prologue + [new_loop, evaluate_extern("tl::cp_async_wait<0>")])


def early_release_split(lw, staged, consumers):
    """The index that splits ``consumers`` into the readers of the staged buffers and a rest that
    never touches them (``_lower_early_release``), or None where the loop keeps the plain schedule:
    no rest, no reader, a warp-specialised kernel or T.ws role, or a consumer that issues or waits
    for cp.async groups itself (it would upset the group counting)."""
    if getattr(lw, "ws", None) is not None or getattr(lw, "role_block", None) is not None:
        return None
    alias = getattr(lw, "smem_alias", None) or {}
    staged = thread_sync._widen(set(staged), alias)
    last = None
    for idx, stmt in enumerate(consumers):
        if thread_sync._async_landing(stmt, [])[1] or thread_sync._has_async_wait(stmt):
            return None
        r, w = thread_sync.shared_rw(stmt)
        if thread_sync._widen(r | w, alias) & staged:
            last = idx
    if last is None or last + 1 >= len(consumers):
        return None
    return last + 1


def _lower_early_release(lw, loop, S, produce, bufs, readers, rest, commit):
    """The schedule of a loop whose consumers read the staged tiles first (typically copies into
    registers) and then compute without them: the stage is free once every thread has read it, so
    the tile S iterations ahead goes into it right there, and S tiles (not S-1) are in flight
    while the rest of the body runs:

        prologue: tiles 0 .. S-1 into stages 0 .. S-1, each committed
        for k in [0, n):
            cp.async.wait_group(S-1); __syncthreads()     # tile k has landed, for every thread
            readers(iteration k) reading stage k % S
            __syncthreads()                               # nobody still reads stage k % S
            if k+S < n: producers(iteration k+S) into stage k % S
            commit                                        # always: uniform group counting
            rest(iteration k)                             # no staged buffer
        cp.async.wait_group(0)

    The rest's shared accesses are fenced from the next iteration's by its first barrier, and
    from the readers' by the middle one."""
    k, start = loop.loop_var, lw.rewrite(loop.min)
    prologue, nxt = _prefetch(lw, loop, produce, S, S, commit)
    j = k - start
    saved_stage = dict(lw.stage)
    for b in bufs:
        lw.stage[b] = tirx.floormod(j, i32(S))
    read = thread_sync.lower_sequence(lw, readers)
    lw.stage = saved_stage
    compute = thread_sync.lower_sequence(lw, rest)
    body = seq([evaluate_extern(f"tl::cp_async_wait<{S - 1}>"), thread_sync.sync_stmt(lw), read,
                thread_sync.region_sync(lw), nxt, commit, compute])
    new_loop = tirx.For(k, start, lw.rewrite(loop.extent), tirx.ForKind.SERIAL, body, span=loop.span)
    return seq(prologue + [new_loop, evaluate_extern("tl::cp_async_wait<0>")])


def _producer_fn(lw, loop, producers):
    k, start = loop.loop_var, lw.rewrite(loop.min)
    bufs = [decode_region(p.value.args[1]).buffer for p in producers]

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

    return produce, bufs


def _prefetch(lw, loop, produce, ahead, S, commit):
    """(prologue, in-loop producer): tiles 0 .. ahead-1 into their stages before the loop, each
    committed; iteration k produces tile k+ahead into stage (k+ahead) % S, guarded by the trip count."""
    k, start, n = loop.loop_var, lw.rewrite(loop.min), lw.rewrite(loop.extent)
    prologue = []
    for s in range(ahead):
        body = produce(i32(s), i32(s))
        if not lw.prove(tirx.LT(i32(s), n)):
            body = tirx.IfThenElse(tirx.LT(i32(s), n), body, None)
        prologue += [body, commit]
    j = k - start
    with lw.an.constraint_scope(tirx.LT(j + ahead, n)):
        nxt = produce(j + ahead, tirx.floormod(j + ahead, i32(S)))
    return prologue, tirx.IfThenElse(tirx.LT(j + ahead, n), nxt, None)


def wgmma_wait(lw, gemm, pending: int):
    """``wgmma_wait<pending>`` for the asynchronous ``gemm``, pinning its accumulator registers."""
    c_buf = decode_region(gemm.value.args[2]).buffer
    c_ptr = tirx.address_of(tirx.BufferLoad(lw.frag[c_buf], [i32(0)]))
    return evaluate_extern(f"tl::wgmma_wait<{pending}, {lw.layouts.fragments[c_buf].local_size}>", c_ptr)


def _lower_async_wgmma(lw, loop, S, producers, gemm):
    k, start, n = loop.loop_var, lw.rewrite(loop.min), lw.rewrite(loop.extent)
    lw.bind_loop(k, n) if const_int(start) == 0 else None
    produce, bufs = _producer_fn(lw, loop, producers)
    commit = evaluate_extern("tl::cp_async_commit")
    prologue, nxt = _prefetch(lw, loop, produce, S - 2, S, commit)
    j = k - start
    saved_stage = dict(lw.stage)
    for b in bufs:
        lw.stage[b] = tirx.floormod(j, i32(S))
    issue = lw.lower_gemm(gemm, asynchronous=True)
    lw.stage = saved_stage
    wait = lambda pending: wgmma_wait(lw, gemm, pending)  # noqa: E731
    body = seq([evaluate_extern(f"tl::cp_async_wait<{S - 3}>"), thread_sync.sync_stmt(lw), nxt, commit,
                issue, wait(1)])
    new_loop = tirx.For(k, start, n, tirx.ForKind.SERIAL, body, span=loop.span)
    return seq(prologue + [new_loop, wait(0), evaluate_extern("tl::cp_async_wait<0>")])


def _plain(lw, loop):
    body = thread_sync.lower_loop_body(lw, loop.body)
    return tirx.For(loop.loop_var, lw.rewrite(loop.min), lw.rewrite(loop.extent), tirx.ForKind.SERIAL, body,
                    span=loop.span)
