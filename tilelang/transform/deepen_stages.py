"""Deeper software pipelines where a block has its SM to itself (issue 20).

``T.Pipelined(n, num_stages=S)`` keeps S - 1 tiles in flight while one is consumed. In a grid of
at most one block per SM (a compile-time constant no larger than the target's SM count) nothing
else runs beside a block, so the shared memory its S buffers leave unused is nobody's, and a loop
that only moves data (no gemm: a GEMV, a reduction over tiles) waits on the latency of its few
tiles in flight: upstream's ``gemv_alloc_reducer`` (32 blocks of 128 x 128 fp16 tiles, two stages)
streams its 32 MB at a third of the card's bandwidth. Such a loop gets as many stages as the
block's shared memory holds (``MARGIN`` left for barriers and alignment), at most ``MAX_STAGES``
and at most its trip count where that is a constant.

Left as written: grids of run-time size or of more blocks than SMs, loops of fewer than two stages
(their own schedules: ``attention_schedule``), loops with the user's ``order`` / ``stage``
annotations, loops with a gemm anywhere in their body (their stages size a ring that the
warp-specialised and persistent plans also budget: only ``tl.enable_one_wave_deepening=True``
takes them, for measurement), and kernels with several pipelined loops.

``tl.enable_one_wave_deepening``: unset, the rule above; False, never; True, gemm loops too; an
integer N >= 2, the rule above with at most N stages (for measuring).

Contract: ``apply(func, arch, configs)`` returns ``func`` itself or a copy whose loop carries the
new ``num_stages`` and ``WRITTEN_ATTR`` (the user's count, for the hover); the engine and the
checker call it through ``attention_schedule.plan_one_stage``.
"""

from __future__ import annotations

from tvm import tirx

from tilelang import targets
from tilelang.language.loops import ORDER_ATTR, STAGE_ATTR, STAGES_ATTR
from tilelang.tir_utils import const_int, map_stmts, walk_stmts
from tilelang.transform.attention_schedule import alloc_bytes, one_wave
from tilelang.transform.kernel import SHARED_SCOPES, op_name
from tilelang.transform.pass_config import PassConfigKey
from tilelang.transform.pipelined_loop import PipelinedLoop, is_pipelined, num_stages

KEY = PassConfigKey.TL_ENABLE_ONE_WAVE_DEEPENING.value
WRITTEN_ATTR = "tl_written_num_stages"
MAX_STAGES = 6
MARGIN = 8 * 1024


def apply(func, arch, configs) -> object:
    setting = configs.get(KEY)
    if setting is False or setting == 0 or not one_wave(func, arch):
        return func
    cap = setting if isinstance(setting, int) and not isinstance(setting, bool) and setting >= 2 else MAX_STAGES
    loops = []
    walk_stmts(func.body, lambda s: loops.append(s) if isinstance(s, tirx.For) and is_pipelined(s) else None)
    if len(loops) != 1:
        return func
    loop = loops[0]
    stages = num_stages(loop)
    if stages < 2 or any(k in loop.annotations for k in (ORDER_ATTR, STAGE_ATTR)):
        return func
    gemm = _has_gemm(loop)
    if gemm and setting is not True:
        return func
    pipe = PipelinedLoop.of(loop)
    staged = set(pipe.staged) | set(pipe.gathered)
    if not staged:
        return func
    trips = const_int(loop.extent)
    if trips is not None:
        cap = min(cap, trips)
    sizes = alloc_bytes(func.body, SHARED_SCOPES)
    per_stage = sum(sizes.get(b, 1 << 30) for b in staged)
    rest = sum(sizes.values()) - per_stage
    room = targets.smem_per_block(arch) - MARGIN - rest
    depth = min(cap, room // per_stage) if per_stage else stages
    if gemm:
        depth = min(depth, (room - per_stage) // per_stage)   # the ring's extra buffer
    if depth <= stages:
        return func

    def on_loop(s):
        if not s.same_as(loop):
            return s
        notes = {**s.annotations, STAGES_ATTR: int(depth), WRITTEN_ATTR: stages}
        return tirx.For(s.loop_var, s.min, s.extent, s.kind, s.body, thread_binding=s.thread_binding,
                        annotations=notes, step=s.step, span=s.span)

    return func.with_body(map_stmts(func.body, loop=on_loop))


def _has_gemm(loop) -> bool:
    found = []
    walk_stmts(loop.body, lambda s: found.append(s) if op_name(s) in ("gemm", "gemm_sp") else None)
    return bool(found)
