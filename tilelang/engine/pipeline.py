"""The ordered pass list. Each entry: (name, function(state) -> None), run in order by ``lower``.

    check             the static checks (``tilelang.analysis``): errors stop the build
    analyze_kernel    find the launch, the thread variables and every buffer (loops that never
                      run are dropped first: transform/vector_locals.py; a gemm's fragment B is
                      copied to shared memory: transform/stage_operands.py; one-stage attention
                      loops issue their K and V loads together: transform/attention_schedule.py)
    infer_layouts     fragment / loop / shared layouts and gemm warp partitions (printed and drawn
                      when TL_LAYOUT_VISUALIZATION_ENABLE is set: analysis/layout_visual.py)
    stage_epilogues   sm_90a: accumulator copies to global memory staged through shared memory
    lower_tile_ops    tile ops, T.Parallel and T.Pipelined to thread-level TIR with barriers (then
                      a zero fill under a branch folded into the wgmma it feeds: transform/fuse_clear.py;
                      vectorized loops that declare locals are unrolled: transform/vector_locals.py)
    emit_cuda         TVM CUDA codegen + our device library include
"""

from __future__ import annotations

from tvm import tirx

from tilelang import targets
from tilelang.analysis import check_pass, layout_visual
from tilelang.codegen import emit_cuda
from tilelang.codegen.kept_binds import KEPT_BINDS_OFF, keep_dividing_binds
from tilelang.codegen.narrow_floats import legalize as legalize_narrow_floats
from tilelang.codegen.wide_index import WIDE_INDEX, widen_large_tensors
from tilelang.transform import (attention_schedule, fuse_clear, stage_epilogue, stage_operands, thread_sync,
                                user_barriers, user_ws, widen_threads)
from tilelang.tir_utils import any_expr
from tilelang.transform.kernel import analyze_kernel
from tilelang.transform.layout_inference import budget_fallbacks, infer_layouts
from tilelang.transform.lower_tile_ops import Lowerer
from tilelang.transform.pipelined_loop import GATHERS_KEY, plan_stages
from tilelang.transform.negative_index import legalize_negative_indices
from tilelang.transform.vector_locals import drop_empty_loops, unroll_vector_loops_with_locals


def _analyze(st):
    # T.Pipelined(0) and friends; negative lanes of the user's vector indices
    st.func = st.func.with_body(legalize_negative_indices(drop_empty_loops(st.func.body)))
    st.func = stage_operands.stage(st.func)      # a gemm's fragment B copied to shared memory first
    # unset: one-stage warp specialisation where the grid is one wave (before the passes it steers);
    # should the lowering find that the loop cannot take it, _lower starts again without it
    func, configs = st.func, st.pass_configs or {}
    st.func, st.pass_configs = attention_schedule.plan_one_stage(func, st.arch, configs)   # (+ opt-in promotion)
    st.single_stage_retry = (func, configs) if st.pass_configs is not configs else None
    st.func = widen_threads.widen(st.func, st.arch, st.pass_configs)  # 256 threads where 128 spill for certain
    st.func = attention_schedule.schedule(st.func, st.arch, st.pass_configs)
    st.info = user_ws.apply(analyze_kernel(st.func), st.arch)     # T.ws blocks: the compute role's threads


def _layouts(st):
    st.layouts = infer_layouts(st.info, st.arch, st.pass_configs)
    if st.pass_configs.get(layout_visual.ENABLE):   # TL_LAYOUT_VISUALIZATION_*: print / draw them
        layout_visual.visualize(st.layouts, st.pass_configs)


def _lower_once(st, info, layouts, lw=None):
    """(Lowerer, lowered body) of ``info`` with ``layouts``. The Lowerer's plans (a persistent grid,
    the next tile's heads with bytes of their own, an extra ring buffer, two blocks per SM) fit
    shared memory before the lowering carves its reduction workspaces; where those take the
    kernel over the budget, it is planned again leaving room for them."""
    lw = lw or Lowerer(info, layouts, st.pass_configs, arch=st.arch)
    lw.arch = st.arch                      # lower_copy: TMA bulk stores need sm_90
    body = lw.run()
    carved = lw.smem_bytes - lw.plan_bytes
    if lw.smem_bytes > targets.smem_per_block(st.arch) and carved > 0:
        again = Lowerer(info, layouts, lw.configs, reserve=carved, arch=st.arch)
        again_body = again.run()
        if again.smem_bytes < lw.smem_bytes:
            return again, again_body
    return lw, body


def _lower(st):
    # Never let an optimisation take the kernel over the shared-memory budget (it would fail at
    # launch): plans that leave room for the workspaces (_lower_once), then the epilogue as
    # written (the stage fit until the lowering carved its workspaces), then gathers as written,
    # then the gemm plans of layout_inference.budget_fallbacks.
    limit = targets.smem_per_block(st.arch)
    lw, body = _lower_once(st, st.info, st.layouts, st.lowerer)   # (stage_epilogues built one)
    retry = getattr(st, "single_stage_retry", None)
    if retry is not None and getattr(lw, "ws", None) is None:
        # the one-wave default asked for a TMA producer this loop cannot have (no wgmma, a
        # T.async_copy, ...): the kernel as if it had not (the attention schedule's early loads)
        st.func, configs = retry
        st.pass_configs = {**configs, attention_schedule.WS_SINGLE_STAGE_KEY: False}
        st.lowerer = st.unstaged = None
        _analyze(st)
        _layouts(st)
        stage_epilogue.apply(st)
        return _lower(st)
    if getattr(st, "unstaged", None) is not None and lw.smem_bytes > limit:
        st.func, st.info, st.layouts = st.unstaged
        lw, body = _lower_once(st, st.info, st.layouts)
    if lw.smem_bytes > limit and plan_stages(st.info) != plan_stages(st.info, gathers=False):
        # gathered T.Parallel copies staged by the pipeline (pipelined_loop.gathers): as written
        configs = {**(st.pass_configs or {}), GATHERS_KEY: False}
        lw_g, body_g = _lower_once(st, st.info, st.layouts, Lowerer(st.info, st.layouts, configs, arch=st.arch))
        if lw_g.smem_bytes < lw.smem_bytes:
            lw, body = lw_g, body_g
    for change in budget_fallbacks(st.layouts):
        if lw.smem_bytes <= limit:
            break
        layouts = infer_layouts(st.info, st.arch, {**(st.pass_configs or {}), **change})
        lw_m, body_m = _lower_once(st, st.info, layouts)
        if lw_m.smem_bytes < lw.smem_bytes:
            st.layouts, lw, body = layouts, lw_m, body_m
    if not st.pass_configs.get(fuse_clear.DISABLE_KEY):   # a branch's zero fill as the wgmma's scale-d
        body = fuse_clear.fuse(body, lw.wgmma_acc_regs)
    st.lowered = st.func.with_body(unroll_vector_loops_with_locals(
        thread_sync.drop_repeated_barriers(user_barriers.merge_inits(body))))
    st.smem_bytes = lw.dynamic_smem_expr()     # (an expression with run-time-extent shared buffers)
    st.tensormaps = lw.tensormaps          # TMA descriptors the launcher builds (warp-specialised loop)
    st.extra_threads = lw.extra_threads    # the producer warpgroup
    st.persistent_tiles = lw.persistent_tiles   # a persistent GEMM's tile count (grid: min(tiles, SMs))
    st.cluster_dims = lw.cluster_dims           # thread block clusters (tl.cluster_multicast)
    st.min_blocks_per_sm = lw.min_blocks_per_sm   # two blocks per SM (warp_specialize.plan_pair), or None


def _solved_symbols(func):
    """``func`` with the symbols that appear only inside shape expressions (``A: T.Tensor((n * 4,))``)
    added as int32 parameters: apache-tvm's packed API cannot read them off a dimension, while our
    launcher solves them and passes them to the kernel (``ArgPlan.solved_symbols``)."""
    defined, used = set(), {}
    for p in func.params:
        if not tirx.is_buffer_var(p):
            defined.add(p.name)
            continue
        for extent in list(p.shape) + list(p.strides or []):
            if isinstance(extent, tirx.Var):
                defined.add(extent.name)
            else:
                any_expr(extent, lambda e: isinstance(e, tirx.Var) and used.setdefault(e.name, e) is None)
    extra = [v for name, v in used.items() if name not in defined]
    if not extra:
        return func
    return tirx.PrimFunc(list(func.params) + extra, func.body, func.ret_type, func.attrs, span=func.span)


def _emit(st):
    # (tensors of 2**31 elements or more: 64-bit element offsets, codegen/wide_index.py)
    # (widened first: a symbol cast in a widened extent no longer defines itself, so it is passed)
    func = _solved_symbols(widen_large_tensors(st.lowered, symbolic=bool(st.pass_configs.get(WIDE_INDEX))))
    func = legalize_narrow_floats(func)   # fp8 casts and math, 16-bit math CUDA lacks: in float32
    maps = [t["name"] for t in st.tensormaps]
    if not st.pass_configs.get(KEPT_BINDS_OFF):   # a division by a run-time value computed once
        func = keep_dividing_binds(func)
    st.cuda = emit_cuda(func, st.arch, st.name, maps, st.cluster_dims)
    if any(arg.startswith("cse_v") for _, arg in st.cuda.args):
        # TVM's CSE computed part of a loop bound on the host: build without it
        st.cuda = emit_cuda(func, st.arch, st.name, maps, st.cluster_dims, cse=False)


PASSES = [
    ("check", check_pass),                        # static checks (TL codes)
    ("analyze_kernel", _analyze),
    ("infer_layouts", _layouts),
    ("stage_epilogues", stage_epilogue.apply),    # sm_90a: wgmma accumulator copies staged through shared memory
    ("lower_tile_ops", _lower),
    ("emit_cuda", _emit),
]
