"""Two consumer warpgroups for a one-warpgroup tile loop that cannot hold its fragments (issue 20).

Upstream's one-stage flash attention (``example_mha_fwd_bshd``: 128x128 tiles, D = 128,
``threads=128``) keeps S, P and O in registers through its loop: 320 32-bit words a thread on one
warpgroup, more than the 255 a thread may have, so every iteration spills and reloads part of
them (1.5 KB a thread here, 1 KB with upstream's own compiler). The same body on two warpgroups
(``threads=256``: each takes 64 of the 128 rows, m64 wgmma) holds 160 words and spills nothing;
upstream's BHSD example, which is written that way, runs 2.8x faster than the BSHD one at the
same size. Nothing in a tile program depends on how many threads run it as long as it is made of
tile operations (copies, gemms, reductions, ``T.Parallel`` nests): layout inference spreads every
fragment over the threads there are. So where the user's 128 threads would spill for certain,
this pass launches 256 and lets layout inference place the fragments over two warpgroups.

Applies (``widen(func, arch, configs)``, called before ``analyze_kernel`` by the compiler and by
the checker, so diagnostics and hovers describe the launched kernel), on sm_90a with wgmma, unless
``tl.enable_thread_widening`` is false (``WIDEN_DEFAULT``: on since the H200 measured upstream's
BSHD attention at 9.53 -> 5.07 ms, causal 4.92 -> 2.76), to a kernel that

* launches exactly 128 threads along threadIdx.x (no y / z) and never names its thread index;
* has a ``T.Pipelined`` loop with at least two gemms (not a one-stage loop that
  ``tl.enable_ws_single_stage`` warp-specialises its own way) whose live fragments
  (``attention_schedule.loop_fragment_registers``) exceed 255 words a thread with 128 threads and
  fit ``attention_schedule.REGISTER_BUDGET`` with 256;
* has only gemms whose accumulator has a multiple of 128 rows (each warpgroup then owns 64 of
  them, a whole m64 wgmma row block);
* does nothing whose effect depends on the number of threads outside ``T.Parallel`` nests and
  tile operations: no atomics, prints, warp shuffles, barriers, thread-index reads or other calls
  of its own there, and no fragment layouts of its own (``T.annotate_layout``).

Otherwise the function comes back unchanged. Contract: ``widen`` returns a function that differs
from ``func`` at most in the threadIdx.x extent of its launch.
"""

from __future__ import annotations

from tvm import tirx

from tilelang import targets
from tilelang.tir_utils import const_int, uses_vars, walk_stmts
from tilelang.transform.attention_schedule import (REGISTER_BUDGET, REGISTER_FILE, fragment_bytes,
                                                   loop_fragment_registers)
from tilelang.transform.kernel import FRAGMENT_SCOPE, decode_region, is_parallel_nest, op_name, scope_of
from tilelang.transform.pipelined_loop import body_list, is_pipelined, num_stages

KEY = "tl.enable_thread_widening"
WS_SINGLE_STAGE_KEY = "tl.enable_ws_single_stage"
WIDEN_DEFAULT = True        # the key's value where a kernel does not set it
FROM, TO = 128, 256
_TILE_OPS = ("copy", "fill", "gemm", "reduce", "cumsum")


def widen(func, arch, configs=None):
    configs = configs or {}
    if not configs.get(KEY, WIDEN_DEFAULT) or configs.get("tl.disable_wgmma"):
        return func
    if targets.parse_arch(arch or "sm_90a") < 90:
        return func
    launch = _thread_launch(func.body)
    if launch is None:
        return func
    attr, var = launch
    if uses_vars(attr.body, [var]) or not _thread_count_free(attr.body) or not _gemms_split(attr.body):
        return func
    sizes = fragment_bytes(attr.body)
    # (a one-stage loop warp-specialised on request, tl.enable_ws_single_stage, keeps its threads)
    single_ws = bool(configs.get(WS_SINGLE_STAGE_KEY))
    loops = [s for s in _statements(attr.body) if isinstance(s, tirx.For) and is_pipelined(s)
             and sum(op_name(x) == "gemm" for x in body_list(s)) >= 2 and not (single_ws and num_stages(s) < 2)]
    if not any(loop_fragment_registers(attr.body, loop, FROM, sizes) > REGISTER_FILE
               and loop_fragment_registers(attr.body, loop, TO, sizes) <= REGISTER_BUDGET for loop in loops):
        return func
    return func.with_body(_replace_extent(func.body, attr))


def _thread_launch(body):
    """(the threadIdx.x ``thread_extent`` attribute, its variable) when the kernel launches
    exactly FROM threads along x and none along y / z, else None."""
    found = []

    def visit(s):
        if isinstance(s, tirx.AttrStmt) and s.attr_key == "thread_extent" \
                and str(s.node.thread_tag).startswith("threadIdx"):
            found.append(s)

    walk_stmts(body, visit)
    if len(found) != 1 or str(found[0].node.thread_tag) != "threadIdx.x" or const_int(found[0].value) != FROM:
        return None
    return found[0], found[0].node.var


def _statements(body):
    out = []
    walk_stmts(body, out.append)
    return out


def _thread_count_free(body) -> bool:
    """Nothing outside ``T.Parallel`` nests and tile operations does something once per thread
    (an atomic, a print, a shuffle, a barrier: any call of its own), and no layout is given by
    hand (a fragment layout names its threads)."""
    ok = [True]

    def visit(s):
        if not ok[0] or is_parallel_nest(s):
            return
        if isinstance(s, tirx.AttrStmt) and s.attr_key not in ("thread_extent",):
            ok[0] = False      # layout annotations, user warp specialisation, safe values ...
        elif isinstance(s, tirx.Evaluate):
            name = op_name(s)
            if name is None or name not in _TILE_OPS:
                ok[0] = False
        elif isinstance(s, tirx.AllocBuffer) and scope_of(s.buffer) not in (FRAGMENT_SCOPE, "shared", "shared.dyn",
                                                                             "local", "local.var"):
            ok[0] = False

    _walk_outside_parallel(body, visit)
    return ok[0]


def _walk_outside_parallel(stmt, visit):
    """``visit`` every statement, without entering ``T.Parallel`` nests (visited themselves)."""
    visit(stmt)
    if is_parallel_nest(stmt):
        return
    if isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            _walk_outside_parallel(s, visit)
    elif isinstance(stmt, (tirx.For, tirx.While, tirx.AttrStmt)):
        _walk_outside_parallel(stmt.body, visit)
    elif isinstance(stmt, tirx.IfThenElse):
        _walk_outside_parallel(stmt.then_case, visit)
        if stmt.else_case is not None:
            _walk_outside_parallel(stmt.else_case, visit)


def _gemms_split(body) -> bool:
    """Every gemm's accumulator has a multiple of TO / 2 rows (each warpgroup owns whole m64 row
    blocks)."""
    ok = [True]

    def visit(s):
        if op_name(s) == "gemm":
            _, extents = decode_region(s.value.args[2]).nonunit()
            rows = const_int(extents[-2]) if len(extents) >= 2 else None
            if rows is None or rows % (TO // 2):
                ok[0] = False

    walk_stmts(body, visit)
    return ok[0]


def _replace_extent(body, attr):
    def go(s):
        if s.same_as(attr):
            return tirx.AttrStmt(s.node, s.attr_key, tirx.IntImm(s.value.dtype, TO), s.body, span=s.span)
        if isinstance(s, tirx.AttrStmt):
            return tirx.AttrStmt(s.node, s.attr_key, s.value, go(s.body), span=s.span)
        if isinstance(s, tirx.SeqStmt):
            return tirx.SeqStmt([go(x) for x in s.seq])
        return s

    return go(body)
