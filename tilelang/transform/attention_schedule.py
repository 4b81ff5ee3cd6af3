"""Early tile loads in one-stage attention loops and zero-stage recurrences (issues 18, 20).

``T.Pipelined(n, num_stages=1)`` (or ``num_stages=0``) is left alone by the software pipeliner
and by warp specialisation (both need two stages), so each ``T.copy`` of its body loads its tile
with cp.async and waits for it on the spot. In an attention body

    copy K -> K_s;  mask;  S = Q K_s^T;  softmax;  rescale O;  copy V -> V_s;  O += P V_s

the V tile is then fetched only after the softmax, and its latency is exposed every iteration;
in a chunked recurrence (gdn's ``chunk_delta_bwd``: six tiles per step of a 512-step loop) each
step pays one global round trip per tile, one after another. This pass issues the loads at the
top of the body instead, one cp.async group each, and has each one waited for just before the
first statement that touches its tile:

    async K;  async V;  mask;  wait<1>;  S = Q K_s^T;  softmax;  rescale O;  wait<0>;  O += P V_s

so V arrives while S = Q K^T and the softmax run. ``thread_sync`` places the barriers (after each
wait, before the readers; at the loop's end, before the next iteration's loads overwrite the tiles).

Applies to a ``T.Pipelined`` loop of zero or one stage, on sm_80 or later, without
``tl.disable_async_copy`` / ``tl.disable_attention_schedule`` / ``tl.enable_pipeline_split_groups``
(whose one-stage schedule, ``pipeline._lower_split_groups``, also prefetches the next iteration's
tiles) and, on sm_90+, without ``tl.enable_ws_single_stage`` (the loads it would move go to a TMA
producer warpgroup instead: its ``T.async_copy`` would keep the loop off that schedule), whose body's top level holds at least two gemms and whose live fragments
(``loop_fragment_registers``) fit ``REGISTER_BUDGET``. The loads moved are its global-to-shared
``T.copy`` producers (``pipelined_loop``'s: their regions read nothing the body defines) whose
tile no earlier top-level statement touches, whose source tensor is written nowhere in the loop,
whose region reads no buffer the body writes and whose rows cp.async moves without a wait of
their own (elements of 4 bytes or more, or whole 16-byte vectors: ``_whole_vectors``); the
others stay where they are. A buffer and its views (``T.view``) count as one, and a
statement that hands shared memory to a call by address counts as touching every tile. At least
two must move, one of them first touched after the body's first gemm (otherwise nothing would
overlap). Kernels with ``T.annotate_safe_value``, user barriers or cp.async calls of their own
are left alone.

A one-stage loop whose every producer moves goes one step further when the software pipeliner
can take it (``_refill_filter``): instead of the rewrite above it is marked
``pipelined_loop.REFILL_ATTR``, and ``pipeline._lower_split_groups`` gives each tile a cp.async
group of its own, waited for before its first use and loaded again for the next iteration right
after its last (upstream's schedule at num_stages=1, its TMA producer refilling K once S = Q K^T
is done):

    K(0); V(0); loop: wait K;  S = Q K^T;  sync;  K(k+1);  softmax;  wait V;  O += P V;  sync;  V(k+1)

so K's latency hides under the softmax and P V of the iteration before, not only V's under
S = Q K^T. Opt-in (``tl.enable_one_stage_refill``) until measured on the GPU: it changes 16 of
the 85 bench kernels (the widened BSHD attention, varlen, sparse MLA / DSV4 forward, the forward
kernels of the attention backward cases, fusedmoe).

Before that, on sm_90+, an element-by-element ``T.atomic_add`` of a whole fragment into a global
tensor inside a ``T.Parallel`` (attention backward's dQ accumulation) becomes the tile-level
atomic add it spells (``tile_atomics``), which packs each thread's column pairs into vector
atomics.

Contract: ``schedule(func, arch, configs)`` returns the rewritten function, or ``func`` itself
when nothing applies; the engine calls it at the start of ``analyze_kernel`` (engine/pipeline.py).
``planned_loads(func, arch, configs)`` says, for the hover (analysis/summary.py), which tiles each
rewritten or marked loop loads ahead and why the others stay.
"""

from __future__ import annotations

from tvm import ir, tirx

from tilelang import targets
from tilelang.language.loops import ORDER_ATTR, STAGE_ATTR, STAGES_ATTR
from tilelang.language.dtypes import nbytes
from tilelang.tir_utils import (analyzer, buffer_roots, const_int, evaluate_extern, map_stmts, seq, span_line,
                                tensor_loads, uses_vars, walk_stmts)
from tilelang.transform.kernel import (ALL_SCOPES, FRAGMENT_SCOPE, SAFE_VALUE_ATTR, SHARED_SCOPES, decode_region,
                                       is_parallel_nest, op_name, parallel_nest, scope_of)
from tilelang.transform.layout_inference import is_wgmma_gemm
from tilelang.transform.pass_config import PassConfigKey
from tilelang.transform.pipelined_loop import (REFILL_ATTR, PipelinedLoop, body_list, is_pipelined, is_producer,
                                               num_stages, plain_consumer)
from tilelang.transform import warp_specialize
from tilelang.transform.thread_sync import (as_async_copy, buffer_rw, is_annotation, is_async_copy,
                                            passes_shared_pointers)

DISABLE_KEY = "tl.disable_attention_schedule"
SPLIT_GROUPS_KEY = PassConfigKey.TL_ENABLE_PIPELINE_SPLIT_GROUPS.value
WS_SINGLE_STAGE_KEY = PassConfigKey.TL_ENABLE_WS_SINGLE_STAGE.value
# opt-in until measured on the GPU: one-stage loops refilled per tile (``_refill_filter``)
REFILL_KEY = PassConfigKey.TL_ENABLE_ONE_STAGE_REFILL.value
REFILL_DEFAULT = False
# one-stage attention loops given two stages (``promote_stages``): on by default since session 34's
# H200 A/B (upstream's mha_fwd_bshd 5.05 -> 3.58 ms, its causal form 2.79 -> 2.10); false turns it off
PROMOTE_KEY = PassConfigKey.TL_ENABLE_STAGE_PROMOTION.value
PROMOTE_DEFAULT = True
PROMOTE_MARGIN = 8 * 1024   # bytes of the block's shared memory left for barriers and alignment
# a loop of fewer trips (a compile-time count) keeps its one stage: there is little to load ahead,
# and the second buffers cost blocks per SM (upstream's gdn chunk_o, one trip of two gemms:
# 0.415 -> 0.62 ms promoted, session 34)
PROMOTE_MIN_TRIPS = 4
# zero-stage GEMM main loops given stages (``promote_zero_stage``)
ZERO_PROMOTE_KEY = PassConfigKey.TL_ENABLE_ZERO_STAGE_PROMOTION.value
ZERO_PROMOTE_DEFAULT = True
ZERO_PROMOTE_STAGES = 3
# ... and also a loop of one gemm among other statements (session 55; on by default since session
# 57's H100 A/B: upstream's gdn wy_fast 0.568 -> 0.503 ms, sanitizer-clean; false turns it off)
ZERO_ANY_KEY = PassConfigKey.TL_ENABLE_ZERO_STAGE_PROMOTION_ANY.value
ZERO_ANY_DEFAULT = True
# on a promoted loop: the stage count its author wrote (the hover says so; "tl." keys go at lowering)
WRITTEN_STAGES_ATTR = "tl.stages_as_written"
# set True, each leaves a one-stage loop to its own schedule (``decide_single_stage``)
STANDS_DOWN = (REFILL_KEY, SPLIT_GROUPS_KEY, DISABLE_KEY, "tl.enable_early_prologue", "tl.disable_warp_specialized",
               "tl.disable_tma_lower")
# Live fragment registers per thread (``loop_fragment_registers``) above which a loop is left as
# written: the early loads keep addresses live across the first gemm, and a body whose fragments
# already fill the register file (128x128 tiles on one warpgroup: S, O and P take 320 of 255)
# then spills twice as much.
REGISTER_BUDGET = 200
REGISTER_FILE = 255        # 32-bit registers a thread may hold (sm_80 and later)
_USER_SYNC = ("__syncthreads", "cp_async", "named_barrier", "__sync_thread_partial", "mbarrier")


def schedule(func, arch, configs=None):
    configs = configs or {}
    func = tile_atomics(func, arch)
    loop_ok = _loop_filter(func, arch, configs)
    if loop_ok is None:
        return func

    roots = buffer_roots(func.body)
    refill_ok = _refill_filter(func, configs)

    def on_loop(loop):
        plan = _plan(loop, roots) if loop_ok(loop) else None
        if plan is None:
            return loop
        if refill_ok(loop, plan):
            return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body,
                            thread_binding=loop.thread_binding, annotations={**loop.annotations, REFILL_ATTR: 1},
                            step=loop.step, span=loop.span)
        return _rewrite(loop, plan)

    body = map_stmts(func.body, loop=on_loop)
    return func if body.same_as(func.body) else func.with_body(body)


def decide_single_stage(func, arch, configs) -> dict:
    """``configs`` with ``tl.enable_ws_single_stage`` decided where the kernel leaves it unset:
    True on sm_90+ for a kernel whose one ``T.Pipelined`` loop has one stage, at least two gemms
    at its top level (attention at num_stages=1) and fragments within ``REGISTER_BUDGET``, in a
    constant grid of at most one block per SM. Such a grid runs one wave, each block's loop is all
    there is, and a TMA producer loading each tile while the consumers compute beats every thread
    loading with cp.async (H200, session 32: bench_launch's small attention, 64 blocks, 8.83 ->
    8.17 us); in a grid of many waves other blocks hide that latency (session 22: 128x128
    one-stage attention slower warp-specialised). A kernel that asks for another schedule of its
    loads (``STANDS_DOWN``: a one-stage refill, split cp.async groups, the loads as written, no TMA or
    no warp specialisation) keeps it. The engine, the checker and the hover call this before
    ``widen_threads`` and ``schedule`` and pass the result on: every pass sees one answer; where
    ``warp_specialize`` then refuses the loop, the engine lowers the kernel again with the key
    False (``engine.pipeline._lower``) and the hover describes that."""
    if configs.get(WS_SINGLE_STAGE_KEY) is not None or _sm(arch) < 90 or any(configs.get(k) for k in STANDS_DOWN):
        return configs
    if not _one_wave(func, arch):
        return configs
    loop = _one_stage_attention(func)
    if loop is None or loop_fragment_registers(func.body, loop, _threads(func.body)) > REGISTER_BUDGET:
        return configs
    return {**configs, WS_SINGLE_STAGE_KEY: True}


def _launch(body) -> list:
    """(thread tag, Var, extent) of every launch binding (``thread_extent``) in ``body``."""
    out = []
    walk_stmts(body, lambda s: out.append((str(s.node.thread_tag), s.node.var, s.value))
               if isinstance(s, tirx.AttrStmt) and s.attr_key == "thread_extent" else None)
    return out


def _one_wave(func, arch) -> bool:
    """Whether the kernel's grid is a compile-time constant of at most one block per SM."""
    extents = [const_int(e) for tag, _, e in _launch(func.body) if tag.startswith("blockIdx")]
    if not extents or None in extents:
        return False
    blocks = 1
    for n in extents:
        blocks *= n
    return blocks <= (targets.sm_count(arch or "sm_90a") or 132)


def plan_one_stage(func, arch, configs) -> tuple:
    """(``func``, ``configs``) as the compiler lowers them: ``decide_single_stage``'s configs (the
    same dict where nothing was decided), then ``promote_stages`` and ``promote_zero_stage``
    applied under them. The engine and the checker both start here."""
    decided = decide_single_stage(func, arch, configs)
    return promote_zero_stage(promote_stages(func, arch, decided), arch, decided), decided


def promote_zero_stage(func, arch, configs) -> object:
    """``func`` with each zero-stage GEMM main loop given ``ZERO_PROMOTE_STAGES`` stages (two where
    only two fit), or ``func`` itself (``tl.enable_zero_stage_promotion``, ``ZERO_PROMOTE_DEFAULT``
    unless set; sm_80+). Such a loop -- ``T.Pipelined(n, num_stages=0)`` whose body is global ->
    shared ``T.copy`` tiles followed by ``T.gemm``s of them and nothing else (upstream's split-K GEMM
    example), or, under ``tl.enable_zero_stage_promotion_any`` (``ZERO_ANY_DEFAULT``, and off with
    the first key), copies followed by one gemm among other statements that write no tensor the
    copies read (upstream's gdn wy_fast: a scaled tile, the gemm, its product stored) -- loads each
    step's tiles and waits for them before its gemm, one round trip a step;
    with stages it is the ordinary pipelined main loop (cp.async ring or TMA producer), the same
    arithmetic in the same order. Only where that cannot change what the program computes or
    whether it fits: no user barriers, cp.async or T.ws in the kernel; the loop not under an ``if``
    / ``T.ws`` block nor inside another loop; no ``order`` / ``stage`` of the user's; its body
    writes no global memory (the gemms read shared tiles into fragments); its tiles touched
    nowhere else (a ring has no one buffer to read after the loop); at least
    ``PROMOTE_MIN_TRIPS`` trips where the count is a constant; the extra buffers within the block's
    shared memory less ``PROMOTE_MARGIN``."""
    promote = bool(configs.get(ZERO_PROMOTE_KEY, ZERO_PROMOTE_DEFAULT))
    any_body = bool(configs.get(ZERO_ANY_KEY, ZERO_ANY_DEFAULT and promote))
    if not (promote or any_body) or _sm(arch) < 80 \
            or configs.get(DISABLE_KEY) or configs.get("tl.disable_async_copy") or _has_user_sync(func.body):
        return func
    guarded = _guarded_loops(func.body)
    sizes = alloc_bytes(func.body, SHARED_SCOPES)
    budget = targets.smem_per_block(arch) - PROMOTE_MARGIN
    promoted = {}

    def visit(loop):
        if not (is_pipelined(loop) and num_stages(loop) == 0) \
                or any(k in loop.annotations for k in (ORDER_ATTR, STAGE_ATTR)):
            return
        if not warp_specialize._top_level(func.body, loop) or any(loop.same_as(g) for g in guarded):
            return      # under a loop or a branch (warp specialisation's own test), or in a T.ws block
        trips = const_int(loop.extent)
        if trips is not None and trips < PROMOTE_MIN_TRIPS:
            return
        pipe = PipelinedLoop.of(loop)
        stmts = body_list(loop)
        n = len(pipe.producers)
        if pipe.guard is not None or not n or n == len(stmts) or pipe.gathers:
            return
        if any(not a.same_as(b) for a, b in zip(stmts[:n], pipe.producers)):
            return      # the copies must come first: the ring issues them ahead of the gemms
        if any(op_name(x) != "gemm" or buffer_rw(x, ("global",))[1] for x in stmts[n:]):
            if not any_body:
                return
            # a body of one gemm among other statements that writes no tensor its copies read
            sources = {decode_region(p.value.args[0]).buffer for p in pipe.producers}
            written = {b for x in stmts[n:] for b in buffer_rw(x, ("global",))[1]}
            if sum(op_name(x) == "gemm" for x in stmts[n:]) != 1 or written & sources \
                    or _carried_shared(stmts[n:]):
                return
        rest = map_stmts(func.body, pre=lambda x: _NOP if x.same_as(loop) or is_annotation(x) else None)
        outside = set().union(*buffer_rw(rest, SHARED_SCOPES))
        if set(pipe.staged) & outside:
            return      # a tile read after the loop (or filled before it) is one buffer, not a ring
        extra = sum(sizes.get(b, 1 << 30) for b in set(pipe.staged))
        used = sum(sizes.values()) + sum(grown for _, grown in promoted.values())
        for stages in (ZERO_PROMOTE_STAGES, 2):
            if used + (stages - 1) * extra <= budget:
                promoted[loop] = (stages, (stages - 1) * extra)
                return

    walk_stmts(func.body, lambda x: visit(x) if isinstance(x, tirx.For) else None)
    if not promoted:
        return func

    def on_loop(x):
        stages = next((st for lp, (st, _) in promoted.items() if lp.same_as(x)), None)
        if stages is None:
            return x
        return tirx.For(x.loop_var, x.min, x.extent, x.kind, x.body, thread_binding=x.thread_binding,
                        annotations={**x.annotations, STAGES_ATTR: stages, WRITTEN_STAGES_ATTR: 0}, step=x.step,
                        span=x.span)

    return func.with_body(map_stmts(func.body, loop=on_loop))


def _carried_shared(stmts) -> bool:
    """Whether a statement of ``stmts`` (a loop body's rest) reads a shared buffer that a later one
    writes: a value carried to the next iteration through shared memory (B's tile copied after the
    gemm that reads it), which the promotion leaves to the plain main-loop rule's shapes."""
    rw = [buffer_rw(x, SHARED_SCOPES) for x in stmts]
    later = set()
    for reads, writes in reversed(rw):
        if (reads - writes) & later:
            return True
        later |= writes
    return False


def _one_stage_attention(func):
    """The kernel's one ``T.Pipelined`` loop when it has one stage and at least two gemms at its
    top level (attention at num_stages=1), else None."""
    loops = []
    walk_stmts(func.body, lambda s: loops.append(s) if isinstance(s, tirx.For) and is_pipelined(s) else None)
    if len(loops) != 1 or num_stages(loops[0]) != 1 or sum(op_name(x) == "gemm" for x in body_list(loops[0])) < 2:
        return None
    return loops[0]


def promote_stages(func, arch, configs) -> object:
    """``func`` with its one-stage attention loop given two stages (``tl.enable_stage_promotion``,
    on unless set false; sm_90+), or ``func`` itself. ``num_stages=1`` with several gemms
    is how upstream's BSHD / GQA / varlen attention examples are written; with two stages the loop
    takes the path the two-stage BHSD example takes (a TMA producer, a ring of two K / V buffers,
    the previous P V under S = Q K^T, a persistent grid), which the one-stage loop cannot: each
    tile is loaded under the iteration before instead of waited for in its own. Applies to a kernel
    of more than one wave (or a grid of runtime size) with one such ``T.Pipelined`` loop (no
    ``order`` / ``stage`` of the user's) whose producers are global -> shared ``T.copy`` tiles a
    TMA producer can issue (``warp_specialize.coordinate_blocker``: not addressed by values the
    body computes), not left to one-stage warp specialisation (``decide_single_stage``: one-wave
    grids) or another one-stage schedule (``STANDS_DOWN``), whose shared memory with a second
    buffer of each staged tile stays ``PROMOTE_MARGIN`` under the block's budget, over a loop of
    at least ``PROMOTE_MIN_TRIPS`` trips where the count is a constant."""
    if not configs.get(PROMOTE_KEY, PROMOTE_DEFAULT) or configs.get(WS_SINGLE_STAGE_KEY) or _sm(arch) < 90 \
            or any(configs.get(k) for k in STANDS_DOWN) or _one_wave(func, arch):
        return func
    loop = _one_stage_attention(func)
    if loop is None or any(k in loop.annotations for k in (ORDER_ATTR, STAGE_ATTR)):
        return func
    trips = const_int(loop.extent)
    if trips is not None and trips < PROMOTE_MIN_TRIPS:
        return func
    pipe = PipelinedLoop.of(loop)
    staged = [decode_region(p.value.args[1]).buffer for p in pipe.producers]
    if not staged or any(scope_of(decode_region(p.value.args[0]).buffer) != "global" for p in pipe.producers):
        return func
    if warp_specialize.coordinate_blocker(func, [v for _, v, _ in _launch(func.body)], pipe.producers) is not None:
        return func     # no TMA producer for these loads (a varlen kernel's computed starts): two cp.async
        #                 stages measured slower than the one-stage schedule (mha_fwd_varlen 2.21 -> 2.42 ms)
    sizes = alloc_bytes(func.body, SHARED_SCOPES)
    extra = sum(sizes.get(b, 1 << 30) for b in set(staged))
    if sum(sizes.values()) + extra > targets.smem_per_block(arch) - PROMOTE_MARGIN:
        return func

    def on_loop(s):
        if not s.same_as(loop):
            return s
        return tirx.For(s.loop_var, s.min, s.extent, s.kind, s.body, thread_binding=s.thread_binding,
                        annotations={**s.annotations, STAGES_ATTR: 2, WRITTEN_STAGES_ATTR: 1}, step=s.step,
                        span=s.span)

    return func.with_body(map_stmts(func.body, loop=on_loop))


def planned_loads(func, arch, configs=None) -> list:
    """For the hover: (span of the loop, tiles it issues ahead, (tile, why) for each tile it
    leaves in place, whether they are refilled for the next iteration instead of issued at the top)
    for each ``T.Pipelined`` loop of ``func`` (as written) that ``schedule`` rewrites or marks;
    tiles by buffer name, in body order."""
    configs = configs or {}
    func = tile_atomics(func, arch)
    loop_ok = _loop_filter(func, arch, configs)
    out = []
    if loop_ok is None:
        return out

    roots = buffer_roots(func.body)
    refill_ok = _refill_filter(func, configs)

    def visit(s):
        if isinstance(s, tirx.For) and loop_ok(s):
            plan = _plan(s, roots)
            if plan is not None:
                stmts, moved, _, _, why = plan
                producers = PipelinedLoop.of(s).producers
                staged = [i for i, x in enumerate(stmts) if any(x.same_as(p) for p in producers) or i in why]
                name = {i: decode_region(stmts[i].value.args[1]).buffer.name for i in staged}
                out.append((s.span, [name[i] for i in staged if i in moved],
                            [(name[i], why.get(i) or "it is no plain T.copy") for i in staged if i not in moved],
                            refill_ok(s, plan)))

    walk_stmts(func.body, visit)
    return out


def _loop_filter(func, arch, configs):
    """The test a loop of ``func`` must pass before ``_plan`` looks at it, or None when the kernel
    as a whole is left alone (``schedule``'s conditions)."""
    if configs.get(DISABLE_KEY) or configs.get("tl.disable_async_copy") or _sm(arch) < 80:
        return None
    if configs.get(SPLIT_GROUPS_KEY):
        return None   # the pipeliner refills each tile for the next iteration instead (deeper)
    if configs.get(WS_SINGLE_STAGE_KEY) and _sm(arch) >= 90:
        return None   # asked for: a TMA producer warpgroup loads each tile (warp_specialize._lower_windows)
    if _has_user_sync(func.body):
        return None
    threads, sizes = _threads(func.body), fragment_bytes(func.body)

    def ok(loop):
        return (is_pipelined(loop) and num_stages(loop) <= 1
                and loop_fragment_registers(func.body, loop, threads, sizes) <= REGISTER_BUDGET)

    return ok


def _refill_filter(func, configs):
    """The test a loop that ``_plan`` rewrites must pass to be marked ``REFILL_ATTR`` instead:
    ``tl.enable_one_stage_refill`` (``REFILL_DEFAULT`` otherwise), one stage (zero-stage loops keep
    their step's loads in the step), ``tl.enable_pipeline_split_groups`` not False, no one-stage
    warp specialisation asked for, the loop under no condition (on the thread index or a T.ws
    role: the pipeliner refills only plainly lowered loops), every producer moved, the tiles first
    touched at different statements, and every other statement a plain consumer
    (``pipelined_loop.plain_consumer``: the conditions of ``pipeline._producer_uses``, so that the
    pipeliner takes the loop)."""
    if not configs.get(REFILL_KEY, REFILL_DEFAULT) or configs.get(SPLIT_GROUPS_KEY) is False \
            or configs.get(WS_SINGLE_STAGE_KEY):
        return lambda loop, plan: False
    guarded = _guarded_loops(func.body)

    def ok(loop, plan):
        stmts, moved, first, _, _ = plan
        pipe = PipelinedLoop.of(loop)
        return (num_stages(loop) == 1 and not any(loop.same_as(g) for g in guarded)
                and pipe.guard is None and len(moved) == len(pipe.producers)
                and len(set(first.values())) == len(moved) and None not in first.values()
                and all(plain_consumer(x, is_wgmma_gemm) for i, x in enumerate(stmts) if i not in moved))

    return ok


def _guarded_loops(body) -> list:
    """The ``T.Pipelined`` loops of ``body`` under an ``if`` or a ``T.ws`` block."""
    out = []

    def visit(s):
        if isinstance(s, tirx.IfThenElse) or (isinstance(s, tirx.AttrStmt) and str(s.attr_key) == "tl.ws"):
            walk_stmts(s, lambda t: out.append(t) if is_pipelined(t) else None)

    walk_stmts(body, visit)
    return out


def tile_atomics(func, arch):
    """sm_90+: a ``T.Parallel`` nest over a whole fragment whose only statement adds each element
    to a global tensor at the same tile position (attention backward's dQ accumulation,

        for i, j in T.Parallel(N, D): T.atomic_add(dQ[b, h, k * N + i, j], dq[i, j])

    ) becomes the tile-level ``T.atomic_add(dQ[b, h, k * N:(k + 1) * N, :], dq)``. The same
    element adds, one per element, in the fragment's own layout; the tile form packs each
    thread's consecutive columns into one vector atomic (``lower_copy._fragment_atomic_vector``:
    whole 32-byte sectors per warp instead of half-filled ones). Anything else is left as
    written, and so is every kernel on earlier architectures."""
    if _sm(arch) < 90:
        return func

    def on_loop(loop):
        new = _tile_atomic(loop)
        return loop if new is None else new

    body = map_stmts(func.body, loop=on_loop)
    return func if body.same_as(func.body) else func.with_body(body)


def _tile_atomic(loop):
    """The tile-level atomic add that ``loop`` (a T.Parallel nest) performs element by element,
    or None (``tile_atomics``)."""
    from tilelang.language._ops import get_op, region
    from tilelang.tir_utils import simplify, uses_vars

    if not is_parallel_nest(loop) or set(loop.annotations.keys()) != {"tl.parallel"}:
        return None
    loop_vars, extents, body = parallel_nest(loop)
    inner = loop
    for _ in range(len(loop_vars) - 1):
        inner = inner.body
        if set(inner.annotations.keys()) - {"tl.parallel"}:
            return None
    if not isinstance(body, tirx.Evaluate) or not isinstance(body.value, ir.Call):
        return None
    call = body.value
    if str(getattr(call.op, "name", "")).split(".")[-1] != "call_extern" or len(call.args) != 3 \
            or str(getattr(call.args[0], "value", "")) != "tl::atomic_add":
        return None
    addr, value = call.args[1], call.args[2]
    if not (isinstance(addr, ir.Call) and str(getattr(addr.op, "name", "")).split(".")[-1] == "address_of"
            and isinstance(addr.args[0], ir.TensorLoad) and isinstance(value, ir.TensorLoad)):
        return None
    dst, idx = addr.args[0].source, list(addr.args[0].indices)
    frag = value.source
    shape = [const_int(x) for x in frag.shape]
    ext = [const_int(x) for x in extents]
    if (scope_of(dst) != "global" or scope_of(frag) != FRAGMENT_SCOPE or str(dst.dtype) != str(frag.dtype)
            or None in shape or shape != ext or len(idx) < len(loop_vars)
            or len(value.indices) != len(loop_vars)
            or not all(isinstance(x, tirx.Var) and x.same_as(v) for x, v in zip(value.indices, loop_vars))):
        return None
    # each loop variable offsets one index of the tensor, in the loop's order (``dQ[b, k * N + i,
    # h, j]`` too); the other indices use none of them
    starts, tile, pending = [], [], list(loop_vars)
    for x in idx:
        v = pending[0] if pending and uses_vars(x, [pending[0]]) else None
        if v is None:
            if uses_vars(x, loop_vars):
                return None
            starts.append(x)
            tile.append(1)
            continue
        base = simplify(x - v)
        if uses_vars(base, loop_vars):
            return None
        starts.append(base)
        tile.append(ext[len(loop_vars) - len(pending)])
        pending.pop(0)
    if pending:
        return None
    d = region(dst, starts, tile, 3)
    s = region(frag, [0] * len(loop_vars), ext, 1)
    return tirx.Evaluate(ir.Call(get_op("atomic"), [d, s, ir.StringImm("add")], ret_ty="handle"), span=loop.span)


def _threads(body) -> float:
    """Threads of the block (nan when unknown)."""
    threads = 1
    for tag, _, e in _launch(body):
        if tag.startswith("threadIdx"):
            n = const_int(e)
            threads *= n if n else float("nan")
    return threads


def fragment_bytes(body) -> dict:
    """Bytes of each fragment the kernel allocates (unknown shapes: too many)."""
    return alloc_bytes(body, (FRAGMENT_SCOPE,))


def alloc_bytes(body, scopes) -> dict:
    """Bytes of each buffer of ``scopes`` the kernel allocates (unknown shapes: too many)."""
    out = {}

    def visit(s):
        if isinstance(s, tirx.AllocBuffer) and scope_of(s.buffer) in scopes:
            size = 1
            for d in s.buffer.shape:
                size *= const_int(d) if const_int(d) is not None else 1 << 20
            out[s.buffer] = size * nbytes(str(s.buffer.dtype))

    walk_stmts(body, visit)
    return out


def loop_fragment_registers(body, loop, threads, sizes=None) -> float:
    """The most 32-bit registers per thread that the fragments live at one top-level statement of
    ``loop`` take: a fragment the kernel also touches outside the loop (an accumulator, a running
    maximum) is live through the whole body, one touched only inside from its first to its last
    statement. Unknown shapes or thread counts count as too many. ``sizes``: ``fragment_bytes``
    of ``body``, when already known."""
    sizes = fragment_bytes(body) if sizes is None else sizes
    stmts = body_list(loop)
    outside = set().union(*buffer_rw(map_stmts(body, pre=lambda s: _NOP if s.same_as(loop) else None),
                                     (FRAGMENT_SCOPE,)))
    span = {}
    for k, s in enumerate(stmts):
        for b in set().union(*buffer_rw(s, (FRAGMENT_SCOPE,))):
            lo, _ = span.get(b, (k, k))
            span[b] = (lo, k)
    peak = 0.0
    for k in range(len(stmts)):
        live = sum(sizes.get(b, 1 << 20) for b, (lo, hi) in span.items() if b in outside or lo <= k <= hi)
        peak = max(peak, live)
    regs = peak / 4 / threads
    return regs if regs == regs else float("inf")


_NOP = tirx.Evaluate(tirx.IntImm("int32", 0))


def _sm(arch) -> int:
    digits = "".join(ch for ch in str(arch or "") if ch.isdigit())
    return int(digits) if digits else 0


def _has_user_sync(body) -> bool:
    found = []

    def visit(s):
        if isinstance(s, tirx.AttrStmt) and str(s.attr_key) == SAFE_VALUE_ATTR:
            found.append(s)
        elif isinstance(s, tirx.Evaluate):
            text = str(s.value)
            if any(key in text for key in _USER_SYNC) or is_async_copy(s):
                found.append(s)

    walk_stmts(body, visit)
    return bool(found)


def _flag(stmt) -> int:
    args = stmt.value.args
    return const_int(args[3]) if len(args) > 3 and const_int(args[3]) is not None else 0


def _plan(loop, roots):
    """(the body's top-level statements, the indices of the copies to issue at its top, {each
    such index: the index of the first statement touching its tile, or None}, the indices of the
    other statements, {index of each producer copy considered: why it stays, or None}), or None
    when the loop is left as written. ``roots``: ``buffer_roots`` of the function (a view and
    the buffer it views count as one)."""
    if not is_pipelined(loop):
        return None
    pipe = PipelinedLoop.of(loop)
    if pipe.stages > 1:
        return None
    stmts = body_list(loop)
    gemms = [i for i, s in enumerate(stmts) if op_name(s) == "gemm"]
    if len(gemms) < 2:
        return None
    # (every global -> shared copy of the body: one that reads its tile before refilling it is
    # no producer of the pipelined loop, and _blocker says why it stays)
    candidates = [i for i, s in enumerate(stmts) if op_name(s) == "copy" and _flag(s) in (0, 1)
                  and is_producer(s)]
    access = _Accesses(stmts, roots)
    bound = {s.var for s in stmts if isinstance(s, (tirx.Bind, tirx.LetStmt))}
    moved, why = [], {}
    for i in candidates:
        written = set().union(*(access.writes[j] for j in range(len(stmts)) if j != i and j not in moved))
        why[i] = _blocker(stmts, i, moved, access, written, bound)
        if why[i] is None:
            moved.append(i)
    if len(moved) < 2:
        return None
    # where each tile is first touched after the loads
    rest = [i for i in range(len(stmts)) if i not in moved]
    first = {}
    for i in moved:
        dst = decode_region(stmts[i].value.args[1]).buffer
        first[i] = next((j for j in rest if j > i and access.touches_tile(j, dst)), None)
    if not any(f is not None and f > gemms[0] for f in first.values()):
        return None
    return stmts, moved, first, rest, why


def _rewrite(loop, plan):
    """The loop with its producers issued early (``plan``: its ``_plan``)."""
    stmts, moved, first, rest, _ = plan
    # issue all loads first (in their order), then wait before each first toucher for the groups
    # issued up to its tile: wait<n> keeps the n latest groups in flight
    order = list(moved)
    waits, retired = {}, 0
    for j in rest:
        need = [k for k, i in enumerate(order) if first[i] == j]
        if need:
            upto = max(need) + 1
            if upto > retired:
                waits[j] = len(order) - upto
                retired = upto
    out = [as_async_copy(stmts[i]) for i in order]
    for j in rest:
        if j in waits:
            out.append(evaluate_extern(f"tl::cp_async_wait<{waits[j]}>", span=stmts[j].span))
        out.append(stmts[j])
    if retired < len(order):
        out.append(evaluate_extern("tl::cp_async_wait<0>"))    # a tile nothing reads: retire it
    return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, seq(out), thread_binding=loop.thread_binding,
                    annotations=loop.annotations, step=loop.step, span=loop.span)


def _blocker(stmts, i, moved, access, written, bound) -> str | None:
    """Why copy ``stmts[i]`` cannot be issued at the top of the body, after the copies ``moved``
    (all before it), or None when it can: its source must be written nowhere in the loop, its rows
    be whole vectors, its region read nothing the body computes (a buffer it writes, a scalar it
    binds), and no statement before it touch its tile. ``access``: the body's ``_Accesses``."""
    region = stmts[i].value.args[0]
    src, dst = decode_region(region), decode_region(stmts[i].value.args[1])
    if access.root(src.buffer) in access.global_writes:
        return f"the loop writes '{src.buffer.name}'"
    if not _whole_vectors(src, dst):
        return "its rows are no whole 16-byte cp.async vectors"
    if access.loads_any(region, written) or (bound and uses_vars(region, list(bound))):
        return "its rows depend on a value the iteration computes"
    tile = access.root(dst.buffer)
    for j in range(i):
        if j in moved:
            if access.root(decode_region(stmts[j].value.args[1]).buffer).same_as(tile):
                return "an earlier copy loads the same tile"     # (the later one must wait for the reads between)
        elif access.touches_tile(j, dst.buffer):
            return f"line {span_line(stmts[j].span)} touches the tile before the copy"
    return None


class _Accesses:
    """What each top-level statement of a loop body reads and writes, walked once; a view counts
    as the buffer it views (``roots``)."""

    def __init__(self, stmts, roots):
        self.roots = roots
        rw = [buffer_rw(s, ALL_SCOPES) for s in stmts]
        self.writes = [{self.root(b) for b in w} for _, w in rw]
        self.global_writes = {b for w in self.writes for b in w if scope_of(b) == "global"}
        self.shared = [{self.root(b) for b in r | w if scope_of(b) in SHARED_SCOPES} for r, w in rw]
        self.by_address = [passes_shared_pointers(s) for s in stmts]

    def root(self, buf):
        return self.roots.get(buf, buf)

    def touches_tile(self, j, buf) -> bool:
        """Whether statement j reads or writes the shared tile ``buf``; one that hands shared
        memory to a call by address may reach any tile, so it counts as touching all of them."""
        return self.by_address[j] or self.root(buf) in self.shared[j]

    def loads_any(self, expr, buffers) -> bool:
        """Whether ``expr`` reads one of ``buffers`` (roots)."""
        return any(self.root(e.source) in buffers for e in tensor_loads(expr))


def _whole_vectors(src, dst) -> bool:
    """cp.async can move the copy without its own wait (the forced form, ``T.async_copy``, fails
    on runs under 4 bytes): elements of 4 bytes or more, or rows of whole 16-byte vectors on both
    sides, starting on a vector (a start such as ``bx * 32`` proven a multiple by the analyzer)."""
    if src.dtype != dst.dtype or scope_of(src.buffer) != "global" or len(src.buffer.shape) < 1:
        return False
    size = nbytes(str(src.dtype))
    if size >= 4:
        return True
    row = const_int(src.buffer.shape[-1])
    inner = const_int(src.extents[-1]) if src.extents else None
    if row is None or inner is None or not src.starts or src.buffer.strides:
        return False
    vec = 16 // size if 16 % size == 0 else 0
    if not vec:
        return False
    ms = analyzer().modular_set(src.starts[-1])
    return row % vec == 0 and inner % vec == 0 and ms.coeff % vec == 0 and ms.base % vec == 0
