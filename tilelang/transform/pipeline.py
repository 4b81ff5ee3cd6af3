"""Software pipelining of ``T.Pipelined(n, num_stages=S)`` loops.

Input: a serial loop annotated ``tl.num_stages``. Its top-level global->shared ``T.copy``s are the
producers, and so are its gathered ``T.Parallel`` copies (``PipelinedLoop.gathers``, cp.async by
``lower_gather``; not under warp specialisation or a T.ws role); every other statement is a
consumer. Output (S >= 2):

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
(``_lower_early_release``; upstream's schedule of such loops; by default only where every producer
is a plain cp.async copy, ``tl.enable_pipeline_early_release``). A global -> register ``T.copy``
among the leading register reads (a gemv's slice of x) is issued at the top of such an iteration,
before the wait, so its latency overlaps it (``early_loads``).

The shared buffers written by producers get S copies (``pipelined_loop.plan_stages``; the
producers and consumers are those of ``pipelined_loop.PipelinedLoop``). Trip counts of 1, 2 or
anything not a multiple of S are handled by the guards.

A body that is one ``if c:`` around producers and consumers (``PipelinedLoop.guard``: a
block-sparse main loop) takes the schedule above with each iteration's producers and consumers
under ``c`` of that iteration and everything else unconditional (``_producer_fn``'s guard).

Where the consumers touch the producers' tiles at different places (an attention body: K read
by S = Q K^T near the top, V only by the last gemm), each producer is a cp.async group of its own,
waited for just before the first consumer touching its tile and reissued (tile k+S into the same
stage) right after the last one, behind a barrier (``_lower_split_groups``):

    prologue: for t < S: for each producer p: if t < n: p(iteration t) into stage t; commit
    for k in [0, n):
        ... consumers before p's first use ...
        cp.async.wait_group(N_p); __syncthreads()     # p(k) has landed, for every thread
        ... consumers up to p's last use (reading stage k % S) ...
        __syncthreads(); if k+S < n: p(iteration k+S) into stage k % S; commit
        ...
    cp.async.wait_group(0)

so S tiles of each producer are in flight (one more than above) and a late producer's wait does
not hold up the consumers before its first use. This is the default for S >= 2 where the tiles are
first touched at different statements in a grid of at most one wave (``_latency_bound``;
``tl.enable_pipeline_split_groups`` unset; True also takes other grids, bodies whose tiles are
merely done with early, and one-stage loops; False never). With S = 1 (a one-stage loop, otherwise
lowered as written) the same schedule refills each tile for the next iteration right after its last
use. The producers are committed in the order of their
last uses, every iteration (empty groups past the end), so N_p, the groups committed after p(k)
when it is waited for, is the same in every iteration. A body whose last consumers touch no tile
(every tile read first, then computation without them) takes the early release above instead,
decided first: its next iteration opens with a wait and a barrier, so no barrier closes its body.
In this schedule the consumers after the last reissue end the body with a barrier only where they
and the next iteration's consumers before its first barrier touch a common shared buffer
(``_wraps_around``; a softmax's row statistics there touch none). With
gathered copies among the producers (or ``tl.enable_pipeline_tail_peel`` True; False: never) the
last S iterations, which reissue nothing, run as a loop of their own and the others reissue without
``if k+S < n`` (ptxas then may hoist a gathered copy's index loads above the barrier before the
reissue, under the last gemm).

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

import tvm
from tvm import tirx

from tilelang.tir_utils import const_int, dtype_of, evaluate_extern, i32, seq
from tilelang.transform import block_order, early_prologue, thread_sync
from tilelang.transform.kernel import (ALL_SCOPES, REGISTER_SCOPES, SHARED_SCOPES, decode_region, op_name,
                                       scope_of)
from tilelang.transform.pipelined_loop import (GATHERS_KEY, REFILL_ATTR, PipelinedLoop, body_list,
                                               plain_consumer, produced_buffer)

TAIL_PEEL_KEY = "tl.enable_pipeline_tail_peel"   # pass config: _lower_split_groups' peeled tail (unset: if gathered)


def lower_pipelined(lw, loop):
    pl = PipelinedLoop.of(loop)
    S, producers, consumers = pl.stages, list(pl.producers), list(pl.consumers)
    staged = pl.staged
    split_groups = lw.configs.get("tl.enable_pipeline_split_groups")
    gathered = False
    if pl.gathers and lw.ws is None and lw.role_block is None and lw.configs.get(GATHERS_KEY) is not False:
        # gathered T.Parallel copies are producers too (cp.async, ``lower_gather``), in body order;
        # such a loop takes the split-group schedule unless the config is set False (upstream's
        # schedule of sparse attention: two tiles of random rows in flight, not one)
        ahead = list(pl.producers) + list(pl.gathers)
        producers = [s for s in body_list(loop) if any(s.same_as(a) for a in ahead)]
        consumers = [c for c in consumers if not any(c.same_as(g) for g in pl.gathers)]
        staged = [produced_buffer(p) for p in producers]
        split_groups, gathered = split_groups is not False, True
    guard = pl.guard    # (a guarded body takes the plain schedule below, or none)
    if guard is not None and (S < 2 or lw.ws is not None or lw.role_block is not None):
        return _plain(lw, loop)
    if guard is None and S == 1 and producers and (lw.configs.get("tl.enable_pipeline_split_groups")
                                                   or REFILL_ATTR in loop.annotations):
        # one stage: each tile is refilled (for the next iteration) right after its last use (also
        # where attention_schedule marked the loop: tl.enable_one_stage_refill)
        uses = _producer_uses(lw, producers, consumers)
        if uses is not None:
            return _lower_split_groups(lw, loop, 1, producers, consumers, uses, gathered)
    if S < 2 or not producers:
        return _plain(lw, loop)
    gemm = pl.async_wgmma(lw.layouts) if guard is None else None
    if gemm is not None:
        return _lower_async_wgmma(lw, loop, S, producers, gemm)
    # a body that reads every staged tile first and then computes without them is the early
    # release's (one group per iteration, all waited for at the top; by default when its
    # producers are plain cp.async copies: no gathers, no converting copies, which load
    # synchronously and leave nothing in flight to gain); it also satisfies ``_producer_uses`` (tiles
    # done with before the last consumer), so it is decided first (per-tile groups are opt-in:
    # RESULTS.md, sessions 13-14)
    early_release = lw.configs.get("tl.enable_pipeline_early_release")
    if early_release is None:   # (the default; True also takes gathers and converting copies)
        early_release = not gathered and all(map(_asynchronous, producers))
    split = early_release_split(lw, staged, consumers) if guard is None and early_release else None
    uses = (_producer_uses(lw, producers, consumers)
            if guard is None and split is None and split_groups is not False else None)
    if uses is not None and split_groups is None and (
            len({first for first, _ in uses.values()}) < 2 or not _latency_bound(lw)):
        # unset: per-tile groups where the tiles are first read at different statements (attention's
        # K and V), not for a body reading them together, and in a grid of at most one wave, where
        # each block's load latency is the kernel's (H200, session 31: gqa_decode_split, 64 blocks,
        # 1.10x; sink_gqa_fwd_varlen, many waves, 0.965x)
        uses = None
    if uses is not None:
        return _lower_split_groups(lw, loop, S, producers, consumers, uses, gathered)
    k, start, n = loop.loop_var, lw.rewrite(loop.min), lw.rewrite(loop.extent)
    lw.bind_loop(k, n) if const_int(start) == 0 else None
    commit = evaluate_extern("tl::cp_async_commit")
    produce, bufs = _producer_fn(lw, loop, producers, guard)
    if split is not None:
        early, rest = early_loads(consumers)
        readers = [c for c in consumers[:split] if any(c.same_as(r) for r in rest)]
        rest = [c for c in consumers[split:] if any(c.same_as(r) for r in rest)]
        return _lower_early_release(lw, loop, S, produce, bufs, readers, rest, commit, early)

    prologue, nxt = _prefetch(lw, loop, produce, S - 1, S, commit)
    j = k - start
    saved_stage = dict(lw.stage)
    for b in bufs:
        lw.stage[b] = tirx.floormod(j, i32(S))
    consumer = thread_sync.lower_sequence(lw, consumers) if consumers else None
    if consumer is not None and guard is not None:
        # iteration k's consumers under c(k); commits, waits and barriers stay unconditional, so a
        # skipped iteration commits an empty group and every thread meets every barrier (the
        # condition, like the branch it came from, is the same for every thread of the block)
        consumer = tirx.IfThenElse(lw.rewrite(guard), consumer, None)
    lw.stage = saved_stage
    body = seq([nxt, commit, evaluate_extern(f"tl::cp_async_wait<{S - 1}>"), thread_sync.sync_stmt(lw), consumer,
                thread_sync.region_sync(lw)])
    new_loop = tirx.For(k, start, n, tirx.ForKind.SERIAL, body, span=loop.span)
    return seq(early_prologue.mark(lw, prologue) + [new_loop, evaluate_extern("tl::cp_async_wait<0>")])


def _asynchronous(producer) -> bool:
    """Whether a producer ``T.copy`` can go through cp.async (or TMA): global to shared, one dtype
    (a converting copy loads into registers and stores, synchronously)."""
    if op_name(producer) != "copy":
        return False
    src, dst = decode_region(producer.value.args[0]), decode_region(producer.value.args[1])
    return (scope_of(src.buffer) == "global" and scope_of(dst.buffer) in SHARED_SCOPES
            and str(src.buffer.dtype) == str(dst.buffer.dtype))


def early_release_split(lw, staged, consumers):
    """The index that splits ``consumers`` into the readers of the staged buffers and a rest that
    never touches them (``_lower_early_release``), or None where the loop keeps the plain schedule:
    no rest, no reader, a warp-specialised kernel or T.ws role, or a consumer that issues or waits
    for cp.async groups itself (it would upset the group counting)."""
    if getattr(lw, "ws", None) is not None or getattr(lw, "role_block", None) is not None:
        return None
    alias = getattr(lw, "smem_alias", None) or {}
    staged = thread_sync.widen(set(staged), alias)
    last = None
    for idx, stmt in enumerate(consumers):
        if thread_sync._async_landing(stmt, [])[1] or thread_sync._has_async_wait(stmt):
            return None
        r, w = thread_sync.shared_rw(stmt)
        if thread_sync.widen(r | w, alias) & staged:
            last = idx
    if last is None or last + 1 >= len(consumers):
        return None
    return last + 1


def _lower_early_release(lw, loop, S, produce, bufs, readers, rest, commit, early=()):
    """The schedule of a loop whose consumers read the staged tiles first (typically copies into
    registers) and then compute without them: the stage is free once every thread has read it, so
    the tile S iterations ahead goes into it right there, and S tiles (not S-1) are in flight
    while the rest of the body runs:

        prologue: tiles 0 .. S-1 into stages 0 .. S-1, each committed
        for k in [0, n):
            early(iteration k)                            # global -> register loads (early_loads)
            cp.async.wait_group(S-1); __syncthreads()     # tile k has landed, for every thread
            readers(iteration k) reading stage k % S
            __syncthreads()                               # nobody still reads stage k % S (fenced
                                                          # where the readers wrote a wgmma's tile)
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
    compute = thread_sync.lower_sequence(lw, rest) if rest else None
    issue = thread_sync.lower_sequence(lw, early) if early else None
    # the middle barrier also publishes what the readers wrote to shared memory (a tile they scale
    # for the gemm of the rest): where a wgmma reads it, the barrier is fenced (``needs_fence``)
    written = set().union(*(thread_sync.shared_rw(x)[1] for x in readers))
    body = seq([issue, evaluate_extern(f"tl::cp_async_wait<{S - 1}>"), thread_sync.sync_stmt(lw),
                read, thread_sync.fenced(lw, thread_sync.region_sync(lw), written), nxt, commit, compute])
    new_loop = tirx.For(k, start, lw.rewrite(loop.extent), tirx.ForKind.SERIAL, body, span=loop.span)
    return seq(early_prologue.mark(lw, prologue) + [new_loop, evaluate_extern("tl::cp_async_wait<0>")])


def _copy_ends(stmt):
    """(source scope, destination scope) of a ``T.copy`` statement, or None for anything else."""
    if op_name(stmt) != "copy":
        return None
    args = stmt.value.args
    return scope_of(decode_region(args[0]).buffer), scope_of(decode_region(args[1]).buffer)


def early_loads(consumers):
    """(early, rest): the consumers' global -> register ``T.copy``s that can be issued at the top of
    an early-release iteration, before its wait and barrier, and the other consumers in order.

    Such a copy (a gemv's ``T.copy(x[k * bn], x_frag)``) otherwise follows the refill, and unless
    ptxas moves it up, its load latency is paid in every iteration (the value is used right away);
    issued first, it overlaps the wait. (Not done in the plain schedule: there the load measured
    slower at the top, ptxas spreading the register reads over the computation.) Hoisted only
    over a leading run of staged shared -> register copies (nothing that computes), and only when
    nothing before it in the body touches its destination or writes what it reads (its source, the
    buffers its indices load), and no statement of the body writes its global source."""
    global_writes = set()
    for c in consumers:
        global_writes |= thread_sync.buffer_rw(c, ("global",))[1]
    early, touched, written, allocs = [], set(), set(), {}
    for stmt in consumers:
        if isinstance(stmt, tirx.AllocBuffer):      # a declaration: moves with its copy
            allocs[stmt.buffer] = stmt
            continue
        ends = _copy_ends(stmt)
        if ends is None:
            break
        reads, writes = thread_sync.buffer_rw(stmt, ALL_SCOPES)
        if ends[0] == "global" and ends[1] in REGISTER_SCOPES:
            src, dst = decode_region(stmt.value.args[0]).buffer, decode_region(stmt.value.args[1]).buffer
            if src not in global_writes and not (reads | writes) & written and not writes & touched:
                early += ([allocs[dst]] if dst in allocs else []) + [stmt]
                continue
        if ends[0] not in SHARED_SCOPES or ends[1] not in REGISTER_SCOPES:
            break
        touched |= reads | writes
        written |= writes
    rest = [c for c in consumers if not any(c.same_as(e) for e in early)]
    return early, rest


def _producer_fn(lw, loop, producers, guard=None):
    """(produce(iteration, stage), the staged buffers): the producers lowered for one iteration into
    one stage, under ``guard`` of that iteration when the body is guarded (``PipelinedLoop.guard``)."""
    k, start = loop.loop_var, lw.rewrite(loop.min)
    bufs = [produced_buffer(p) for p in producers]

    def produce(iteration, stage):
        saved_vmap, saved_stage = dict(lw.vmap), dict(lw.stage)
        lw.vmap[k] = start + iteration
        for b in bufs:
            lw.stage[b] = stage
        cond = lw.rewrite(guard) if guard is not None else None
        lw.in_producer = True
        try:
            body = seq([lw.lower(p) for p in producers])
            return body if cond is None else tirx.IfThenElse(cond, body, None)
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
    before = _before_end(lw, k, start, ahead, n)
    with lw.an.constraint_scope(before):
        nxt = produce(j + ahead, tirx.floormod(j + ahead, i32(S)))
    return prologue, tirx.IfThenElse(before, nxt, None)


def _before_end(lw, kv, start, ahead, n):
    """``kv - start + ahead < n`` written as a bound of the loop variable, ``kv < n + start - ahead``
    (simplified): the analyzer's integer bounds take a constraint on a variable, not on an
    expression of it, so a copy's bound check of tile k + ahead then proves in the loop (where
    ``(k + 1) < 8`` left ``k`` up to 7 and the check, and its conditional cp.async, in place)."""
    return tirx.LT(kv, lw.an.simplify(n + start - ahead))


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
    return seq(early_prologue.mark(lw, prologue) + [new_loop, wait(0), evaluate_extern("tl::cp_async_wait<0>")])


def _plain(lw, loop):
    # (bounded like any loop: a T.Parallel in the body reading a global tile indexed by the loop
    # variable then needs no bounds guard, and its accesses can be vectorized)
    lw.bind_loop(loop.loop_var, lw.rewrite(loop.extent)) if const_int(lw.rewrite(loop.min)) == 0 else None
    body = thread_sync.lower_loop_body(lw, loop.body)
    return tirx.For(loop.loop_var, lw.rewrite(loop.min), lw.rewrite(loop.extent), tirx.ForKind.SERIAL, body,
                    span=loop.span)


def _latency_bound(lw) -> bool:
    """Whether the kernel's grid is a constant of at most one wave of blocks (block_order.grid_waves)."""
    waves = block_order.grid_waves(lw)
    return waves is not None and waves <= 1.0


def _producer_uses(lw, producers, consumers):
    """{producer index: (first, last) consumer index touching its tile} where
    ``_lower_split_groups`` applies and gains something, else None. Applies when: a plainly
    lowered loop (no warp specialisation, no condition on the thread index around it); every
    producer fills a tile of its own that some consumer touches; the consumers' shared-memory
    accesses are all visible as tile operands or element accesses (no raw calls, no asynchronous
    wgmma or T.async_copy whose reads or writes would outlast their statement, no cp.async of their
    own that would shift the group count, no user barriers); and either some producer's tile is
    done with before the last consumer, or the producers are first touched at different places."""
    if (not producers or not consumers or lw.ws is not None or lw.role_block is not None or lw.thread_conds
            or lw.thread_guard is not None or lw.thread_region is not None):
        return None
    bufs = [produced_buffer(p) for p in producers]
    if len(set(bufs)) != len(bufs):
        return None
    if any(not _plain_consumer(lw, c) for c in consumers):
        return None
    alias = getattr(lw, "smem_alias", None) or {}
    touched = []
    for c in consumers:
        r, w = thread_sync.shared_rw(c)
        touched.append(r | w)
    uses = {}
    for i, b in enumerate(bufs):
        mine = {b} | set(alias.get(b, set()))
        at = [m for m, t in enumerate(touched) if t & mine]
        if not at:
            return None
        uses[i] = (at[0], at[-1])
    if any(last < len(consumers) - 1 for _, last in uses.values()) or len({f for f, _ in uses.values()}) > 1:
        return uses
    return None


def _plain_consumer(lw, stmt) -> bool:
    """Whether ``stmt``'s shared-memory accesses all happen within it, and it issues no cp.async
    group of its own (see ``_producer_uses``)."""

    def in_flight(gemm):
        plan = lw.layouts.gemms.get(gemm)
        return plan is None or plan.no_wait

    return plain_consumer(stmt, in_flight)


def _produce_one(lw, loop, producer, iteration, stage):
    """``producer`` lowered for ``iteration`` into ``stage`` of its tile."""
    k, start = loop.loop_var, lw.rewrite(loop.min)
    buf = produced_buffer(producer)
    saved_vmap, saved_stage = dict(lw.vmap), dict(lw.stage)
    lw.vmap[k] = start + iteration
    lw.stage[buf] = stage
    lw.in_producer = True
    try:
        return lw.lower(producer)
    finally:
        lw.in_producer = False
        lw.vmap, lw.stage = saved_vmap, saved_stage


def _wraps_around(lw, head, tail, produced) -> bool:
    """Whether the consumers after the last issue (``tail``; with the tiles just issued counted as
    written) may race with the next iteration's consumers before its first barrier (``head``;
    barriers inside them make it more than runs before the first). Only then does the
    iteration end with a barrier: a softmax's row statistics after the last issue, say, touch no
    shared memory (deepseek_v4's sparse attention: one barrier fewer per iteration)."""
    alias = getattr(lw, "smem_alias", None) or {}

    def accesses(stmts):
        r, w = set(), set()
        for s in stmts:
            sr, sw = thread_sync.shared_rw(s)
            r, w = r | sr, w | sw
        return thread_sync.widen(r, alias), thread_sync.widen(w, alias)

    head_r, head_w = accesses(head)
    tail_r, tail_w = accesses(tail)
    return thread_sync.conflict(head_r, head_w, tail_r, tail_w | thread_sync.widen(set(produced), alias))


def _lower_split_groups(lw, loop, S, producers, consumers, uses, gathered=False):
    """The pipelined loop with one cp.async group per producer (module docstring); ``gathered``:
    some producers are gathered copies (the tail peel's default)."""
    k, start, n = loop.loop_var, lw.rewrite(loop.min), lw.rewrite(loop.extent)
    lw.bind_loop(k, n) if const_int(start) == 0 else None
    commit = evaluate_extern("tl::cp_async_commit")
    P = len(producers)
    order = sorted(range(P), key=lambda i: (uses[i][1], i))        # commit order: by last use
    pos = {i: r for r, i in enumerate(order)}
    prologue = []
    for t in range(S):
        for i in order:
            body = _produce_one(lw, loop, producers[i], i32(t), i32(t))
            if not lw.prove(tirx.LT(i32(t), n)):
                body = tirx.IfThenElse(tirx.LT(i32(t), n), body, None)
            prologue += [body, commit]
    bufs = [produced_buffer(p) for p in producers]
    # the consumers before the first barrier of an iteration: the one a wait precedes is after it,
    # the last user of a tile (the barrier before its reissue) before it
    first_barrier = next((m + (not any(uses[i][0] == m for i in range(P))) for m in range(len(consumers))
                          if any(uses[i][0] == m or uses[i][1] == m for i in range(P))), len(consumers))
    last_issue = max(uses[i][1] for i in range(P))

    def iteration(kv, issue):
        """One iteration's statements over loop variable ``kv``; ``issue``: None (the last S
        iterations of a peeled loop: commits only), "guarded" (reissues under ``j + S < n``) or
        "always" (the first n - S iterations of a peeled loop)."""
        j = kv - start
        saved_stage, saved_vmap = dict(lw.stage), dict(lw.vmap)
        for b in bufs:
            lw.stage[b] = tirx.floormod(j, i32(S))
        if not kv.same_as(k):
            lw.vmap[k] = kv
        out, segment, ends_with_issue = [], [], False
        tail = set()    # the shared buffers written since the last barrier (its proxy fence)

        def flush():
            nonlocal segment, tail
            if segment:
                lowered, tail = thread_sync.lower_sequence_written(lw, segment)
                out.append(lowered)
                segment = []

        for m, c in enumerate(consumers):
            waiting = [i for i in range(P) if uses[i][0] == m]
            if waiting:
                flush()
                # groups committed after p(k) when it is waited for: the S*P of the prologue and of
                # the iterations since, less those not yet reissued in this iteration (p's followers
                # in commit order whose last use is not before here)
                def after(i):
                    reissued = sum(1 for q in range(P) if uses[q][1] < m)
                    return S * P - 1 - pos[i] + reissued
                out += [evaluate_extern(f"tl::cp_async_wait<{min(after(i) for i in waiting)}>"),
                        thread_sync.sync_stmt(lw)]
                tail = set()
            segment.append(c)
            ends_with_issue = False
            issuing = [i for i in order if uses[i][1] == m]
            if issuing:
                flush()
                out.append(thread_sync.sync_stmt(lw, tail))     # every thread is done with stage k % S
                tail = set()
                for i in issuing:
                    if issue is not None:
                        before = _before_end(lw, kv, start, S, n)
                        with lw.an.constraint_scope(before):
                            nxt = _produce_one(lw, loop, producers[i], j + S, tirx.floormod(j, i32(S)))
                        out.append(nxt if issue == "always" else tirx.IfThenElse(before, nxt, None))
                    out.append(commit)      # (an empty group past the end keeps the counts)
                ends_with_issue = True
        flush()
        lw.stage, lw.vmap = saved_stage, saved_vmap
        if not ends_with_issue and _wraps_around(lw, consumers[:first_barrier], consumers[last_issue + 1:], bufs):
            # (consumers after every tile's last use: with early release on, ``lower_pipelined``
            # gives such loops that schedule instead; here the barrier keeps this one safe)
            out.append(thread_sync.region_sync(lw))   # the next iteration's first statements may overwrite
        return seq(out)

    peel = lw.configs.get(TAIL_PEEL_KEY)
    if not (gathered if peel is None else peel):
        loops = [tirx.For(k, start, n, tirx.ForKind.SERIAL, iteration(k, "guarded"), span=loop.span)]
    else:
        # the last S iterations issue nothing: peeled into a loop of their own, the first n - S
        # reissue unconditionally, so ptxas may hoist a gathered copy's index loads above the
        # barrier before the reissue, under the last gemm (as upstream's unrolled epilogue has it)
        zero = tirx.IntImm(dtype_of(n), 0)
        main = lw.an.simplify(tirx.Max(n - tirx.IntImm(dtype_of(n), S), zero))
        kt = tirx.Var(f"{k.name}_tail", k.ty)
        lw.an.bind(kt, tvm.ir.Range.from_min_extent(start + main, n - main))
        loops = []
        if not lw.prove(tirx.LE(main, zero)):
            with lw.an.constraint_scope(_before_end(lw, k, start, S, n)):
                loops.append(tirx.For(k, start, main, tirx.ForKind.SERIAL, iteration(k, "always"), span=loop.span))
        loops.append(tirx.For(kt, start + main, lw.an.simplify(n - main), tirx.ForKind.SERIAL,
                              iteration(kt, None), span=loop.span))
    return seq(early_prologue.mark(lw, prologue) + loops + [evaluate_extern("tl::cp_async_wait<0>")])
