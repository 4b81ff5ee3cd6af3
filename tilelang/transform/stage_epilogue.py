"""Epilogues through shared memory on sm_90a: a wgmma accumulator copied straight to a global
tensor (``T.copy(C_local, C[by * bm, bx * bn])``) is staged through a shared tile,

    T.copy(C_local, C_local_stage)       # swizzled 128-byte slabs: conflict-free register stores
    T.copy(C_local_stage, C[...])        # TMA box stores issued by one thread (lower_copy._tma_store)

which is what the kernel would have been had its author written the epilogue through shared
memory (upstream's ``C_shared`` pattern): layout inference, shared-memory placement (the stage
takes the bytes of the pipeline's dead tiles, or bytes of its own in a persistent kernel) and the
barrier planner then treat it as a user buffer. On an H200 this measured 2-4 % faster than the
accumulator's direct 4-byte stores on every GEMM tile configuration tried (benchmarks/RESULTS.md).

Applies to a copy at the top level of the kernel body whose source is a whole float fragment
written by a wgmma gemm and whose destination is a 2-D tile of a 16-bit kernel parameter with a
static shape, whose rows are whole 128-byte slabs and 16-byte aligned in memory (what a TMA box
needs), when the kernel still fits in shared memory with the stage. ``tl.disable_tma_lower``,
``tl.disable_epilogue_staging`` or ``T.copy(..., disable_tma=True)`` keep the direct stores.
"""

from __future__ import annotations

import tvm
from tvm import ir, tirx

from tilelang.language._ops import get_op, region
from tilelang.language.dtypes import nbytes
from tilelang.transform.ir_utils import const_int, flatten, seq
from tilelang.transform.kernel import (FRAGMENT_SCOPE, analyze_kernel, decode_region, op_name, scope_of)

SHARED = "shared.dyn"


def _eligible(info, accumulators, stmt) -> bool:
    if op_name(stmt) != "copy":
        return False
    args = stmt.value.args
    if len(args) > 3 and const_int(args[3]) == 1:      # T.copy(..., disable_tma=True)
        return False
    src, dst = decode_region(args[0]), decode_region(args[1])
    if scope_of(src.buffer) != FRAGMENT_SCOPE or scope_of(dst.buffer) != "global" or not src.is_whole():
        return False
    if src.buffer not in accumulators or str(src.buffer.dtype) != "float32":
        return False
    shape = [const_int(x) for x in src.buffer.shape]
    params = list(info.func.params)
    if len(shape) != 2 or None in shape or not any(p.same_as(dst.buffer) for p in params) or dst.buffer.strides:
        return False
    gshape = [const_int(x) for x in dst.buffer.shape]
    if None in gshape or nbytes(str(dst.buffer.dtype)) != 2 or (gshape[-1] * 2) % 16:
        return False
    _, ext = dst.nonunit()
    col = tvm.sym.Analyzer().modular_set(dst.starts[-1])      # the box starts 16-byte aligned
    return ([const_int(e) for e in ext] == shape and shape[0] <= 256 and (shape[1] * 2) % 128 == 0
            and col.coeff % 8 == 0 and col.base % 8 == 0)


def _staged(stmt):
    """``alloc stage; copy(acc -> stage); copy(stage -> dst)`` for the copy ``stmt``."""
    args = stmt.value.args
    src, dst = decode_region(args[0]), decode_region(args[1])
    shape = list(src.buffer.shape)
    stage = tirx.decl_buffer(shape, str(dst.buffer.dtype), f"{src.buffer.name}_stage", scope=SHARED)
    zeros = [0] * len(shape)
    rest = list(args[2:])       # coalesced_width, disable_tma
    into = ir.Call(get_op("copy"), [args[0], region(stage, zeros, shape, 2)] + rest, ret_ty="handle")
    out = ir.Call(get_op("copy"), [region(stage, zeros, shape, 1), args[1]] + rest, ret_ty="handle")
    return [tirx.AllocBuffer(stage), tirx.Evaluate(into, span=stmt.span), tirx.Evaluate(out, span=stmt.span)]


def stage(info, layouts, configs):
    """(the kernel with its eligible epilogue copies staged, as a new PrimFunc, the original copy
    statements), or (None, [])."""
    if (not layouts.wgmma or configs.get("tl.disable_tma_lower")
            or configs.get("tl.disable_epilogue_staging")):
        return None, []
    top = flatten([info.body])
    accumulators = {decode_region(g.value.args[2]).buffer for g in layouts.gemms}
    picked = [s for s in top if _eligible(info, accumulators, s)]
    if not picked:
        return None, []
    items = []
    for s in top:
        items.extend(_staged(s) if any(s.same_as(p) for p in picked) else [s])
    body = seq(items)
    for iv, extent in reversed(info.launch):
        body = tirx.AttrStmt(iv, "thread_extent", extent, body)
    return info.func.with_body(body), picked


def staged(info, layouts, arch: str, configs: dict):
    """(info, layouts, staged copy statements, its Lowerer or None) of the kernel the lowering
    compiles: the staged kernel where ``stage`` applies and the result still fits in shared
    memory, else the inputs, [] and None. The LSP's hovers count shared memory on the same
    kernel (with the Lowerer built here for the budget check)."""
    from tilelang.transform.layout_inference import infer_layouts
    from tilelang.transform.lower_tile_ops import SMEM_BUDGET_SM90, Lowerer

    func, picked = stage(info, layouts, configs)
    if func is None:
        return info, layouts, [], None
    new_info = analyze_kernel(func)
    new_layouts = infer_layouts(new_info, arch, configs)
    lw = Lowerer(new_info, new_layouts, dict(configs))
    if lw.smem_bytes > SMEM_BUDGET_SM90:
        return info, layouts, [], None
    return new_info, new_layouts, picked, lw


def apply(st) -> None:
    """Pipeline step (after layout inference): ``st.func``, ``st.info`` and ``st.layouts``
    become the staged kernel's where ``staged`` applies."""
    info, layouts, picked, _ = staged(st.info, st.layouts, st.arch, st.pass_configs)
    if picked:
        st.func, st.info, st.layouts = info.func, info, layouts


__all__ = ["stage", "staged", "apply"]
