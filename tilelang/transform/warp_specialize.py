"""Warp specialisation of an sm_90a pipelined loop (the GEMM main loop, attention's KV loop): a
TMA producer warpgroup and mbarriers. A kernel that synchronises itself (``T.ws`` roles,
``T.alloc_barrier`` mbarriers, ``T.tma_copy`` loads: ``user_ws``) is left as written, and a
``T.ClusterKernel`` keeps its own cluster shape and grid.

Applies to a kernel whose gemms take the wgmma path and which has exactly one ``T.Pipelined``
loop, at the top level of the kernel body, whose producers are whole-tile copies of 2- to 5-D 16- or 8-bit
global tensors with static shapes (a rows x columns tile, any other index fixed) into
slab-swizzled gemm operands (what a TMA box writes) or, with a general body, contiguous runs
of a tensor into plain tiles (attention backward's ``lse`` / ``Delta``: one unswizzled box each,
``_row_spec``, or a 1-D bulk copy where no tensor map fits, ``_bulk_bytes``), and
whose consumers are either one wgmma gemm from shared memory into a float accumulator
(``PipelinedLoop.single_wgmma``: the GEMM main loop, below) or any statements that only read the
staged tiles, which are used nowhere else (the general body: flash attention's two gemms and
its softmax). ``tl.disable_tma_lower`` or ``tl.disable_warp_specialized`` keep the
cp.async path. The block gets one more warpgroup (threads ``T .. T+127``):

    prelude (all threads): thread 0 inits full[s] (count 1) and empty[s] (count T);
                           fence_barrier_init; __syncthreads
    if threadIdx.x >= T:                          # producer warpgroup
        setmaxnreg_dec<40>  (T == 256, or a pair of blocks per SM: ``plan_pair``; <24> for an
                            attention block alone on its SM: ``plan_single_wave``)
        if threadIdx.x == T:
            for k in [0, n):  s = k % S
                mbarrier_wait(empty[s], ((k / S) & 1) ^ 1)
                mbarrier_arrive_expect_tx(full[s], bytes of all tiles)
                tma_load_<rank>d per swizzle slab of each tile, completing on full[s]
    else:                                         # consumer warpgroups
        setmaxnreg_inc<232> (T == 256; <216> in a pair; <240> alone on its SM)
        for k in [0, n):  s = k % S
            mbarrier_wait(full[s], (k / S) & 1)
            wgmma(k) issued asynchronously; wgmma_wait<1>      # wgmma(k-1) retired in this warp
            if k > 0: mbarrier_arrive(empty[(k-1) % S])         # every consumer thread
        wgmma_wait<0>

S is the ring's buffer count: num_stages, or one more for the GEMM main loop where shared memory
allows (``plan_ring``), since the consumers hold two stages while a wgmma group is in flight. A
GEMM main loop with one consumer warpgroup of at most 128x128 float accumulators runs two blocks
per SM under ``__launch_bounds__(256, 2)`` (``plan_pair``), and so does a general body on one
consumer warpgroup that has 1-D row loads and fragments within budget (``_general_pair_candidate``).

With a general body the consumer loop is ``mbarrier_wait(full[s]); body (its gemms wait for
their wgmma); mbarrier_arrive(empty[s])``: the stage is released at the end of the iteration
that read it, and the producer runs up to S tiles ahead.

Every consumer thread arrives on an empty barrier (its count is T), unpredicated: ptxas keeps an
unconditional arrive where it is written, right after the statement that last reads the slot,
but sinks one predicated on the lane (``if lane == 0``, one arrival per warp) below the
arithmetic that follows, down to the next synchronising instruction (attention's K went back
after the softmax instead of before it, and the producer loaded the next K that much later).
Each thread's arrive also releases its own reads of the slot, which a lane-0 arrive does only
after a ``__syncwarp`` (``fence_warp_releases``: clusters only, where lanes 0 and 1 of each warp
arrive, one on each block). The consumer
warpgroups meet no barrier inside the loop: they drift apart, and one's softmax overlaps the
other's wgmma. (Making them take turns at the tensor cores with named barriers, as
FlashAttention-3's ping-pong does, measured slower here: 0.77x SDPA against 0.97x with
synchronous wgmma, and 8 % slower on top of the overlap below.)

When the body ends in a gemm whose operands the start of the body does not touch (attention's
O += P V), that gemm of iteration k-1 runs asynchronously under the first gemm and the softmax of
iteration k (``plan_overlap``, ``_lower_overlapped``); the tiles only it reads (V) then get full /
empty barriers of their own (``WsPlan.groups``), so that K's stage is released as soon as
S = Q K^T retired.

A GEMM main loop whose body is one ``if c:`` around its copies and gemm (``PipelinedLoop.guard``:
block-sparse GEMM), ``c`` reading global memory only, runs the same way with ``c`` around each
role's iteration; each role counts the iterations it ran (``_TileCounter``) and that count, not k,
names the ring slot and phase, so a skipped tile takes no slot and the producer runs up to S
tiles that do run ahead (neither persistent nor clustered).

The loop may also run persistent (``Persistent``, ``_persist``): ``min(tiles, SMs)`` blocks,
each looping over tiles ``blockIdx.x + it * gridDim.x`` in both roles, the ring slot of
iteration k of the it-th tile being ``it * n + k``. Where the trip count depends on blockIdx.x
and row blocks x and gx - 1 - x together run the same count for every x (causal attention:
``paired_rows``), the unit is such a pair, its two tiles run one after the other, and each role
counts the ring slots it used instead; the last rounds' pairs are dealt out as single tiles, longest
first (``_PairedTail``), so that no block ends a whole pair after the others. With
``tl.enable_warpgroup_pingpong`` (``_Pingpong``; by default in the paired schedule only) the two
consumer warpgroups of an overlapped loop take turns at their gemm issues through two named barriers.
With ``tl.cluster_multicast`` (experimental) a GEMM runs in clusters of two blocks that load the
operand tiles they share half each with TMA multicast (``Cluster``: persistent, tiles t and t ^ 1,
per-tile flags; or one tile a block, pairs along blockIdx.y).

A whole tile copied in front of a general loop and read only by it (attention's Q: ``_heads``)
is the producer's too: it loads it with TMA before the tile's ring loads, on a full / empty
pair after the ring's barriers; the consumers wait for it in front of the loop and, in a
persistent kernel, give it back right after the loop, so the next tile's Q lands while they
finish P V and store O (which then gets bytes of its own instead of Q's). Where two buffers of
them fit as well (``plan_heads``: two stages of K and V), tile it reads buffer it % 2 and the
producer loads the next tile's as soon as it has issued this tile's ring loads. Where not even
one fits beside O (three stages of K and V), O keeps Q's bytes and Q goes back at the end of the tile.

Every other statement of the kernel runs on the consumer threads only: ``guard_consumers``
moves the statements around the loop into the consumer branch (so the accumulator never lives
across the role split, where the producer's 40-register budget would apply), keeping bindings of
pure index arithmetic and buffer declarations in front; consumer barriers become named barrier 1
over T threads (``thread_sync.sync_stmt``). Each TMA source gets a tensor map built on the host at launch
(``KernelArtifact.tensormaps``), passed as a ``__grid_constant__ CUtensorMap`` kernel parameter
that the device code names through ``TL_TMAP(j)`` (``codegen.cuda``); the boxes and their loads are
``tma``'s. The loop's stages, producers and consumers are its ``pipelined_loop.PipelinedLoop``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from tvm import ir, tirx

from tilelang import targets
from tilelang.language.dtypes import nbytes
from tilelang.tir_utils import (const_int, evaluate_extern, extern_name, flatten, has_load, i32, map_stmts, seq,
                                substitute, substitute_stmt, tensor_loads, tvm_ffi_walk, uses_vars, walk_stmts)
from tilelang.transform import block_order, pipeline, smem_plan, thread_regions, thread_sync, tma
from tilelang.transform.kernel import FRAGMENT_SCOPE, SHARED_SCOPES, decode_region, is_parallel_nest, op_name, scope_of
from tilelang.transform.pass_config import PassConfigKey
from tilelang.transform.pipelined_loop import PipelinedLoop, pipelined_loops

PRODUCER_THREADS = 128
# a one-stage general loop body (attention at num_stages=1) runs warp-specialised with a full /
# empty pair per tile group (``_lower_windows``) instead of keeping the cp.async path: as set, or
# where unset as ``attention_schedule.decide_single_stage`` decided (one-wave grids)
SINGLE_STAGE_KEY = "tl.enable_ws_single_stage"
# a general consumer body releases its stage right after the last statement that reads a staged
# tile instead of at the end of the body (``_early_release_at``); on by default since session 25's
# H200 A/B (attention backward 1-2 % faster; false turns it off)
EARLY_RELEASE_KEY = "tl.enable_ws_early_release"
EARLY_RELEASE_DEFAULT = True      # the key's value where a kernel does not set it


@dataclass
class WsPlan:
    pipe: PipelinedLoop          # the T.Pipelined loop: its stages, producers and consumers
    gemm: object                 # the one asynchronous gemm, or None: a general consumer body
    producers: list              # [(copy statement, tensor map index)]
    tensormaps: list             # artifact tensor map specs (see KernelArtifact.tensormaps)
    marker: object = None        # the lowered producer/consumer IfThenElse
    raise_regs: list = field(default_factory=list)   # setmaxnreg_inc, first in the consumer branch
    mbar: object = None          # shared view: full(g, s) = g*S + s, empty(g, s) = (G + g)*S + s (uint64)
    groups: list = field(default_factory=list)   # tile groups with barriers of their own: [[producer index]]
    overlap: tuple = None        # the general body's overlap plan (``_overlap_plan``), or None
    persistent: "Persistent | None" = None   # the block loops over output tiles (GEMM main loop)
    issue_loop: object = None    # the producer's TMA issue loop (wrapped in the tile loop)
    cluster: "Cluster | None" = None   # clusters of two blocks sharing a tile (tl.cluster_multicast)
    heads: list = field(default_factory=list)    # [(copy statement, tensor map index)]: ``_heads``
    heads_late: bool = False     # persistent, the heads share bytes: given back at the end of the tile
    head_slots: int = 1          # persistent: 2 where the heads have two buffers (``plan_heads``)
    head_issue: list = field(default_factory=list)   # the producer's TMA loads of the heads (per tile)
    pair: bool = False           # two blocks per SM: setmaxnreg 40 / 216 under __launch_bounds__(256, 2)
    single_wave: bool = False    # one block per SM in a one-wave grid: setmaxnreg 24 / 240 under (256, 1)
    ring: int = 0                # buffers of the ring when not num_stages (``plan_ring``)
    windows: list = field(default_factory=list)  # one stage: (first, last) reader of each group (``_lower_windows``)
    row_loads: int = 0           # producers of 1-D tiles (``_row_spec`` maps, or bulk copies: ``_bulk_bytes``)

    @property
    def min_blocks_per_sm(self):
        """``__launch_bounds__``'s second argument the plan asks for: 2 for a pair of blocks per
        SM, 1 for a block alone on its SM, else None (the kernel's own or none)."""
        return 2 if self.pair else 1 if self.single_wave else None

    @property
    def loop(self):
        """The T.Pipelined For."""
        return self.pipe.loop

    @property
    def stages(self) -> int:
        """Buffers of the ring (and full / empty barrier pairs): the loop's num_stages, or one
        more for the GEMM main loop's wgmma kept in flight (``plan_ring``)."""
        return self.ring or self.pipe.stages

    @property
    def head_buffers(self) -> list:
        """The shared tiles the heads fill."""
        return [decode_region(h.value.args[1]).buffer for h, _ in self.heads]

    def is_head(self, stmt) -> bool:
        """``stmt`` is a head copy: the producer loads it, the statement itself lowers to nothing
        and asks the barrier planner for no barrier."""
        return any(stmt.same_as(h) for h, _ in self.heads)


@dataclass
class Cluster:
    """Two blocks along blockIdx.y (cluster rank = blockIdx.y % 2) compute vertically adjacent
    tiles: the producer copies not indexed by blockIdx.y (the GEMM's B tile) are the same in
    both, so each block loads half of their slabs with ``tma_load_multicast_2d`` into both;
    ``empty[s]`` then counts the consumer warps of both blocks (each warp arrives on both).

    In a persistent GEMM (``persistent``; clusters (2, 1, 1), an even grid) the blocks of a
    cluster take tiles t and t ^ 1 of each round; whether a copy is the same for both depends on
    the tiles (a user's T.use_swizzle), so each candidate copy gets a flag, set per tile by the
    producer from its own and its peer's coordinates (``pair_flags``): multicast halves when
    they agree, else the block's whole tile of its own."""
    shared: set                  # producer copy statements multicast
    by: object                   # the blockIdx.y Var (None: persistent)
    by_rows: set = field(default_factory=set)   # of those, the ones split by rows (one slab each)
    persistent: bool = False
    pair_flags: list = field(default_factory=list)  # persistent: [(flag Var, [coordinates it compares])]

    @property
    def rank(self):
        """This block's rank in its cluster (``%cluster_ctarank``)."""
        if self.persistent:
            return tirx.call_extern("int32", "tl::cluster_ctarank")
        return tirx.floormod(self.by, i32(2))

    @property
    def dims(self) -> tuple:
        return (2, 1, 1) if self.persistent else (1, 2, 1)


@dataclass
class Persistent:
    """A persistent GEMM: ``min(tiles, SMs)`` blocks, block b takes tiles b, b + grid, ...; the
    mbarrier ring runs on across tiles (iteration j of the main loop of the block's it-th tile
    is ring slot ``it * n + j``), so the producer loads the next tile during the epilogue.

    Where the trip count depends on blockIdx.x (causal attention: row block x runs x + 1 times)
    and row blocks x and gx - 1 - x together run the same count for every x (``paired_rows``),
    the unit a block takes is such a pair: ``tiles`` counts pairs, block b runs the two tiles of
    pairs b, b + grid, ... one after the other, longer first, and each role counts the ring slots
    it used (``slots_p`` / ``slots_c``) instead of ``it * n``."""
    dims: list                   # [(block index Var, extent)] of blockIdx.x, .y, .z present
    tiles: object                # number of output tiles (product of the extents), or of pairs
    n: object                    # trip count of the main loop, the same for every tile unless paired
    it_p: object                 # tile-loop variables of the producer and of the consumers
    it_c: object
    paired_rows: int = 0         # blockIdx.x's extent where tiles go in pairs (above), else 0
    slots_p: "_TileCounter | None" = None   # paired: ring slots used so far by the producer ...
    slots_c: "_TileCounter | None" = None   # ... and by the consumers

    def first_slot(self, counter, it):
        """The ring slot of the current tile's first iteration for the role counting with
        ``counter`` (tile-loop variable ``it``)."""
        return it * self.n if counter is None else counter.value

    def advance(self, counter) -> list:
        """The role's count moved past the current tile (paired tiles), else nothing."""
        return [] if counter is None else [tirx.BufferStore(counter.buf, counter.value + self.n, [i32(0)])]


def plan(lw) -> WsPlan | None:
    """The warp-specialisation plan of the kernel ``lw`` lowers, or None (cp.async path)."""
    return plan_or_reason(lw)[0]


def plan_or_reason(lw) -> tuple:
    """(plan, None) or (None, why the GEMM main loop keeps the cp.async path), for hovers."""
    if getattr(lw.info, "has_user_ws", False):
        return None, "the kernel assigns warp-group roles itself (T.ws)"
    if not lw.layouts.wgmma:
        return None, "the kernel's gemms do not use wgmma"
    for key in ("tl.disable_tma_lower", "tl.disable_warp_specialized"):
        if lw.configs.get(key):
            return None, f"`{key}` is set"
    if lw.T % 128 or lw.T > 256:
        return None, f"{lw.T} threads: warp specialisation needs 1 or 2 consumer warpgroups (128 or 256 threads)"
    loops, user_sync = pipelined_loops(lw.info.body), []

    def visit(s):
        if isinstance(s, tirx.Evaluate) and ("__syncthreads" in str(s.value) or "__named_barrier" in str(s.value)
                                                  or "__sync_thread_partial" in str(s.value)):
            user_sync.append(s)

    walk_stmts(lw.info.body, visit)
    if len(loops) != 1:
        return None, f"the kernel has {len(loops)} T.Pipelined loops (one is needed)"
    if user_sync:
        return None, "the kernel calls T.sync_threads() itself"
    pipe = loops[0]
    if not _top_level(lw.info.body, pipe.loop):
        return None, "the T.Pipelined loop is inside another loop or branch"
    loop, S = pipe.loop, pipe.stages
    producers, consumers = list(pipe.producers), list(pipe.consumers)
    gemm = pipe.single_wgmma(lw.layouts)
    if S < 2 and (gemm is not None or not lw.configs.get(SINGLE_STAGE_KEY)):
        return None, "num_stages < 2"
    if not producers:
        return None, "the loop body has no global-to-shared copies at its top level"
    if pipe.guard is not None:
        why = _guard_blocker(lw, pipe, gemm)
        if why is not None:
            return None, why
    why = _computed_coordinates(lw, producers)
    if why is not None:
        return None, why
    if gemm is None:
        why = _general_blocker(lw, loop, producers, consumers)
        if why is not None:
            return None, why
    if S < 2:
        why = _single_stage_blocker(lw, producers, consumers)
        if why is not None:
            return None, f"num_stages < 2 ({why})"
    specs, pairs, rows = [], [], 0
    for p in producers:
        spec = tma.copy_spec(lw, p, len(specs))
        if isinstance(spec, str):
            if gemm is None and _bulk_bytes(lw, p, loop) is not None:
                rows += 1
                spec = _row_spec(lw, p, len(specs))      # one unswizzled box where a map can be made
                if isinstance(spec, str):
                    pairs.append((p, None))     # else a 1-D bulk copy (``_bulk_load``): no tensor map
                    continue
            else:
                return None, spec
        pairs.append((p, len(specs)))
        specs.append(spec)
    heads = []
    if gemm is None and not lw.configs.get("tl.disable_tma_prologue"):
        for h, spec in _heads(lw, loop, consumers):
            if _computed_coordinates(lw, [h]) is not None:
                continue    # (the consumers load it themselves)
            heads.append((h, len(specs)))
            specs.append({**spec, "name": f"tl_tmap_{len(specs)}"})
    return WsPlan(pipe, gemm, pairs, specs, heads=heads, row_loads=rows), None


def _guard_blocker(lw, pipe, gemm) -> str | None:
    """Why a body that is one ``if c:`` around its copies and gemm (``PipelinedLoop.guard``: a
    block-sparse main loop) cannot run warp-specialised, or None. Both roles evaluate ``c``
    (``lower_loop``), so it may read global memory only, which the kernel does not write (the
    producer has no registers of the consumers' and meets no barrier of theirs); and the body must
    be the GEMM main loop's single wgmma."""
    if gemm is None:
        return "the loop body is one `if` around its copies and more than one gemm (pipelined with cp.async instead)"
    reads = {e.source for e in tensor_loads(pipe.guard)}
    if any(scope_of(b) != "global" for b in reads):
        return "the `if` around the loop body reads registers (pipelined with cp.async instead)"
    written = thread_sync.buffer_rw(lw.info.body, ("global",))[1]
    if reads & written:
        return "the `if` around the loop body reads a tensor the kernel writes (pipelined with cp.async instead)"
    return None


def _heads(lw, loop, consumers) -> list:
    """[(copy statement, tensor map spec)]: the whole-tile copies in front of a general loop body
    that the producer can load with TMA instead of the consumers with cp.async (attention's Q):
    top-level statements before the loop copying a global tensor into a swizzled wgmma operand
    named by nothing but the copy and the loop, which only reads it. The consumers wait for it on
    a barrier of its own before the loop; in a persistent kernel they give it back once the loop
    is done, and the producer loads the next tile's during the epilogue."""
    top = smem_plan.top_level(lw.info.body)
    at = next(i for i, x in enumerate(top) if x.same_as(loop))
    written = set()
    for c in consumers:
        written |= thread_sync.shared_rw(c)[1]
    out = []
    for i, stmt in enumerate(top[:at]):
        if not (isinstance(stmt, tirx.Evaluate) and op_name(stmt) == "copy"):
            continue
        src, dst = decode_region(stmt.value.args[0]), decode_region(stmt.value.args[1])
        if scope_of(src.buffer) != "global" or scope_of(dst.buffer) not in SHARED_SCOPES or dst.buffer in written:
            continue
        if any(j not in (i, at) and dst.buffer in smem_plan.names_buffers(x, {dst.buffer})
               for j, x in enumerate(top)):
            continue
        spec = tma.tma_box_spec(lw, src, dst, 0)
        if not isinstance(spec, str):
            out.append((stmt, spec))
    return out


def _row_spec(lw, stmt, index) -> dict | str:
    """The tensor map of a producer copy that fills a whole 1-D, plainly laid out shared tile from
    one run along a global tensor's innermost dimension (attention backward's ``lse`` / ``Delta``
    rows), as one unswizzled box, or why not. Loaded through a tensor map rather than a raw bulk
    copy, the bytes are clipped at the tensor's end like any box, and compute-sanitizer's racecheck
    orders them by the full barrier (it does not for ``cp.async.bulk``: RESULTS.md, session 27).
    A ring slot is the tile's bytes, so they must keep each stage 128-byte aligned for TMA."""
    from tilelang.artifact import TENSORMAP_DTYPES
    from tilelang.transform.lower_copy import _linear

    src, dst = decode_region(stmt.value.args[0]), decode_region(stmt.value.args[1])
    shape = [const_int(x) for x in dst.buffer.shape]
    dtype = str(dst.buffer.dtype)
    if len(shape) != 1 or shape[0] is None or not dst.is_whole() or not _linear(lw, dst.buffer):
        return f"'{dst.buffer.name}' is not a whole 1-D row-major tile"
    if dtype not in TENSORMAP_DTYPES or str(src.buffer.dtype) != dtype:
        return f"'{dst.buffer.name}' is not a tensor-map type copied without conversion"
    n = shape[0]
    if n > 256 or n * nbytes(dtype) % 128:
        return f"'{dst.buffer.name}' is not one box of whole 128-byte lines ({n} elements)"
    return tma.box_spec(lw.info.func.params, lw.an, src, [1, n], n, dtype, dst.buffer.name, index, swizzled=False)


def _bulk_bytes(lw, copy, loop) -> "int | None":
    """The bytes of a producer copy that the TMA unit moves as one 1-D bulk copy
    (``cp.async.bulk``, no tensor map: ``_bulk_load``), or None. A general loop body's small
    plain tiles (attention backward's per-row ``lse`` / ``Delta`` vectors, float32 and not
    gemm operands) have no swizzled box, yet keep the loop off the TMA path otherwise; those that
    fit one unswizzled box go through a tensor map instead (``_row_spec``), the rest through
    this copy. The copy
    fills a whole plainly laid out shared tile of the source's type from one contiguous run of
    a plain tensor parameter, a multiple of 16 bytes starting at a provable multiple of 16
    bytes, and provably inside the tensor for every block and iteration (a bulk copy is not
    clipped at the tensor's bounds, as a box is)."""
    from tvm import arith, ir

    from tilelang.transform.lower_copy import _linear, _strides

    if op_name(copy) != "copy" or len(copy.value.args) > 3 and const_int(copy.value.args[3]) not in (None, 0):
        return None     # (T.async_copy, TMA / bulk hints: the copy keeps its own path)
    src, dst = decode_region(copy.value.args[0]), decode_region(copy.value.args[1])
    buf = src.buffer
    if (scope_of(buf) != "global" or scope_of(dst.buffer) not in SHARED_SCOPES or src.dtype != dst.dtype
            or nbytes(str(buf.dtype)) < 1 or "bool" in str(buf.dtype) or buf.strides
            or not any(p.same_as(buf) for p in lw.info.func.buffer_map.values())):
        return None
    shape = [const_int(x) for x in buf.shape]
    tile = [const_int(x) for x in dst.buffer.shape]
    ext = [const_int(x) for x in src.extents]
    if None in shape + tile + ext or not dst.is_whole() or not _linear(lw, dst.buffer):
        return None
    esize = nbytes(str(buf.dtype))
    elems = 1
    for e in tile:
        elems *= e
    if elems * esize % 16 or [e for e in ext if e != 1] != [e for e in tile if e != 1]:
        return None
    an = arith.Analyzer()
    for v, e in lw.info.launch_dims().values():
        an.bind(v, ir.Range(0, e))
    # the loop variable's constant range (a causal loop's bounds move with the block index)
    lo, hi = an.const_int_bound(loop.min), an.const_int_bound(an.simplify(loop.min + loop.extent))
    if lo.min_value < -(1 << 30) or hi.max_value > (1 << 30):
        return None
    an.bind(loop.loop_var, ir.Range(int(lo.min_value), int(hi.max_value)))
    starts = list(src.starts)
    if not all(an.can_prove(tirx.GE(st, 0)) and an.can_prove(tirx.LE(st + e, n))
               for st, e, n in zip(starts, ext, shape)):
        return None
    strides, expected, partial = _strides(buf), 1, False
    for n, e, stride in reversed(list(zip(shape, ext, strides))):     # one contiguous run
        if partial:
            if e != 1:
                return None
            continue
        if e != 1 and stride != expected:
            return None
        expected *= n
        partial = e != n
    flat = i32(0)
    for st, stride in zip(starts, strides):
        flat = flat + st * stride
    ms = an.modular_set(an.simplify(flat * esize))
    if ms.coeff % 16 or ms.base % 16:
        return None
    return elems * esize


def _bulk_load(lw, copy, bar, stage, out) -> int:
    """Append to ``out`` the 1-D bulk load of a producer copy (``_bulk_bytes``) into ``stage`` of
    its shared tile, completing on ``bar``; its bytes."""
    from tilelang.transform.lower_copy import _load_raw

    src, dst = decode_region(copy.value.args[0]), decode_region(copy.value.args[1])
    saved = lw.stage.get(dst.buffer)
    lw.stage[dst.buffer] = stage
    try:
        smem = lw.shared_ptr(dst.buffer, [i32(0)] * len(dst.buffer.shape))
    finally:
        if saved is None:
            lw.stage.pop(dst.buffer)
        else:
            lw.stage[dst.buffer] = saved
    gptr = tirx.address_of(_load_raw(lw, src, [lw.rewrite(x) for x in src.starts]))
    size = nbytes(str(dst.buffer.dtype))
    for e in dst.buffer.shape:
        size *= const_int(e)
    out.append(evaluate_extern("tl::bulk_copy_g2s", smem, gptr, i32(size), bar))
    return size


def user_cluster_dims(func) -> "tuple | None":
    """The cluster shape a T.ClusterKernel asked for (the ``tl.cluster_dims`` attribute), or None."""
    attrs = getattr(func, "attrs", None)
    value = attrs.get("tl.cluster_dims") if attrs is not None else None
    return tuple(int(d) for d in str(value).split(",")) if value is not None else None


# two consumer warpgroups' registers a thread (setmaxnreg_inc<232>), and the room a persistent loop
# needs beside the fragments: upstream's example_gqa_bwd (128x32 tiles, dQK 192, dV 128: 232 words of
# fragments) spilled 36 bytes persistent and none with one tile per block (1.676 against 1.695 ms on
# the H200, session 30); mha_bwd's 192 words run persistent without spills
CONSUMER_REGS = 232
PERSISTENT_REGS = 16


def persistent_plan(lw) -> "Persistent | None":
    """The persistent-grid plan of a warp-specialised loop (the GEMM main loop, attention's KV
    loop), or None (one tile per block): needs a loop whose bounds do not depend on the block
    index, or whose trip count pairs up (``paired_rows``: causal attention), and the pipelined
    loop among the kernel body's top-level statements (so every other statement runs per tile)."""
    ws = lw.ws
    if user_cluster_dims(lw.info.func) is not None:
        return None     # T.ClusterKernel: the grid is the user's, a multiple of the cluster shape
    if ws is None or lw.configs.get("tl.disable_persistent"):
        return None
    if ws.pipe.guard is not None:
        lw.persistent_why = "the T.Pipelined loop's body is one `if` (tiles of unequal length)"
        return None
    launch = lw.info.launch_dims()
    dims = [launch[t] for t in ("blockIdx.x", "blockIdx.y", "blockIdx.z") if t in launch]
    if not dims or "blockIdx.x" not in launch:
        return None
    block_vars = [v for v, _ in dims]
    paired = 0
    if uses_vars(ws.loop.min, block_vars):
        lw.persistent_why = "the T.Pipelined loop's start depends on the block index (tiles of unequal length)"
        return None
    if uses_vars(ws.loop.extent, block_vars):
        paired = paired_rows(lw, dims)
        if not paired:
            lw.persistent_why = ("the T.Pipelined loop's trip count depends on the block index, and no pairing of "
                                 "row blocks evens it out (tiles of unequal length)")
            return None
    if not any(x.same_as(ws.loop) for x in flatten([lw.info.body])):
        return None
    words = lw.layouts.fragment_words() if lw.T == 256 else 0
    if words > CONSUMER_REGS - PERSISTENT_REGS:
        lw.persistent_why = (f"the fragments take {words} of a consumer thread's {CONSUMER_REGS} "
                             "registers: the persistent loop's own would spill")
        return None
    tiles = dims[0][1] if not paired else i32(paired // 2)
    for _, e in dims[1:]:
        tiles = tiles * e
    P = Persistent(dims, tiles, None, tirx.Var("tile_it_p", "int32"), tirx.Var("tile_it", "int32"), paired)
    if paired:
        P.slots_p, P.slots_c = _tile_counter("slots_issued"), _tile_counter("slots_done")
    return P


def paired_rows(lw, dims) -> int:
    """blockIdx.x's extent gx where the kernel's trip counts depend on blockIdx.x alone and row
    blocks x and gx - 1 - x run the same summed count for every x (causal attention with equal
    block sizes: x + 1 and gx - x), so that a pair of them is a unit of equal work; else 0. Not
    under a user's T.use_swizzle (the block indices it computes are the ones the counts use)."""
    bx, gx = dims[0][0], const_int(dims[0][1])
    if gx is None or gx < 2 or gx % 2 or block_order.find_swizzle(lw.info.body) is not None:
        return 0
    if any(const_int(e) is None for _, e in dims[1:]):
        return 0
    work = block_order.work_by_row(lw.info.body, bx, gx)
    if not work or len({work[x] + work[gx - 1 - x] for x in range(gx // 2)}) != 1:
        return 0
    return gx


def _computed_coordinates(lw, copies) -> str | None:
    """Why the TMA producer cannot issue these copies, or None (``coordinate_blocker``)."""
    launch = lw.info.launch_dims()
    return coordinate_blocker(lw.info.func, [v for v, _ in launch.values()], copies)


def coordinate_blocker(func, launch_vars, copies) -> str | None:
    """Why a TMA producer cannot issue these copies of ``func`` (whose launch binds
    ``launch_vars``), or None. The producer warpgroup runs only the pipelined loop: a load's
    coordinates may use the block indices, the loops' variables, constants and the kernel's
    parameters, not values the kernel body computes before the loop (a grouped GEMM's
    ``cur_batch_idx`` / ``m_start`` from its batch tables, a varlen attention's sequence starts),
    which only the consumer threads evaluate."""
    allowed = list(launch_vars) + list(func.params)
    for buf in func.buffer_map.values():     # symbolic shapes (T.dynamic) of the tensors
        for e in list(buf.shape) + list(buf.strides or []):
            tvm_ffi_walk(e, lambda n: allowed.append(n) if isinstance(n, tirx.Var) else None)
    walk_stmts(func.body, lambda s: allowed.append(s.loop_var) if isinstance(s, tirx.For) else None)
    for stmt in copies:
        src = decode_region(stmt.value.args[0])
        for e in list(src.starts):
            what = None
            if has_load(e):
                what = "values read from memory"
            else:
                free = []
                tvm_ffi_walk(e, lambda n: free.append(n) if isinstance(n, tirx.Var) else None)
                if any(not any(v.same_as(a) for a in allowed) for v in free):
                    what = "values the kernel computes before the loop"
            if what:
                return (f"the copy of '{src.buffer.name}' is addressed by {what} "
                        f"({src.buffer.name}[{', '.join(map(str, src.starts))}]), which the TMA producer "
                        "warpgroup does not evaluate")
    return None


# a one-wave block's warpgroups (``plan_single_wave``): the consumer takes what the producer gives up
SINGLE_WAVE_PRODUCER_REGS = 24
SINGLE_WAVE_CONSUMER_REGS = 240


def plan_single_wave(lw) -> None:
    """Set ``ws.single_wave`` for a general loop body of two gemms or more (attention's; a GEMM
    main loop and DeepGEMM's one-gemm body are not measured with it) on one consumer warpgroup
    (not a pair, not persistent, no cluster, no register limit of the kernel's own) in a constant
    grid of at most one block per SM. The block then runs alone on its SM, so the registers
    ptxas keeps for a second block buy nothing: the kernel is declared ``__launch_bounds__(T +
    128, 1)`` and the producer warpgroup gives its registers to the consumer (setmaxnreg 24 /
    240), as upstream declares every warp-specialised kernel. bench_launch's small attention (B2 H4 S512 D64, 64
    blocks; H100, three alternating rounds): kernel 8.21 -> 6.87 us (7.39 with the launch bound
    alone, at 96 registers against 91: ptxas schedules the consumer's loop differently, not for
    the registers); upstream's wheel runs 6.8-6.9. In a grid of more blocks than SMs a second
    block per SM hides the first's waits, so those keep ptxas's count
    (``tl.disable_single_wave_setmaxnreg`` keeps it everywhere)."""
    ws = lw.ws
    if ws is None:
        return
    ws.single_wave = False
    if ws.gemm is not None or len(lw.layouts.gemms) < 2 or lw.T != 128 or ws.pair \
            or ws.persistent is not None or ws.cluster is not None \
            or lw.configs.get(PassConfigKey.TL_DISABLE_SINGLE_WAVE_SETMAXNREG):
        return
    func = lw.info.func
    if user_cluster_dims(func) is not None or _sets_register_limit(func, lw.configs):
        return
    blocks = block_order.constant_blocks(lw)
    ws.single_wave = blocks is not None and blocks <= (targets.sm_count("sm_90a") or 132)


PAIR_PRODUCER_REGS = 40     # the producer warpgroup of a block in a pair (``pair_plan``) ...
PAIR_CONSUMER_REGS = 216    # ... and its consumer warpgroup: 2 x 128 x (40 + 216) = 64K registers
PAIR_FRAGMENT_WORDS = 160   # fragment registers per consumer thread that leave room for the rest
PAIR_WGMMA_N = 128          # widest accumulator one consumer warpgroup's wgmma may hold in a pair


def wide_single_warpgroup(lw) -> bool:
    """A GEMM main loop on one consumer warpgroup whose accumulator is wider than ``PAIR_WGMMA_N``
    (64x256 tiles on 128 threads): its consumer needs more than 128 registers a thread (one wgmma
    holds the whole accumulator live), so a second block never fits the SM's registers, whatever
    shared memory would allow (H200, fp16 8192^3, 64x256x64 tiles, 128 threads: two stages planned
    for two blocks per SM, one tile per block and no extra ring buffer, 3.75 ms; three stages,
    persistent with four buffers, 1.76 ms)."""
    ws = lw.ws
    if ws is None or ws.gemm is None or lw.T != 128:
        return False
    c_extent = const_int(decode_region(ws.gemm.value.args[2]).extents[-1])
    return c_extent is not None and c_extent > PAIR_WGMMA_N


def pair_candidate(lw) -> bool:
    """The GEMM main loop with one consumer warpgroup (128 threads) whose fragments hold at most
    ``PAIR_FRAGMENT_WORDS`` 32-bit words per thread (128x128 float accumulators: 128), in a kernel
    that sets no register limit of its own: two such blocks fit the register file of one SM once
    each producer warpgroup gives its registers to its consumer (``setmaxnreg``). Without that a
    128x128 tile's consumer takes ~154 registers, 256 threads x 154 > 32K, and the SM holds one
    block: a 3-stage ring then has two TMA loads in flight per SM, where the pair has four (H200,
    8192^3 fp16, 128x128x32 tiles: 332 TFLOP/s against upstream's 409-416 with three)."""
    ws = lw.ws
    if ws is None or lw.T != 128 or ws.cluster is not None or lw.configs.get("tl.disable_block_pair"):
        return False
    func = lw.info.func
    if user_cluster_dims(func) is not None or _sets_register_limit(func, lw.configs):
        return False
    if ws.gemm is None:
        return _general_pair_candidate(lw)
    # one m64nN wgmma holds its whole accumulator (N/2 float registers a thread) live at once:
    # the pair's 128-register compile limit (256 threads, 2 blocks) leaves no room past N = 128
    # (64x256 tiles on 128 threads: ptxas "Insufficient registers (128) ... 154 or higher")
    c_extent = const_int(decode_region(ws.gemm.value.args[2]).extents[-1])
    if c_extent is None or c_extent > PAIR_WGMMA_N:
        return False
    return lw.layouts.fragment_words() <= PAIR_FRAGMENT_WORDS


# fragment words per consumer thread of a general loop body run as a pair (``_general_pair_candidate``):
# upstream's example_mha_bwd kernel (64x64 tiles, seven fragments: 192 words) compiles to 186
# registers without spills under setmaxnreg 216
PAIR_GENERAL_FRAGMENT_WORDS = 192


def _general_pair_candidate(lw) -> bool:
    """A general loop body (attention backward's five gemms) on one consumer warpgroup that a
    pair of blocks per SM may run (``pair_candidate``): only a loop that warp specialisation took
    with 1-D row loads (``WsPlan.row_loads``: the backward's ``lse`` / ``Delta`` tiles, a loop that
    before them kept the cp.async path with two such blocks per SM), every gemm's accumulator at
    most ``PAIR_WGMMA_N`` wide, and fragments within ``PAIR_GENERAL_FRAGMENT_WORDS``. One block
    per SM would halve the warps that hide the body's softmax and atomics behind the other
    block's gemms. The general loops warp specialisation took before (attention forward) keep
    their single block."""
    ws = lw.ws
    if not ws.row_loads:
        return False
    for g in lw.layouts.gemms:
        c_extent = const_int(decode_region(g.value.args[2]).extents[-1])
        if c_extent is None or c_extent > PAIR_WGMMA_N:
            return False
    return lw.layouts.fragment_words() <= PAIR_GENERAL_FRAGMENT_WORDS


def plan_pair(lw, budget: int) -> None:
    """Set ``ws.pair`` (``pair_candidate``, and two blocks' shared memory within ``budget``) once
    the Lowerer ``lw`` has planned shared memory. A persistent candidate goes back to one tile per
    block when that lets two blocks share an SM (the ring then lends its bytes to the epilogue):
    two blocks keep twice the loads in flight, and one's epilogue runs under the other's main
    loop anyway."""
    ws = lw.ws
    ws.pair = False
    if not pair_candidate(lw):
        return
    if ws.persistent is None:
        ws.pair = 2 * lw.smem_bytes <= budget
        return
    saved, ws.persistent = ws.persistent, None
    lw._plan_memory()
    if 2 * lw.smem_bytes <= budget:
        ws.pair = True
        lw.persistent_why = ("two blocks fit on an SM (one consumer warpgroup, setmaxnreg), which a grid of one "
                             "block per SM would keep apart")
        return
    ws.persistent = saved
    lw._plan_memory()


# k-steps per tile from which plan_ring trades persistence for a buffer (the evidence: 8192^3 and
# 4096^3 GEMMs with 64-deep k-steps, 128 and 64 of them; over shorter loops the next tile's fill
# that persistence hides under the epilogue weighs more against the main loop)
RING_OVER_PERSISTENCE_TRIPS = 64


def plan_ring(lw, budget: int) -> None:
    """Give the GEMM main loop's ring one buffer more than num_stages where shared memory allows
    it without changing how many blocks share an SM (``budget``: the bytes of one SM's blocks).
    The consumers keep one wgmma group in flight (``wgmma_wait<1>``), so they hold two stages at
    a time, the one they issue on and the previous one, released only once that retired: with S
    buffers, S - 1 loads are in flight where the synchronous form of the loop (upstream's:
    ``wgmma_wait<0>``, then release) has S. The extra buffer gives back the S-deep prefetch and
    keeps the tensor pipe fed across the barrier waits. (Small tiles are latency-bound: a 128x128x32
    stage is ~0.14 us of tensor work per SM against ~1 us for a TMA load under load.) Where the
    buffer does not fit a persistent kernel, a main loop of at least
    ``RING_OVER_PERSISTENCE_TRIPS`` k-steps goes back to one tile per block if that makes room."""
    ws = lw.ws
    ws.ring = 0
    if ws.gemm is None or (ws.cluster is not None and not ws.cluster.persistent) or \
            lw.configs.get("tl.disable_ring_extra_stage"):
        return
    before = lw.smem_bytes
    blocks = 1 if ws.persistent is not None or lw.T > 128 or wide_single_warpgroup(lw) else \
        max(1, min(2, budget // max(before, 1)))
    staged = ws.pipe.staged
    saved = {b: lw.stages.get(b, 1) for b in staged}
    ws.ring = ws.pipe.stages + 1
    for b in staged:
        lw.stages[b] = ws.ring
    lw._plan_memory()
    if blocks * lw.smem_bytes <= budget:
        return
    trips = const_int(ws.pipe.loop.extent)
    if (ws.persistent is not None and trips is not None and trips >= RING_OVER_PERSISTENCE_TRIPS
            and not lw.configs.get("tl.disable_ring_over_persistence")):
        # A persistent kernel's epilogue stage has bytes of its own; one tile per block lets it
        # share the ring's, dead by then, which may make room for the extra buffer. Over a long
        # main loop the deeper prefetch is worth more than the next tile's fill under this one's
        # epilogue (H200, fp16 8192^3, 128x256x64 tiles with a staged epilogue: 651 TFLOP/s with
        # four buffers, one tile per block, 640 with three, persistent; upstream's synchronous
        # three-buffer loop, one tile per block, has three loads in flight where the latter has
        # two, and was 4-5 % faster at 4096^3 bf16 and 8192^3 fp16).
        saved_persistent, ws.persistent = ws.persistent, None
        lw._plan_memory()
        if lw.smem_bytes <= budget:
            lw.persistent_why = (f"one tile per block lets the epilogue share the ring's bytes, which makes room "
                                 f"for a ring of {ws.ring} buffers ({trips} k-steps per tile)")
            return
        ws.persistent = saved_persistent
    ws.ring = 0
    lw.stages.update(saved)
    lw._plan_memory()


# a persistent kernel's heads keep one buffer (``plan_heads``)
SINGLE_HEAD_BUFFER_KEY = PassConfigKey.TL_DISABLE_DOUBLE_HEAD_BUFFER.value


def plan_heads(lw, budget: int) -> None:
    """Give the heads of a persistent kernel (attention's Q) two buffers where shared memory holds
    them (``budget``): tile ``it`` reads buffer ``it % 2``, so the producer loads the next tile's
    heads as soon as it has issued this tile's ring loads, not once the consumers are past this
    tile's loop, and the next tile's first K / V stages follow them while this tile finishes.
    Not with ``heads_late`` (the heads already share bytes), two blocks per SM, or a grid of at
    most one tile per SM (nothing to load ahead, and measured slower there, for a reason not
    found: H200, mha_inference_split's 128 tiles 0.0675 ms with two Q buffers against 0.0625)."""
    ws = lw.ws
    ws.head_slots = 1
    if not ws.heads or ws.persistent is None or ws.heads_late or ws.pair or lw.configs.get(SINGLE_HEAD_BUFFER_KEY):
        return
    tiles = const_int(ws.persistent.tiles)
    if not ws.persistent.paired_rows and tiles is not None and tiles <= (targets.sm_count("sm_90a") or 132):
        return
    saved = {b: lw.stages.get(b, 1) for b in ws.head_buffers}
    ws.head_slots = 2
    for b in ws.head_buffers:
        lw.stages[b] = 2
    lw._plan_memory()
    if lw.smem_bytes <= budget and not ws.heads_late:
        return
    ws.head_slots = 1
    lw.stages.update(saved)
    lw._plan_memory()


def _sets_register_limit(func, configs) -> bool:
    """The kernel fixes its registers itself: ``T.annotate_min_blocks_per_sm``, or a
    ``maxrregcount`` flag among its compile flags or ``tl.device_compile_flags`` (setmaxnreg
    needs the launch bound that ours would replace)."""
    from tilelang.language.builtins import MIN_BLOCKS_ATTR, kernel_compile_flags

    found = []
    walk_stmts(func.body, lambda s: found.append(1) if isinstance(s, tirx.AttrStmt) and
               s.attr_key == MIN_BLOCKS_ATTR else None)
    extra = configs.get("tl.device_compile_flags") or []
    flags = list(kernel_compile_flags(func)) + [str(f) for f in ([extra] if isinstance(extra, str) else extra)]
    return bool(found) or any("maxrregcount" in f for f in flags)


def cluster_plan(lw) -> "Cluster | None":
    """The cluster plan (``tl.cluster_multicast``) of a warp-specialised GEMM main loop, or None:
    an even blockIdx.y extent, and producer copies of 2-D tensors of which those not indexed by
    blockIdx.y have an even number of slabs (each block loads half of them) or one slab of rows
    in whole 8-row swizzle patterns a half (each block loads half of the rows: a box of half the
    height, the tensor map this copy's alone)."""
    ws = lw.ws
    if ws is None or ws.gemm is None or ws.pipe.guard is not None or not lw.configs.get("tl.cluster_multicast"):
        return None
    if user_cluster_dims(lw.info.func) is not None:
        return None     # T.ClusterKernel: the user's cluster shape stands
    launch = lw.info.launch_dims()
    if "blockIdx.y" not in launch or (const_int(launch["blockIdx.y"][1]) or 1) % 2:
        return None
    by = launch["blockIdx.y"][0]
    shared, by_rows = set(), set()
    for p, j in ws.producers:
        src = decode_region(p.value.args[0])
        if j is None or len(ws.tensormaps[j]["dims"]) != 2:
            return None
        if any(uses_vars(x, [by]) for x in src.starts):
            continue
        split = _cluster_split(ws, p, j)
        if split is None:
            return None
        shared.add(p)
        if split == "rows":
            by_rows.add(p)
    return Cluster(shared, by, by_rows) if shared else None


def _cluster_split(ws, p, j) -> "str | None":
    """How two blocks share producer copy ``p`` (tensor map j): "slabs" (an even number of
    swizzle slabs, half each), "rows" (one slab whose halves are whole 1024-byte swizzle
    patterns, half the rows each: map j, this copy's alone, gets a box of half the height when
    the loads are built), or None."""
    box = ws.tensormaps[j]["box"]
    cols = const_int(decode_region(p.value.args[1]).buffer.shape[-1])
    if cols is None:
        return None
    if (cols // box[0]) % 2 == 0:
        return "slabs"
    if cols == box[0] and box[1] % 16 == 0 and box[1] // 2 * box[0] * nbytes(ws.tensormaps[j]["dtype"]) % 1024 == 0 \
            and sum(1 for _, i in ws.producers if i == j) == 1:
        return "rows"
    return None


def persistent_cluster_plan(lw) -> "Cluster | None":
    """The cluster plan of a persistent GEMM (``tl.cluster_multicast``), or None: a constant,
    even number of tiles (both blocks of a cluster then run the same number), not paired, and
    2-D producer copies two blocks can split (``_cluster_split``); every such copy is a
    candidate, multicast on the tiles where the two blocks' coordinates agree."""
    ws = lw.ws
    P = ws.persistent if ws is not None else None
    if P is None or ws.gemm is None or P.paired_rows or not lw.configs.get("tl.cluster_multicast"):
        return None
    tiles = const_int(P.tiles)
    if tiles is None or tiles % 2 or any(const_int(e) is None for _, e in P.dims):
        return None
    shared, by_rows = set(), set()
    for p, j in ws.producers:
        if j is None or len(ws.tensormaps[j]["dims"]) != 2:
            continue
        split = _cluster_split(ws, p, j)
        if split is not None:
            shared.add(p)
            if split == "rows":
                by_rows.add(p)
    return Cluster(shared, None, by_rows, persistent=True) if shared else None


def _general_blocker(lw, loop, producers, consumers) -> str | None:
    """Why a loop whose consumers are not the single asynchronous gemm of a GEMM main loop (flash
    attention: S = Q K^T, softmax, O += P V) cannot run them as a synchronous consumer body, or
    None. The staged tiles must be only read by the consumers, and only inside this loop."""
    staged = {decode_region(p.value.args[1]).buffer for p in producers}
    for c in consumers:
        _, writes = thread_sync.shared_rw(c)
        if writes & staged:
            return f"a statement of the loop body writes the staged tile '{next(iter(writes & staged)).name}'"
        if pipelined_loops(c):
            return "the loop body holds another T.Pipelined loop"
    top = smem_plan.top_level(lw.info.body)
    at = next(i for i, x in enumerate(top) if x.same_as(loop))
    live = smem_plan.live_ranges(lw.info.body, list(staged))
    for buf in staged:
        if live.get(buf, (at, at)) != (at, at):
            return f"the staged tile '{buf.name}' is used outside the T.Pipelined loop"
    return None


def _reader_windows(consumers, staged) -> dict:
    """{staged buffer: (first, last)}: the indices of the first and last consumer statements that
    touch it."""
    out = {}
    for i, c in enumerate(consumers):
        r, w = thread_sync.buffer_rw(c, SHARED_SCOPES)
        for b in (r | w) & staged:
            first, _ = out.get(b, (i, i))
            out[b] = (first, i)
    return out


_RELEASE_MARKER = "tl_ws_stage_release_here"   # a placeholder statement, replaced once lowered
_NOP = tirx.Evaluate(tirx.IntImm("int32", 0))


def _is_marker(stmt) -> bool:
    return isinstance(stmt, tirx.Evaluate) and extern_name(stmt.value) == _RELEASE_MARKER


def _early_release_at(lw, consumers):
    """Where a general consumer body may give its stage back (``tl.enable_ws_early_release``): the
    index right after the last statement that touches a staged tile, when statements follow it (the
    producer then refills the slot while they run: deepgemm's scaling after its wgmma, attention
    backward's dQ product and atomics after dK's gemm), else None. That last statement must finish
    its reads when it returns: a synchronous gemm (the general body's wgmma end with
    ``wgmma.wait_group 0``), a ``T.Parallel`` nest, a reduction, or a copy into registers; a copy
    to global or shared memory (TMA, cp.async) might still be reading, so the release stays at the
    end of the body."""
    staged = {decode_region(p.value.args[1]).buffer for p, _ in lw.ws.producers}
    # (a buffer that shares a staged tile's bytes counts as that tile)
    windows = _reader_windows(consumers, thread_sync.widen(staged, getattr(lw, "smem_alias", None) or {}))
    if not windows:
        return None
    last = max(hi for _, hi in windows.values())
    if last == len(consumers) - 1:
        return None
    c = consumers[last]
    name = op_name(c) if isinstance(c, tirx.Evaluate) else None
    if name == "copy":
        dst = decode_region(c.value.args[1]).buffer
        synchronous = scope_of(dst) in (FRAGMENT_SCOPE, "local")
    else:
        synchronous = name in ("gemm", "reduce") or is_parallel_nest(c)
    return last + 1 if synchronous else None


def _single_stage_blocker(lw, producers, consumers) -> str | None:
    """Why a one-stage general loop body cannot run warp-specialised with a barrier pair per
    tile group (``_lower_windows``), or None. The body is lowered in pieces between the waits and
    releases, so it must need no barrier of its own (inside it or across the loop's back edge);
    loads already issued early (``attention_schedule``'s T.async_copy) keep their path; and some
    tile must be free for part of the body (read only after its start or not up to its end), or
    the producer could never load ahead."""
    if any(thread_sync.is_async_copy(p) for p in producers):
        return "its loads are T.async_copy"
    # (before shared memory is planned there are no aliases yet: ``plan_overlap`` checks again)
    syncs, (tail_r, tail_w), (head_r, head_w), _ = thread_sync.plan_sequence(consumers,
                                                                             getattr(lw, "smem_alias", None))
    if syncs or thread_sync.conflict(head_r, head_w, tail_r, tail_w):
        return "the loop body needs a barrier of its own"
    staged = {decode_region(p.value.args[1]).buffer for p in producers}
    windows = _reader_windows(consumers, staged)
    if set(windows) != staged:
        return "a staged tile is not read in the loop body"
    if all(w == (0, len(consumers) - 1) for w in windows.values()):
        return "every staged tile is read from the start to the end of the body: nothing to load ahead under"
    return None


def _top_level(body, target) -> bool:
    """``target`` is reached from ``body`` through sequences and attributes only (no loop or
    branch around it), so the role split can sit where the loop is."""
    if body.same_as(target):
        return True
    if isinstance(body, tirx.SeqStmt):
        return any(_top_level(s, target) for s in body.seq)
    if isinstance(body, tirx.AttrStmt):
        return _top_level(body.body, target)
    return False


def _bar(ws, index):
    return tirx.address_of(tirx.BufferLoad(ws.mbar, [index]))


def _full(ws, g, stage):
    """``full`` barrier of tile group g at a stage: the group's TMA bytes have landed."""
    return _bar(ws, i32(g * ws.stages) + stage)


def _empty(ws, g, stage):
    """``empty`` barrier of tile group g at a stage: every consumer warp is done reading it."""
    return _bar(ws, i32((len(ws.groups) + g) * ws.stages) + stage)


def _head_full(ws, slot):
    """The heads' ``full`` barrier of a head buffer (after the ring's): its TMA bytes have landed."""
    return _bar(ws, i32(2 * ws.stages * len(ws.groups)) + slot)


def _head_empty(ws, slot):
    """The heads' ``empty`` barrier of a head buffer: every consumer thread is done with it."""
    return _bar(ws, i32(2 * ws.stages * len(ws.groups) + ws.head_slots) + slot)


def _head_slot(ws, it):
    """(buffer, phase) of the heads for the tile-loop variable ``it`` (tile 0 without one)."""
    if it is None:
        return i32(0), i32(0)
    if ws.head_slots == 1:
        return i32(0), tirx.floormod(it, i32(2))
    return tirx.floormod(it, i32(2)), tirx.floormod(tirx.floordiv(it, i32(2)), i32(2))


def barrier_count(ws) -> int:
    """mbarriers the plan needs: full / empty per group and stage, plus the heads' pair per buffer."""
    return 2 * ws.stages * len(ws.groups) + (2 * ws.head_slots if ws.heads else 0)


def plan_overlap(lw) -> None:
    """Decide, once shared memory is planned, whether the general body overlaps its last gemm
    with the next iteration (``ws.overlap``) and how the staged tiles group into barriers
    (``ws.groups``): with the overlap, the tiles read only by the last gemm (attention's V) get
    full / empty barriers of their own, so the tiles of the first gemm (K) are released as soon
    as it retires and V one iteration later; two stages then suffice. Otherwise one group."""
    ws = lw.ws
    ws.groups = [list(range(len(ws.producers)))]
    if ws.gemm is not None:
        return
    if ws.pipe.stages < 2:    # one stage: a barrier pair per reader window (``_lower_windows``)
        consumers = list(ws.pipe.consumers)
        if _single_stage_blocker(lw, [p for p, _ in ws.producers], consumers) is not None:
            return      # (with the planned aliases) one group, released at the end of the body
        staged = [decode_region(p.value.args[1]).buffer for p, _ in ws.producers]
        windows = _reader_windows(consumers, set(staged))
        order = sorted(set(windows.values()))
        ws.windows = order
        ws.groups = [[i for i, b in enumerate(staged) if windows[b] == w] for w in order]
        return
    consumers = list(ws.pipe.consumers)
    split = _late_group(lw, consumers)
    ws.overlap = _overlap_plan(lw, consumers, ws.stages, split is not None)
    if ws.overlap is not None and split is not None:
        late = [i for i, (p, _) in enumerate(ws.producers) if decode_region(p.value.args[1]).buffer in split]
        ws.groups = [[i for i in range(len(ws.producers)) if i not in late], late]


def _late_group(lw, consumers):
    """The staged tiles read by the last consumer statement (a gemm) and by no other, when there
    are others: they can wait for their own barrier; else None."""
    staged = {decode_region(p.value.args[1]).buffer for p, _ in lw.ws.producers}
    last_r, last_w = thread_sync.buffer_rw(consumers[-1], SHARED_SCOPES)
    late = (last_r | last_w) & staged
    for c in consumers[:-1]:
        r, w = thread_sync.buffer_rw(c, SHARED_SCOPES)
        late -= r | w
    return late if late and late != staged else None


def init_barriers(lw) -> list:
    """All threads: thread 0 initialises the mbarrier ring, then a block-wide barrier."""
    ws = lw.ws
    S = ws.stages
    init = []
    # consumer threads, or in a cluster the consumer warps of both blocks (``_releasing_lanes``)
    arrivals = lw.T if ws.cluster is None else lw.T // 32 * 2
    for g in range(len(ws.groups)):
        for s in range(S):
            init.append(evaluate_extern("tl::mbarrier_init", _full(ws, g, i32(s)), 1))
            init.append(evaluate_extern("tl::mbarrier_init", _empty(ws, g, i32(s)), arrivals))
    for h in range(ws.head_slots if ws.heads else 0):
        init.append(evaluate_extern("tl::mbarrier_init", _head_full(ws, i32(h)), 1))
        init.append(evaluate_extern("tl::mbarrier_init", _head_empty(ws, i32(h)), arrivals))
    init.append(evaluate_extern("tl::fence_barrier_init"))
    out = [tirx.IfThenElse(tirx.EQ(lw.tid, i32(0)), seq(init), None), evaluate_extern("__syncthreads")]
    if ws.cluster is not None:   # both blocks' barriers exist before either multicasts into them
        out.append(evaluate_extern("tl::cluster_sync"))
    return out


def lower_loop(lw, loop):
    """The producer/consumer split of the pipelined loop (see the module docstring)."""
    ws = lw.ws
    S, T = ws.stages, lw.T
    k, start, n = loop.loop_var, lw.rewrite(loop.min), lw.rewrite(loop.extent)
    kp = tirx.Var(f"{k.name}_tma", "int32")
    # --- producer: one thread issues the TMA loads of iteration kp
    saved_vmap = dict(lw.vmap)
    lw.vmap[k] = kp
    P = ws.persistent
    if P is not None:
        P.n = n
    guard = ws.pipe.guard    # (a guarded body: its ring slots are counted, ``_tile_counter``)
    count_p = _tile_counter("tiles_issued") if guard is not None else None
    jp = (kp - start if P is None else P.first_slot(P.slots_p, P.it_p) + (kp - start)) if count_p is None \
        else count_p.value
    # (a count is never negative, which the simplifier cannot know: C division then is floor division)
    counted = count_p is not None or (P is not None and P.slots_p is not None)
    mod, div = (tirx.truncmod, tirx.truncdiv) if counted else (tirx.floormod, tirx.floordiv)
    stage, phase = mod(jp, i32(S)), mod(div(jp, i32(S)), i32(2))
    loads, nbytes_all = [[] for _ in ws.groups], [0] * len(ws.groups)
    group_of = {i: g for g, members in enumerate(ws.groups) for i in members}
    try:
        guard_p = lw.rewrite(guard) if guard is not None else None
        for i, (p, j) in enumerate(ws.producers):
            g = group_of[i]
            if j is None:
                nbytes_all[g] += _bulk_load(lw, p, _full(ws, g, stage), stage, loads[g])
                continue
            shared = ws.cluster is not None and p in ws.cluster.shared
            if shared and p in ws.cluster.by_rows:
                shared = "rows"
            nbytes_all[g] += tma.tile_loads(lw, p, j, _full(ws, g, stage), stage, loads[g], shared)
    finally:
        lw.vmap = saved_vmap
    body = seq([stmt for g in range(len(ws.groups)) for stmt in
                [evaluate_extern("tl::mbarrier_wait", _empty(ws, g, stage), tirx.bitwise_xor(phase, i32(1))),
                 evaluate_extern("tl::mbarrier_arrive_expect_tx", _full(ws, g, stage), nbytes_all[g])] + loads[g]])
    if count_p is not None:
        body = tirx.IfThenElse(guard_p, seq([body, count_p.step()]), None)
    prefetch = [evaluate_extern("tl::prefetch_tma_descriptor", tma.tmap(j)) for j in range(len(ws.tensormaps))]
    issue_loop = ws.issue_loop = tirx.For(kp, start, n, tirx.ForKind.SERIAL, body, span=loop.span)
    ws.head_issue = _head_issue(lw)
    issue = prefetch + (ws.head_issue if P is None else []) + (count_p.start() if count_p else []) + \
        (P.slots_p.start() if P is not None and P.slots_p else []) + [issue_loop]
    # (persistent: per tile, _persist)
    producer = [tirx.IfThenElse(tirx.EQ(lw.tid, i32(T)), seq(issue), None)]
    # --- consumers: wait for the tile, issue the wgmma, release the previous stage
    if const_int(start) == 0:
        lw.bind_loop(k, n)
    count_c = _tile_counter("tiles_done") if guard is not None else None
    jl = k - start if count_c is None else count_c.value
    j = jl if P is None else P.first_slot(P.slots_c, P.it_c) + jl
    cstage, cphase = mod(j, i32(S)), mod(div(j, i32(S)), i32(2))
    outer_stage = dict(lw.stage)
    if ws.head_slots > 1:   # the consumers read this tile's head buffer
        for buf in ws.head_buffers:
            lw.stage[buf] = _head_slot(ws, P.it_c)[0]
    saved_stage = dict(lw.stage)
    for p, _ in ws.producers:
        lw.stage[decode_region(p.value.args[1]).buffer] = cstage
    lane = tirx.floormod(lw.tid, i32(32))
    releaser = _releasing_lanes(lw)
    wait_full = evaluate_extern("tl::mbarrier_wait", _full(ws, 0, cstage), cphase)
    if ws.gemm is not None:
        issue = lw.lower_gemm(ws.gemm, asynchronous=True)
        lw.stage = saved_stage
        release = _when(_arrive_empty(ws, mod(j - 1, i32(S)), lane), tirx.GT(jl, i32(0)), releaser)
        cbody = seq([wait_full, issue, pipeline.wgmma_wait(lw, ws.gemm, 1), release])
        if count_c is not None:
            cbody = tirx.IfThenElse(lw.rewrite(guard), seq([cbody, count_c.step()]), None)
        consumer = (count_c.start() if count_c else []) + [tirx.For(k, start, n, tirx.ForKind.SERIAL, cbody,
                                                                    span=loop.span),
                                                           pipeline.wgmma_wait(lw, ws.gemm, 0)]
        if P is not None:   # the tile's last slot, released once its wgmma retired
            last = lw.an.simplify(mod(P.first_slot(P.slots_c, P.it_c) + n - 1, i32(S)))
            nonempty = None if lw.prove(tirx.GT(n, i32(0))) else tirx.GT(n, i32(0))
            consumer.append(_when(_arrive_empty(ws, last, lane), nonempty, releaser))
    else:
        # A general consumer body (several synchronous wgmma and the code between them): every
        # read of stage j is complete when the body ends, so each thread then releases stage j.
        consumers = list(ws.pipe.consumers)
        if ws.overlap is not None:
            lw.stage = saved_stage
            base = i32(0) if P is None else P.first_slot(P.slots_c, P.it_c)      # the tile's first ring slot
            consumer = _lower_overlapped(lw, loop, consumers, ws.overlap, base, releaser)
            # the tail (the last gemm of the last iteration) runs after the loop: when it does
            # not read the heads, they go back before it
            _, last, _, deferred = ws.overlap
            reads = thread_sync.shared_rw(seq([consumers[i] for i in deferred + [last]]))[0]
            at = len(consumer) - 1 if not set(ws.head_buffers) & reads else len(consumer)
            consumer = consumer[:at] + head_release(lw) + consumer[at:]
        elif ws.windows:
            base = i32(0) if P is None else P.first_slot(P.slots_c, P.it_c)
            consumer = [_lower_windows(lw, loop, consumers, base, releaser)] + head_release(lw)
            lw.stage = saved_stage
        else:
            release = _when(_arrive_empty(ws, cstage, lane), releaser)
            at = _early_release_at(lw, consumers) if lw.configs.get(EARLY_RELEASE_KEY, EARLY_RELEASE_DEFAULT) else None
            if at is None:
                body = seq([thread_sync.lower_loop_body(lw, consumers), release])
            else:   # lowered whole (its barriers as before), the marker then becomes the release
                lowered = flatten([thread_sync.lower_loop_body(lw, consumers[:at] + [evaluate_extern(_RELEASE_MARKER)]
                                                               + consumers[at:])])
                if sum(map(_is_marker, lowered)) == 1:   # where every warp passes (not under a branch)
                    body = seq([release if _is_marker(st) else st for st in lowered])
                else:                                    # else at the end, as without the key
                    body = seq([map_stmts(seq(lowered), pre=lambda st: _NOP if _is_marker(st) else None), release])
            lw.stage = saved_stage
            consumer = [tirx.For(k, start, n, tirx.ForKind.SERIAL, seq([wait_full, body]),
                                 span=loop.span)] + head_release(lw)
        consumer = head_wait(lw) + consumer
    lw.stage = outer_stage
    if releaser is not None:   # lanes release for their warp
        consumer = [fence_warp_releases(c) for c in consumer]
    if T == 256:  # two consumer warpgroups: 2 x 128 x 232 + 128 x 40 <= 64K registers
        producer.insert(0, evaluate_extern("tl::setmaxnreg_dec<40>"))
        ws.raise_regs = [evaluate_extern(f"tl::setmaxnreg_inc<{CONSUMER_REGS}>")]
    elif ws.pair:  # two blocks of one consumer warpgroup per SM (``pair_candidate``)
        producer.insert(0, evaluate_extern(f"tl::setmaxnreg_dec<{PAIR_PRODUCER_REGS}>"))
        ws.raise_regs = [evaluate_extern(f"tl::setmaxnreg_inc<{PAIR_CONSUMER_REGS}>")]
    elif ws.single_wave:  # the block runs alone on its SM (``plan_single_wave``)
        producer.insert(0, evaluate_extern(f"tl::setmaxnreg_dec<{SINGLE_WAVE_PRODUCER_REGS}>"))
        ws.raise_regs = [evaluate_extern(f"tl::setmaxnreg_inc<{SINGLE_WAVE_CONSUMER_REGS}>")]
    ws.marker = tirx.IfThenElse(tirx.GE(lw.tid, i32(T)), seq(producer), seq(consumer), span=loop.span)
    return ws.marker


@dataclass
class _TileCounter:
    """A thread's count of the iterations its role ran of a guarded main loop (``PipelinedLoop.guard``:
    block-sparse GEMM): the ring slot of an iteration is the count of those before it that ran,
    so skipped iterations take no slot and the producer loads the next tile that runs, up to S
    ahead (upstream's phase counters)."""
    buf: object

    @property
    def value(self):
        return tirx.BufferLoad(self.buf, [i32(0)])

    def start(self) -> list:
        return [tirx.AllocBuffer(self.buf), tirx.BufferStore(self.buf, i32(0), [i32(0)])]

    def step(self):
        return tirx.BufferStore(self.buf, self.value + i32(1), [i32(0)])


def _tile_counter(name) -> _TileCounter:
    return _TileCounter(tirx.decl_buffer((1,), "int32", name, scope="local"))


def _head_issue(lw) -> list:
    """The producer's loads of the heads (``_heads``) for one tile: in a persistent kernel it
    first waits until the consumers gave back the buffer's previous tile (``_head_slot``)."""
    ws = lw.ws
    if not ws.heads:
        return []
    P = ws.persistent
    slot, phase = _head_slot(ws, None if P is None else P.it_p)
    loads, nbytes_all = [], 0
    for h, j in ws.heads:
        nbytes_all += tma.tile_loads(lw, h, j, _head_full(ws, slot), slot, loads)
    wait = []
    if P is not None:
        wait = [evaluate_extern("tl::mbarrier_wait", _head_empty(ws, slot), tirx.bitwise_xor(phase, i32(1)))]
    return wait + [evaluate_extern("tl::mbarrier_arrive_expect_tx", _head_full(ws, slot), nbytes_all)] + loads


def head_wait(lw) -> list:
    """The consumers' wait for this tile's heads, in front of the loop."""
    ws = lw.ws
    if not ws.heads:
        return []
    slot, phase = _head_slot(ws, None if ws.persistent is None else ws.persistent.it_c)
    return [evaluate_extern("tl::mbarrier_wait", _head_full(ws, slot), phase)]


def head_release(lw, end_of_tile=False) -> list:
    """A persistent kernel's consumer warps give the heads back once the loop no longer reads
    them, so that the producer can load the next tile's; where the heads share bytes with a
    buffer used after the loop (``heads_late``), at the end of the tile (``end_of_tile``),
    after its closing barrier."""
    ws = lw.ws
    if not ws.heads or ws.persistent is None or ws.heads_late != end_of_tile:
        return []
    slot, _ = _head_slot(ws, ws.persistent.it_c)
    return [_when(evaluate_extern("tl::mbarrier_arrive", _head_empty(ws, slot)), _releasing_lanes(lw))]


def _releasing_lanes(lw):
    """The consumer threads that arrive on an empty barrier: all of them (None; the barrier counts
    the consumer threads, see the module docstring), or in a cluster lanes 0 and 1 of each warp
    (lane r arrives on block rank r; the barrier counts the warps of both blocks)."""
    if lw.ws.cluster is None:
        return None
    return tirx.LT(tirx.floormod(lw.tid, i32(32)), i32(2))


def _when(stmt, *conds):
    """``stmt`` under the conjunction of the conditions that are not None (none: ``stmt``)."""
    conds = [c for c in conds if c is not None]
    if not conds:
        return stmt
    cond = conds[0]
    for c in conds[1:]:
        cond = tirx.And(cond, c)
    return tirx.IfThenElse(cond, stmt, None)


_ARRIVES = ("tl::mbarrier_arrive", "tl::mbarrier_arrive_cluster")
_WARP_ORDERED = thread_sync._BARRIERS + ("__syncwarp",)


def _is_lane_release(st) -> bool:
    """A warp's release of a ring slot or the heads by its releasing lanes:
    ``if <lane test>: mbarrier_arrive(...)``."""
    return isinstance(st, tirx.IfThenElse) and st.else_case is None and \
        isinstance(st.then_case, tirx.Evaluate) and extern_name(st.then_case) in _ARRIVES


def _reads_shared(st) -> bool:
    """Whether ``st`` reads shared memory with plain loads (a wgmma operand's ``&smem[...]`` is an
    address, not a read)."""
    addressed, loads = [], []

    def visit(e):
        if isinstance(e, tirx.Call) and getattr(e.op, "name", "") == "tirx.address_of":
            addressed.extend(e.args)
        elif isinstance(e, ir.TensorLoad) and scope_of(e.source) in SHARED_SCOPES:
            loads.append(e)

    tvm_ffi_walk(st, visit)
    return any(not any(ld.same_as(a) for a in addressed) for ld in loads)


def fence_warp_releases(stmt):
    """``stmt`` with a ``__syncwarp()`` in front of each lane release (``_is_lane_release``) that
    plain shared-memory reads of the warp's other lanes precede with no barrier in between
    (attention backward's lse and Delta rows, read by every lane, and the slot given back by lane
    0 under early release): the arrive's release then orders those reads too, as the PTX memory
    model asks (an arrive releases only its own thread's accesses); the lanes run converged there,
    so it costs an instruction. (racecheck does not see this ordering either way: its hazards on
    the backward were the raw bulk copies', ``_row_spec``.) Walked in program order; a loop's body is walked twice, its entry
    state the loop's own end state."""

    def go(st, dirty):
        if isinstance(st, tirx.SeqStmt):
            parts = []
            for x in st.seq:
                x, dirty = go(x, dirty)
                parts.append(x)
            return seq(parts), dirty
        if _is_lane_release(st):
            return (seq([evaluate_extern("__syncwarp"), st]) if dirty else st), False
        if isinstance(st, tirx.Evaluate) and extern_name(st) in _WARP_ORDERED:
            return st, False
        if isinstance(st, tirx.For):     # (after it: its end state, or its entry state if it ran no iteration)
            _, end = go(st.body, dirty)
            body, end = go(st.body, dirty or end)
            return tirx.For(st.loop_var, st.min, st.extent, st.kind, body, thread_binding=st.thread_binding,
                            annotations=st.annotations, step=st.step, span=st.span), end or dirty
        if isinstance(st, tirx.IfThenElse):
            dirty = dirty or _reads_shared(st.condition)
            then, d1 = go(st.then_case, dirty)
            other, d2 = (None, dirty) if st.else_case is None else go(st.else_case, dirty)
            return tirx.IfThenElse(st.condition, then, other, span=st.span), d1 or d2
        return st, dirty or _reads_shared(st)

    return go(stmt, False)[0]


def _arrive_empty(ws, stage, lane, group=0):
    """A consumer warp's release of ``empty(group, stage)`` (by its releasing lanes): on this
    block's, or in a cluster on both blocks' (their producers both write this stage of this
    block), lane r arriving on rank r so that the two remote arrivals go out side by side."""
    if ws.cluster is None:
        return evaluate_extern("tl::mbarrier_arrive", _empty(ws, group, stage))
    return evaluate_extern("tl::mbarrier_arrive_cluster", _empty(ws, group, stage), tirx.Cast("uint32", lane))


def _lower_windows(lw, loop, consumers, base, releaser):
    """The consumer loop of a one-stage general body (``tl.enable_ws_single_stage``): each tile
    group (the staged tiles first and last touched by the same statements: attention's K, read
    by S = Q K^T, and V, read by O += P V) has a full / empty pair of its own; the consumers wait
    for a group's tile in front of its first reader and give it back right after its last one,
    so the producer loads K of iteration j+1 under the softmax and P V of j, and V of j+1 under
    S = Q K^T and the softmax of j+1 (upstream's one-stage schedule):

        for j:  [wait full(g) before the first reader of g] ... [arrive empty(g) after its
                last reader] ...                              # phase (base + j) & 1, stage 0

    Sound with one buffer per tile: the producer writes a group's tile only after every consumer
    thread arrived on its empty barrier, i.e. after its last read of the previous iteration
    (gemms are synchronous here: their wgmma retired); the consumers read it only after the TMA
    bytes landed (full). The producer issues the groups of iteration j+1 in the order the
    consumers first read them, and every group of iteration j was issued before any of j+1, so
    the wait for a release never waits on a load not yet issued. The body needs no barrier of its
    own (``_single_stage_blocker``), so lowering it in pieces places none. ``releaser``: the
    lanes that arrive (``_releasing_lanes``)."""
    ws = lw.ws
    S = ws.stages
    k, start, n = loop.loop_var, lw.rewrite(loop.min), lw.rewrite(loop.extent)
    j = base + (k - start)
    stage = tirx.floormod(j, i32(S))
    phase = tirx.floormod(tirx.floordiv(j, i32(S)), i32(2))
    body, chunk = [], []

    def flush():
        if chunk:
            lowered = thread_sync.lower_sequence(lw, list(chunk))
            if lowered is not None:
                body.append(lowered)
            chunk.clear()

    for i, c in enumerate(consumers):
        waits = [g for g, (first, _) in enumerate(ws.windows) if first == i]
        if waits:
            flush()
            body += [evaluate_extern("tl::mbarrier_wait", _full(ws, g, stage), phase) for g in waits]
        chunk.append(c)
        releases = [g for g, (_, last) in enumerate(ws.windows) if last == i]
        if releases:
            flush()
            body += [_when(_arrive_empty(ws, stage, None, g), releaser) for g in releases]
    flush()
    return tirx.For(k, start, n, tirx.ForKind.SERIAL, seq(body), span=loop.span)


def _overlap_plan(lw, consumers, S, split):
    """(first gemm, last gemm, index before which the last gemm must have retired, indices of the
    statements deferred to the next iteration: ``_deferred``) when the general body can overlap
    its last gemm with the next iteration (see ``_lower_overlapped``), else None. Needs S >= 3
    (a stage is released one iteration later) or, where the last gemm's tiles have barriers of
    their own (``split``), S >= 2; float accumulators, the last gemm last in the body, nothing up
    to the first gemm touching the last gemm's operands, and no shared-memory barrier inside the
    body (the body is lowered in pieces)."""
    if S < (2 if split else 3) or lw.configs.get("tl.disable_wgmma_overlap"):
        return None
    gemms = [i for i, c in enumerate(consumers) if op_name(c) == "gemm"]
    if len(gemms) < 2 or gemms[-1] != len(consumers) - 1:
        return None
    first, last = gemms[0], gemms[-1]
    for g in (first, last):
        args = consumers[g].value.args
        plan = lw.layouts.gemms.get(consumers[g])
        if plan is None or plan.kind != "wgmma" or str(decode_region(args[2]).buffer.dtype) != "float32" \
                or const_int(args[6]) is None:
            return None
    if scope_of(decode_region(consumers[first].value.args[0]).buffer) not in SHARED_SCOPES:
        return None
    syncs, (tail_r, tail_w), (head_r, head_w), _ = thread_sync.plan_sequence(consumers, lw.smem_alias)
    if syncs or thread_sync.conflict(head_r, head_w, tail_r, tail_w):
        return None
    scopes = SHARED_SCOPES + (FRAGMENT_SCOPE,)
    lr, lw_ = thread_sync.buffer_rw(consumers[last], scopes)
    touched = lr | lw_
    for c in consumers[:first + 1]:
        r, w = thread_sync.buffer_rw(c, scopes)
        if (r | w) & touched:
            return None
    wait_at = last
    for i in range(first + 1, last):
        r, w = thread_sync.buffer_rw(consumers[i], scopes)
        if (r | w) & touched:
            wait_at = i
            break
    return first, last, wait_at, _deferred(consumers, first, last, wait_at, scopes)


def _deferred(consumers, first, last, wait_at, scopes):
    """Indices of the statements between the wait and the last gemm that can run one iteration
    later, right before the last gemm is issued there (attention's rescale of O, which then runs
    under S = Q K^T of the next iteration): they update the last gemm's accumulator, do not
    touch its A operand (P), and conflict neither with the statements they move past (the rest
    of the body after them, the next iteration's statements up to its first gemm)."""
    def rw(i):
        return thread_sync.buffer_rw(consumers[i], scopes)

    acc = decode_region(consumers[last].value.args[2]).buffer
    a_op = decode_region(consumers[last].value.args[0]).buffer
    head = [rw(i) for i in range(first + 1)]
    moved, staying = [], []
    for i in reversed(range(wait_at, last)):
        mine = rw(i)
        touched = mine[0] | mine[1]
        if acc in mine[1] and a_op not in touched and not any(thread_sync.conflict(*mine, *o) for o in head + staying):
            moved.append(i)
        else:
            staying.append(mine)
    return sorted(moved)


def _lower_overlapped(lw, loop, consumers, rotation, base, releaser):
    """The general consumer loop with the last gemm (O += P V) of iteration j-1 moved into
    iteration j, issued asynchronously right after iteration j's first gemm (S = Q K^T), so that
    the softmax of j runs while the tensor cores work on P V of j-1 (FlashAttention-3's
    intra-warpgroup overlap). The reordering is valid because nothing from the start of the body
    up to the first gemm touches the last gemm's operands; the last gemm must have retired
    before the first statement that does (the cast into P, the rescale of O). With one barrier
    group a stage is released one iteration late; with two (``plan_overlap``: V's tiles apart)
    K's tile goes back as soon as S = Q K^T retires and V's once P V has:

        for j:  wait full(0, j); pre...; first(j) async
                if j > 0: deferred(j-1); last(j-1) async
                wgmma_wait<1> (j > 0) or <0>       # S of j is ready
                                                    # (j = 0 is peeled off the loop: no branches)
                [two groups: release empty(0, j)]
                mid...                             # overlaps last(j-1)
                wgmma_wait<0>; keep P live          # before the first statement touching P or O
                post... (but the deferred)
                [two groups: wait full(1, j)]       # V of j, read by last(j) in iteration j+1
                if j > 0: release stage j-1 (one group) / empty(1, j-1) (two)
        if n > 0: deferred(n-1); last(n-1)          # synchronous
                  [persistent: release V's stage n-1 (its ring slot is reused by the next tile)]

    The deferred statements (``_deferred``: the rescale of O) run under first(j) instead of
    between the wait for last(j-1) and the next issue, where the warpgroup's tensor work would
    stall on them.

    Iteration j uses ring slot ``base + j`` (``base``: the tile's first slot in a persistent
    kernel, else 0).
    """
    ws = lw.ws
    S = ws.stages
    split = len(ws.groups) > 1
    first, last, wait_at, deferred = rotation
    late = [consumers[i] for i in deferred]          # run in the next iteration, before last
    k, start, n = loop.loop_var, lw.rewrite(loop.min), lw.rewrite(loop.extent)
    j = k - start
    slot = base + j
    staged = [decode_region(p.value.args[1]).buffer for p, _ in ws.producers]

    def lowered_at(stmts, iteration, asynchronous=False):
        saved_vmap, saved_stage = dict(lw.vmap), dict(lw.stage)
        if iteration is not None:
            lw.vmap[k] = start + iteration
        for b in staged:
            lw.stage[b] = tirx.floormod(slot if iteration is None else base + iteration, i32(S))
        try:
            if asynchronous:
                return lw.lower_gemm(stmts, asynchronous=True)
            return thread_sync.lower_sequence(lw, stmts) if stmts else None
        finally:
            lw.vmap, lw.stage = saved_vmap, saved_stage

    def frag_ptr(stmt, operand):
        buf = decode_region(stmt.value.args[operand]).buffer
        return buf, tirx.address_of(tirx.BufferLoad(lw.frag[buf], [i32(0)]))

    def release(g, stage):
        return _when(_arrive_empty(ws, stage, None, g), releaser)

    g_first, g_last = consumers[first], consumers[last]
    c_first, c_first_ptr = frag_ptr(g_first, 2)
    c_last, c_last_ptr = frag_ptr(g_last, 2)
    n_first = lw.layouts.fragments[c_first].local_size
    n_last = lw.layouts.fragments[c_last].local_size
    wait_last = [evaluate_extern(f"tl::wgmma_wait<0, {n_last}>", c_last_ptr)]
    a_last = decode_region(g_last.value.args[0]).buffer
    if a_last in lw.frag:   # P in registers: keep it live up to the wait
        count = lw.layouts.fragments[a_last].local_size
        wait_last.append(evaluate_extern(f"tl::wgmma_fence_operand<{count}>",
                                         tirx.address_of(tirx.BufferLoad(lw.frag[a_last], [i32(0)]))))
    # group 0 goes back once the first gemm retired, unless a later statement reads its tiles
    early = {staged[i] for i in ws.groups[0]}
    late_reads = set()
    for c in consumers[first + 1:last]:
        r, w = thread_sync.buffer_rw(c, SHARED_SCOPES)
        late_reads |= r | w
    early_release = split and not (early & late_reads)
    post = [c for i, c in enumerate(consumers[wait_at:last], wait_at) if i not in deferred]

    def body_at(peeled):
        """The loop's iteration, or (``peeled``) iteration 0, which has no previous iteration to
        finish."""
        jj = i32(0) if peeled else j
        at = i32(0) if peeled else None
        stage = tirx.floormod(base + jj, i32(S))
        phase = tirx.floormod(tirx.floordiv(base + jj, i32(S)), i32(2))
        body = [evaluate_extern("tl::mbarrier_wait", _full(ws, 0, stage), phase),
                lowered_at(consumers[:first], at), lowered_at(g_first, at, asynchronous=True)]
        if not peeled:   # the previous iteration: k - 1 in its statements, stage (j - 1) % S
            body += ([lowered_at(late, jj - 1)] if late else []) + [lowered_at(g_last, jj - 1, asynchronous=True)]
        body.append(evaluate_extern(f"tl::wgmma_wait<{0 if peeled else 1}, {n_first}>", c_first_ptr))
        if early_release:
            body.append(release(0, stage))
        body += [lowered_at(consumers[first + 1:wait_at], at)] + ([] if peeled else wait_last) + \
            [lowered_at(post, at)]
        if split:
            if not early_release:
                body.append(release(0, stage))
            body.append(evaluate_extern("tl::mbarrier_wait", _full(ws, 1, stage), phase))
        if not peeled:
            body.append(release(len(ws.groups) - 1, tirx.floormod(base + jj - 1, i32(S))))
        return seq(body)

    # The first iteration is peeled off: ptxas injects a wgmma wait before the deferred
    # statements (C7517) when they and the previous gemm sit in a branch on the iteration.
    first_it = body_at(True)
    steady = body_at(False)
    tail = ([lowered_at(late, n - 1)] if late else []) + [lowered_at([g_last], n - 1)]
    pp = _Pingpong.plan(lw, [first_it, steady] + tail)
    if pp is not None:   # (the last P V's turn ends at its issue, as the loop's do; its wait follows)
        first_it, steady = pp.around_issues(first_it), pp.around_issues(steady)
        tail = ([pp.sync_me()] + ([lowered_at(late, n - 1)] if late else [])
                + [lowered_at(g_last, n - 1, asynchronous=True), pp.arrive_other()] + wait_last)
    out = [first_it if lw.prove(tirx.GT(n, i32(0))) else tirx.IfThenElse(tirx.GT(n, i32(0)), first_it, None),
           tirx.For(k, start + 1, n - 1, tirx.ForKind.SERIAL, steady, span=loop.span)]
    if ws.persistent is not None:   # the ring runs on into the next tile: give the last stage back
        tail.append(release(len(ws.groups) - 1, tirx.floormod(base + n - 1, i32(S))))
    tail = seq(tail)
    out.append(tail if lw.prove(tirx.GT(n, i32(0))) else tirx.IfThenElse(tirx.GT(n, i32(0)), tail, None))
    if pp is not None:
        out = [pp.start()] + out + [pp.finish()]
    return out


# the two consumer warpgroups of an overlapped attention loop take turns at the tensor cores (by
# default in the paired causal schedule; the key true / false turns it on / off everywhere)
PINGPONG_KEY = PassConfigKey.TL_ENABLE_WARPGROUP_PINGPONG.value
_ASYNC_ISSUES = ("tl::wgmma_gemm_ss_async", "tl::wgmma_gemm_rs_async")


class _Pingpong:
    """``tl.enable_warpgroup_pingpong`` (``wanted``): FlashAttention-3's inter-warpgroup schedule for
    an overlapped loop (``_lower_overlapped``) on two consumer warpgroups that split the rows.
    Each iteration's gemm issues (S = Q K^T of j, then P V of j - 1) form one turn: warpgroup w
    waits on named barrier ``B_w`` before its first issue and arrives on the other's after its
    last, so the turns alternate, 0, 1, 0, 1..., and one warpgroup's softmax runs while the other
    one's gemms hold the tensor cores (without it both issue together, then both wait on the
    exponentials). The last P V after the loop is a turn too. Balance per loop: warpgroup 1
    arrives on ``B_0`` once before the loop (warpgroup 0 goes first) and warpgroup 0 waits on it
    once after (for warpgroup 1's last arrival; ``finish``), so every barrier phase completes with
    128 threads of each warpgroup in every tile and none is left open: a warpgroup never arrives
    twice on a barrier before the other has taken the first arrival. Not where the loop body has
    a barrier over all consumer threads (a cross-warpgroup reduction would meet the other
    warpgroup mid-turn)."""

    def __init__(self, lw, ids):
        self.lw, self.ids = lw, ids
        self.wg = tirx.floordiv(lw.tid, i32(128))

    @staticmethod
    def wanted(lw) -> bool:
        """The key where given; by default only in the paired persistent schedule (causal attention:
        ``Persistent.paired_rows``), where it measured 1-2 % faster on the H200 (session 38) while
        non-causal attention ran up to 2 % slower with it."""
        if PINGPONG_KEY in lw.configs:
            return bool(lw.configs[PINGPONG_KEY])
        return bool(lw.ws.persistent is not None and lw.ws.persistent.paired_rows)

    @classmethod
    def plan(cls, lw, lowered) -> "_Pingpong | None":
        if lw.T != 256 or lw.ws is None or lw.ws.pair or not cls.wanted(lw):
            return None
        found = []
        for st in lowered:
            walk_stmts(st, lambda x: found.append(x) if thread_sync.is_barrier(x) else None)
        if found:
            return None
        ids = lw.__dict__.setdefault("partial_barrier_ids", {})
        for key in ("pingpong 0", "pingpong 1"):
            if key not in ids:
                ids[key] = thread_regions.FIRST_BARRIER + len(ids)
        if ids["pingpong 1"] > thread_regions.MAX_BARRIER:
            return None
        return cls(lw, (ids["pingpong 0"], ids["pingpong 1"]))

    def _on(self, op, mine: bool):
        """``op`` on this warpgroup's barrier (``mine``) or the other's; constant barrier ids in a
        warp-uniform branch (with the id in a register ptxas reserves all 16 barriers)."""
        first, second = (evaluate_extern(op, i32(self.ids[b]), 256) for b in ((0, 1) if mine else (1, 0)))
        return tirx.IfThenElse(tirx.EQ(self.wg, i32(0)), first, second)

    def sync_me(self):
        return self._on("tl::named_barrier_sync", True)

    def arrive_other(self):
        return self._on("tl::named_barrier_arrive", False)

    def _by(self, wg, op, b):
        """Warpgroup ``wg`` alone runs ``op`` on barrier ``B_b``."""
        return _when(evaluate_extern(op, i32(self.ids[b]), 256), tirx.EQ(self.wg, i32(wg)))

    def start(self):
        return self._by(1, "tl::named_barrier_arrive", 0)

    def finish(self):
        """Warpgroup 0 takes warpgroup 1's last arrival on ``B_0``. In a persistent kernel it
        then releases warpgroup 1 through ``B_1``: else warpgroup 1 might arrive on ``B_0`` again
        for the next tile (``start``) before warpgroup 0 took this one, and a phase of 256
        arrivals would complete without warpgroup 0."""
        out = [self._by(0, "tl::named_barrier_sync", 0)]
        if self.lw.ws.persistent is not None:
            out += [self._by(0, "tl::named_barrier_arrive", 1), self._by(1, "tl::named_barrier_sync", 1)]
        return seq(out)

    def around_issues(self, body):
        """``body`` (one iteration) with the turn around its run of asynchronous gemm issues."""
        items = flatten([body])
        at = [i for i, st in enumerate(items) if _issues_gemm(st)]
        assert at, "an overlapped iteration without its asynchronous gemm issue"
        first, last = at[0], at[-1]
        return seq(items[:first] + [self.sync_me()] + items[first:last + 1] + [self.arrive_other()]
                   + items[last + 1:])


def _issues_gemm(st) -> bool:
    found = []
    walk_stmts(st, lambda x: found.append(1) if (extern_name(x) or "").startswith(_ASYNC_ISSUES) else None)
    return bool(found)


_ROLE_FREE = (tirx.Bind, tirx.AllocBuffer, tirx.DeclBuffer)


def guard_consumers(stmt, lw, tile_prelude=()):
    """Give the consumer warpgroups everything outside the producer loop: the sequence holding
    the split becomes ``bindings...; if tid >= T: producer else: [setmaxnreg_inc] before...
    consumer loop after...``, so the accumulator lives inside the consumer branch only (its
    register budget is the raised one). Bindings of pure index arithmetic and buffer declarations
    stay in front (the producer may use them); anything else outside that sequence is wrapped
    in ``if threadIdx.x < T``. A persistent kernel (``ws.persistent``) wraps both roles in
    their tile loops (``_persist``); ``tile_prelude`` (the block swizzle's bindings) and the
    bindings that depend on the block index move into them."""
    ws = lw.ws
    marker = ws.marker

    def has_marker(s) -> bool:
        found = []
        walk_stmts(s, lambda x: found.append(1) if x.same_as(marker) else None)
        return bool(found)

    def consumer_only(s):
        return tirx.IfThenElse(tirx.LT(lw.tid, i32(lw.T)), s, None)

    def split(front, before, after):
        if ws.persistent is not None:
            return _persist(lw, list(tile_prelude) + front, before, after)
        consumer = seq(ws.raise_regs + before + [marker.else_case] + after)
        return seq(front + [tirx.IfThenElse(marker.condition, marker.then_case, consumer, span=marker.span)])

    def go(s):
        if isinstance(s, tirx.AttrStmt) and has_marker(s):
            return tirx.AttrStmt(s.node, s.attr_key, s.value, go(s.body), span=s.span)
        if isinstance(s, tirx.SeqStmt) and has_marker(s):
            items = flatten(s.seq)
            at = next((i for i, c in enumerate(items) if c.same_as(marker)), None)
            if at is None:
                return seq([go(c) if has_marker(c) else c if isinstance(c, _ROLE_FREE) else consumer_only(c)
                            for c in items])
            front, before = [], []
            for c in items[:at]:
                pure = isinstance(c, (tirx.AllocBuffer, tirx.DeclBuffer)) or \
                    (isinstance(c, tirx.Bind) and not has_load(c))
                (front if pure else before).append(c)
            return split(front, before, items[at + 1:])
        if s.same_as(marker):
            return split([], [], [])
        raise AssertionError("the warp-specialised loop must be at the top level of the kernel")

    return go(stmt)


def _replace(stmt, old, new):
    """``stmt`` with the statement ``old`` (by identity) replaced by ``new``."""
    if stmt is None or stmt.same_as(old):
        return new if stmt is not None else None
    if isinstance(stmt, tirx.SeqStmt):
        return seq([_replace(c, old, new) for c in stmt.seq])
    if isinstance(stmt, tirx.IfThenElse):
        return tirx.IfThenElse(stmt.condition, _replace(stmt.then_case, old, new),
                               _replace(stmt.else_case, old, new), span=stmt.span)
    return stmt


# paired causal tiles keep the plain round robin of pairs to the end (``_PairedTail``)
PAIRED_TAIL_KEY = PassConfigKey.TL_DISABLE_PAIRED_TAIL_SPLIT.value


class _PairedTail:
    """The last rounds of a paired persistent schedule (``Persistent.paired_rows``), as index
    expressions of the grid size G (known at run time only) and the block index b.

    U pairs of equal work (gx + 1 iterations each) on G blocks: a round robin of pairs ends with
    U % G blocks running one pair more than the rest (causal B8 H32 S4096 on 132 SMs: 4096 pairs,
    4 blocks run a 32nd while 128 idle: 3 % of the kernel). So each block runs the first
    q - 1 rounds (q = U // G) as pairs, and the remaining NT = U - (q - 1) G pairs (at least G)
    as 2 NT single tiles, sorted longest first and dealt like a snake draft (round r in block
    order when r is even, in reverse when odd): the longest tiles go out first, the shortest
    last, every block ends within about one short tile of the others (the same grid: at most
    1025 iterations against the even 1024).

    Sorted order, from the pairs' layout: the tail's pairs are u in [P0, U), P0 = (q - 1) G,
    whole heads of ``half`` = gx / 2 pairs but the first (P0 = h0 * half + s). Pair position j
    (row blocks gx - 1 - j and j) occurs F + [j >= s] times, F = U / half - h0 - 1 full heads.
    Rank k < NT is a long tile (row gx - 1 - j, j ascending); rank k >= NT the short tile of rank
    2 NT - 1 - k among the long ones (row j, j descending). Within a j the heads go in order.
    The per-block values are bindings in front of the role split (``binds``); each role binds
    its tile's rank and position (``decode``)."""

    def __init__(self, P, grid, b):
        U, half = P.tiles, i32(P.paired_rows // 2)
        self.P, self.grid, self.b = P, grid, b
        v = {n: tirx.Var(f"tail_{n}", "int32") for n in ("first", "nt", "h0", "s", "f", "tiles")}
        self.v = v
        rounds = tirx.Max(tirx.truncdiv(U, grid) - i32(1), i32(0))     # rounds of pairs, every block
        p0 = rounds * grid
        tiles = v["nt"] * i32(2)
        full, rem = tirx.truncdiv(tiles, grid), tirx.truncmod(tiles, grid)
        mine = tirx.Select(tirx.EQ(tirx.truncmod(full, i32(2)), i32(0)), b, grid - i32(1) - b)
        self.binds = [tirx.Bind(v["first"], rounds * i32(2)),           # this block's tiles before the tail
                      tirx.Bind(v["nt"], U - p0),
                      tirx.Bind(v["h0"], tirx.truncdiv(p0, half)),
                      tirx.Bind(v["s"], tirx.truncmod(p0, half)),
                      tirx.Bind(v["f"], tirx.truncdiv(U, half) - tirx.truncdiv(p0, half) - i32(1)),
                      tirx.Bind(v["tiles"], v["first"] + full + tirx.Cast("int32", tirx.LT(mine, rem)))]
        self.count = v["tiles"]

    def decode(self, it, suffix, row_x, unit):
        """([bindings], row block, unit / half) of tile ``it``: the pair's as given before the tail."""
        v, G, b = self.v, self.grid, self.b
        s, f, nt = v["s"], v["f"], v["nt"]
        k, kk, j = (tirx.Var(f"tail_{n}_{suffix}", "int32") for n in ("k", "kk", "j"))
        r = it - v["first"]
        binds = [tirx.Bind(k, r * G + tirx.Select(tirx.EQ(tirx.truncmod(r, i32(2)), i32(0)), b, G - i32(1) - b)),
                 tirx.Bind(kk, tirx.Select(tirx.LT(k, nt), k, nt * i32(2) - i32(1) - k)),
                 tirx.Bind(j, tirx.Select(tirx.And(tirx.GT(f, i32(0)), tirx.LT(kk, s * f)),
                                          tirx.truncdiv(kk, tirx.Max(f, i32(1))), tirx.truncdiv(kk + s, f + i32(1))))]
        before = j * f + tirx.Max(j - s, i32(0))
        head = v["h0"] + (kk - before) + tirx.Cast("int32", tirx.LT(j, s))
        in_tail = tirx.GE(it, v["first"])
        gx = self.P.paired_rows
        return (binds, tirx.Select(in_tail, tirx.Select(tirx.LT(k, nt), i32(gx - 1) - j, j), row_x),
                tirx.Select(in_tail, head, unit))


def _tile_index_binds(t, dims, target, last) -> list:
    """Bindings of ``target[v]`` for each ``(v, extent)`` of ``dims``: the linear tile index ``t``
    split, the first dimension fastest (the grid's last dimension, ``last``, takes the rest)."""
    binds, stride = [], None
    for v, e in dims:
        idx = t if stride is None else tirx.truncdiv(t, stride)
        binds.append(tirx.Bind(target[v], idx if v.same_as(last) else tirx.truncmod(idx, e)))
        stride = e if stride is None else stride * e
    return binds


def _pair_flag_binds(ws, P, tile_binds) -> list:
    """A persistent cluster's producer, per tile: the block indices and tile bindings (a user's
    swizzle) of the peer's tile t ^ 1 (``_q``), then each multicast candidate's flag, true where
    its coordinates are the same for both tiles (both blocks compute the same flags). A flag whose
    coordinates differ in the issue loop's own variable stays false (the block loads its own)."""
    t, stride = i32(0), None
    for v, e in P.dims:     # this tile's linear index, from its block indices
        t = t + (v if stride is None else v * stride)
        stride = e if stride is None else stride * e
    t_q = tirx.Var("tile_q", "int32")
    peer = {v: tirx.Var(f"{v.name}_q", "int32") for v, _ in P.dims}
    out = [tirx.Bind(t_q, tirx.bitwise_xor(t, i32(1)))] + _tile_index_binds(t_q, P.dims, peer, P.dims[-1][0])
    for b in tile_binds:
        peer[b.var] = tirx.Var(f"{b.var.name}_q", "int32")
        out.append(tirx.Bind(peer[b.var], substitute(b.value, peer)))
    k = ws.issue_loop.loop_var
    for flag, coords in ws.cluster.pair_flags:
        differ = [(c, substitute(c, peer)) for c in coords]
        differ = [(c, c_q) for c, c_q in differ if not ir.structural_equal(c, c_q)]
        if any(uses_vars(c, [k]) for c, _ in differ):
            same = tirx.const(False, "bool")
        else:
            same = functools.reduce(tirx.And, [tirx.EQ(c, c_q) for c, c_q in differ], tirx.const(True, "bool"))
        out.append(tirx.Bind(flag, same))
    return out


def _persist(lw, front, before, after):
    """The role split of a persistent GEMM (see ``Persistent``):

        bindings independent of the block index; declarations
        if tid >= T:  [setmaxnreg_dec]; if tid == T: prefetch descriptors
                          for it in [0, ceil((tiles - blockIdx.x) / gridDim.x)):
                              tile = blockIdx.x + it * gridDim.x -> its block indices
                              bindings of the block index (swizzle); TMA issue loop
        else:         [setmaxnreg_inc]
                      for it in ...: the same tile; before...; main loop; after...
                                     [consumer barrier, if before/after touch shared memory]

    The consumers' epilogue of one tile runs while the producer fills the ring for the next."""
    ws, P = lw.ws, lw.ws.persistent
    marker = ws.marker
    block_vars = [v for v, _ in P.dims]
    keep, tile_binds, dependent = [], [], list(block_vars)
    for c in front:
        if isinstance(c, tirx.Bind) and uses_vars(c.value, dependent):
            tile_binds.append(c)
            dependent.append(c.var)
        else:
            keep.append(c)
    # Every index here is non-negative, so C's / and % (truncdiv / truncmod) are exact; floor
    # division would lower to sign fix-ups, the grid size being unknown to the simplifier.
    grid = tirx.Var("num_blocks", "int32")
    keep.append(tirx.Bind(grid, tirx.call_extern("int32", "tl::num_blocks")))
    bx = P.dims[0][0]
    count = tirx.truncdiv(P.tiles - bx + grid - 1, grid)
    split = None
    if P.paired_rows and lw.configs.get(PAIRED_TAIL_KEY):
        count = count * i32(2)     # two tiles a unit, to the end
    elif P.paired_rows:            # ... the last rounds as single tiles (``_PairedTail``)
        split = _PairedTail(P, grid, bx)
        count = split.count
        keep.extend(split.binds)

    def tile_loop(it, suffix, body, renames):
        new = {v: tirx.Var(f"{v.name}_{suffix}", "int32") for v in block_vars}
        body = substitute_stmt(body, {**new, **renames}, strict=True)
        dims = P.dims
        if P.paired_rows:   # unit u = row p of pair and the rest; its longer tile (gx - 1 - p) first
            gx, half = P.paired_rows, i32(P.paired_rows // 2)
            t = bx + tirx.truncdiv(it, i32(2)) * grid
            p = tirx.truncmod(t, half)
            row_x = tirx.Select(tirx.EQ(tirx.truncmod(it, i32(2)), i32(0)), i32(gx - 1) - p, p)
            t, binds = tirx.truncdiv(t, half), []
            if split is not None:    # the last rounds: single tiles, longest first (``_PairedTail``)
                binds, row_x, t = split.decode(it, suffix, row_x, t)
            binds, dims = binds + [tirx.Bind(new[dims[0][0]], row_x)], dims[1:]
        else:
            t, binds = bx + it * grid, []
        binds += _tile_index_binds(t, dims, new, P.dims[-1][0])
        return tirx.For(it, i32(0), count, tirx.ForKind.SERIAL, seq(binds + [body]), span=marker.span)

    # producer: its own copies of the tile bindings around the TMA issue loop
    renames = {b.var: tirx.Var(f"{b.var.name}_p", "int32") for b in tile_binds}
    pairing = _pair_flag_binds(ws, P, tile_binds) if ws.cluster is not None and ws.cluster.persistent else []
    looped = tile_loop(P.it_p, "p", seq(tile_binds + pairing + ws.head_issue + [ws.issue_loop] + P.advance(P.slots_p)),
                       renames)
    producer = _replace(marker.then_case, ws.issue_loop, looped)
    found = []
    walk_stmts(producer, lambda x: found.append(1) if x.same_as(looped) else None)
    # a producer without its tile loop would fill one tile's ring while the consumers wait for all
    assert found, "the persistent producer lost its tile loop"
    after, drain = _defer_store_wait(lw, before, after)
    tail = []
    reads, writes = thread_sync.shared_rw(seq(before + after)) if before or after else (set(), set())
    if (reads or writes) and not drain:   # the next tile's epilogue must not overwrite what this one still
        tail = [thread_sync.sync_stmt(lw)]    # reads (with the wait deferred, its own barrier sees to that)
    if ws.heads_late:   # the heads' bytes are free once the tile's barrier is passed
        tail = [thread_sync.sync_stmt(lw)] + head_release(lw, end_of_tile=True)
    body = seq(tile_binds + before + [marker.else_case] + after + tail + P.advance(P.slots_c))
    consumer = seq(ws.raise_regs + (P.slots_c.start() if P.slots_c else []) + [tile_loop(P.it_c, "t", body, {})]
                   + drain)
    return seq(keep + [tirx.IfThenElse(marker.condition, producer, consumer, span=marker.span)])


_STORE_WAIT = "tl::tma_store_wait<0>"


def _is_store_group(st) -> bool:
    """Thread 0's TMA stores of an epilogue tile, closed by its wait (``lower_copy._tma_store``)."""
    if not (isinstance(st, tirx.IfThenElse) and st.else_case is None):
        return False
    body = flatten([st.then_case])
    return len(body) > 2 and all(isinstance(x, tirx.Evaluate) for x in body) and \
        extern_name(body[-1]) == _STORE_WAIT and extern_name(body[-2]) == "tl::tma_store_arrive"


def _defer_store_wait(lw, before, after) -> tuple:
    """(``after``, statements for after the tile loop) of a persistent kernel's consumers. Thread
    0 waits for a tile's TMA stores to have read shared memory right after issuing them, and the
    tile's closing barrier holds every consumer thread there. Where nothing of the next tile
    writes shared memory before its own epilogue (the main loop's consumers only read their
    stages), that wait goes in front of the first shared-memory write of the next tile's epilogue
    (with a barrier, so every thread writes after it), where the stores have long finished, and
    once after the last tile; the kernel stops for them then only. Not where the heads share the
    tile's bytes (``heads_late``: the next tile's Q lands there once the tile is over)."""
    ws = lw.ws
    items = _defer_inner_store_waits(lw, flatten(after))
    groups = [i for i, st in enumerate(items) if _is_store_group(st)]
    if ws.heads_late or len(groups) != 1:
        return items, []
    at = groups[0]
    if thread_sync.shared_rw(seq(before + [ws.marker.else_case]))[1] or \
            any(thread_sync.shared_rw(st)[1] for st in items[at + 1:]):
        return after, []
    first = next((i for i, st in enumerate(items[:at]) if thread_sync.shared_rw(st)[1]), None)
    if first is None:
        return after, []
    store = items[at]
    wait = _store_wait(lw)
    issued = next(i for i, st in enumerate(items) if _issues_store(st))
    bar = next((b for b in range(issued - 1, -1, -1) if thread_sync.is_barrier(items[b])), None)
    if bar is not None and bar > first and not _overlaps(thread_sync.shared_rw(store)[0],
                                                         thread_sync.shared_rw(seq(items[:bar]))[1]):
        # chunks through two tiles: what the next tile writes before its first store goes to the
        # other tile, so this tile's last store is waited for in front of that store's barrier
        items = (items[:bar] + [wait] + items[bar:at]
                 + [_without_wait(store)] + items[at + 1:])
        return items, [wait]
    items = (items[:first] + [wait, thread_sync.sync_stmt(lw)] + items[first:at]
             + [_without_wait(store)] + items[at + 1:])
    return items, [wait]


def _store_wait(lw):
    """Thread 0 waits until its TMA stores have read their shared tiles."""
    return _when(evaluate_extern(_STORE_WAIT), tirx.EQ(lw.tid, i32(0)))


def _without_wait(store):
    """Thread 0's store group (``_is_store_group``) without its closing wait."""
    return tirx.IfThenElse(store.condition, seq(flatten([store.then_case])[:-1]), None, span=store.span)


def _issues_store(st) -> bool:
    """Thread 0's TMA stores, with or without their closing wait."""
    return (isinstance(st, tirx.IfThenElse) and st.else_case is None
            and any((extern_name(x) or "").startswith("tl::tma_store_") for x in flatten([st.then_case])))


def _view_bytes(view):
    """(first, end) byte of a shared buffer's view in the block's allocation, or None."""
    off, n = const_int(view.elem_offset), const_int(view.shape[0]) if len(view.shape) == 1 else None
    esize = nbytes(str(view.dtype))
    return (off * esize, (off + n) * esize) if off is not None and n is not None else None


def _overlaps(a: set, b: set) -> bool:
    spans = [[_view_bytes(v) for v in side] for side in (a, b)]
    return any(x is None or y is None or (x[0] < y[1] and y[0] < x[1]) for x in spans[0] for y in spans[1])


def _defer_inner_store_waits(lw, items: list) -> list:
    """``items`` (a tile's epilogue) where it issues several TMA store groups (a chunked
    epilogue, ``stage_epilogue.chunked``): thread 0 waits for each group but the last to have read
    its tile, not right after issuing it, but in front of the barrier that precedes the next group,
    so that it waits while the other consumers write the next chunk, where those writes touch none
    of the group's bytes (its tile is then free once every thread is past that barrier)."""
    groups = [i for i, st in enumerate(items) if _is_store_group(st)]
    out = list(items)
    moved = []
    for g, nxt in zip(groups, groups[1:]):
        bar = next((b for b in range(nxt - 1, g, -1) if thread_sync.is_barrier(items[b])), None)
        if bar is None:
            continue
        source = thread_sync.shared_rw(items[g])[0]
        written = thread_sync.shared_rw(seq(items[g + 1:bar]))[1] if bar > g + 1 else set()
        if not source or _overlaps(source, written):
            continue
        out[g] = _without_wait(items[g])
        moved.append(bar)
    for bar in sorted(moved, reverse=True):
        out.insert(bar, _store_wait(lw))
    return out


__all__ = ["user_cluster_dims", "plan_heads", "SINGLE_HEAD_BUFFER_KEY", "coordinate_blocker", "PRODUCER_THREADS", "Cluster", "Persistent", "WsPlan", "cluster_plan", "plan",
           "plan_or_reason", "persistent_plan", "pair_candidate", "plan_pair", "plan_ring", "lower_loop",
           "init_barriers", "guard_consumers"]
