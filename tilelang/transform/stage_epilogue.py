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

Unless ``tl.enable_chunked_epilogue`` is false (on by default since session 38; ``chunked``) a
whole-tile stage (this module's or the user's ``C_shared``) of a warp-specialised GEMM that runs
one tile per block only because the stage and the ring's extra buffer do not both fit a
persistent grid goes out 64 columns at a time through two 64-column tiles, where that makes the
kernel persistent with the extra buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm
from tvm import ir, tirx

from tilelang.language._ops import get_op, is_tl_call, region
from tilelang.tir_utils import const_int, flatten, seq
from tilelang.transform.kernel import (FRAGMENT_SCOPE, analyze_kernel, decode_region, op_name, scope_of)
from tilelang.transform.layout_inference import infer_layouts, slab_stage_shape
from tilelang.transform.lower_tile_ops import SMEM_BUDGET_SM90, Lowerer
from tilelang.transform.pass_config import PassConfigKey
from tilelang.transform.tma import box_spec
from tilelang.transform import smem_plan, user_ws

SHARED = "shared.dyn"
SLAB_COLUMNS = 64      # 16-bit elements per 128-byte swizzle slab of the stage
CHUNK_KEY = PassConfigKey.TL_ENABLE_CHUNKED_EPILOGUE.value


def _candidate(accumulators, stmt) -> bool:
    """A whole float wgmma accumulator copied to a global tensor."""
    if op_name(stmt) != "copy":
        return False
    src, dst = decode_region(stmt.value.args[0]), decode_region(stmt.value.args[1])
    return (scope_of(src.buffer) == FRAGMENT_SCOPE and scope_of(dst.buffer) == "global" and src.is_whole()
            and src.buffer in accumulators and str(src.buffer.dtype) == "float32")


def _why_not(info, stmt) -> str | None:
    """Why the candidate copy ``stmt`` keeps register stores, or None (it can be staged): the
    stage must take the slab layout and its copy to the tensor must be a TMA box (the same test
    ``lower_copy._tma_store`` makes once the stage exists)."""
    args = stmt.value.args
    if len(args) > 3 and const_int(args[3]) == 1:
        return "the copy says disable_tma=True"
    src, dst = decode_region(args[0]), decode_region(args[1])
    shape = [const_int(x) for x in src.buffer.shape]
    if not slab_stage_shape(shape, "float16"):      # (the tensor's own dtype: box_spec)
        return (f"the {'x'.join(map(str, shape))} tile is not 2-D with rows of whole 128-byte slabs "
                "(multiples of 64 16-bit columns)")
    spec = box_spec(info.func.params, tvm.sym.Analyzer(), dst, shape, SLAB_COLUMNS, str(dst.buffer.dtype),
                    src.buffer.name, 0)
    return spec if isinstance(spec, str) else None


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


@dataclass
class Staging:
    """What ``staged`` decided: the kernel to lower (``info``, ``layouts``), the copies staged,
    the Lowerer of the staged kernel (None when nothing was staged), and the accumulator copies
    left as register stores with the reason."""
    info: object
    layouts: object
    picked: list = field(default_factory=list)
    lowerer: object = None
    skipped: list = field(default_factory=list)     # [(copy statement, reason)]


def stage(info, layouts, configs):
    """(the kernel with its eligible epilogue copies staged, as a new PrimFunc or None, the copies
    staged, [(copy, why not)] for the accumulator copies left alone)."""
    if not layouts.wgmma:
        return None, [], []
    top = flatten([info.body])
    accumulators = {decode_region(g.value.args[2]).buffer for g in layouts.gemms}
    candidates = [s for s in top if _candidate(accumulators, s)]
    off = next((f"`{k}` is set" for k in ("tl.disable_epilogue_staging", "tl.disable_tma_lower") if configs.get(k)),
               None)
    reasons = [(s, off or _why_not(info, s)) for s in candidates]
    picked = [s for s, why in reasons if why is None]
    skipped = [(s, why) for s, why in reasons if why is not None]
    if not picked:
        return None, [], skipped
    items = []
    for s in top:
        items.extend(_staged(s) if any(s.same_as(p) for p in picked) else [s])
    return _with_body(info, items), picked, skipped


def _with_body(info, items):
    """The kernel of ``info`` with ``items`` as its top-level statements (under its launch)."""
    body = seq(items)
    for iv, extent in reversed(info.launch):
        body = tirx.AttrStmt(iv, "thread_extent", extent, body)
    return info.func.with_body(body)


def _planned(func, arch, configs):
    """(info, layouts, Lowerer) of a rewritten kernel (T.ws / T.alloc_barrier kept)."""
    info = user_ws.apply(analyze_kernel(func))
    layouts = infer_layouts(info, arch, configs)
    return info, layouts, Lowerer(info, layouts, dict(configs), arch=arch)


def staged(info, layouts, arch: str, configs: dict) -> Staging:
    """The kernel the lowering compiles: the staged kernel where ``stage`` applies and the result
    still fits in shared memory, else the inputs. The LSP's hovers count shared memory on the
    same kernel (with the Lowerer built here for the budget check) and say why an epilogue was
    not staged."""
    func, picked, skipped = stage(info, layouts, configs)
    if func is None:
        return Staging(info, layouts, skipped=skipped)
    new_info, new_layouts, lw = _planned(func, arch, configs)
    if lw.smem_bytes > SMEM_BUDGET_SM90:
        why = f"the stage would take the kernel to {lw.smem_bytes} bytes of shared memory, over {SMEM_BUDGET_SM90}"
        return Staging(info, layouts, skipped=skipped + [(s, why) for s in picked])
    return Staging(new_info, new_layouts, picked, lw, skipped)


def _chunk_pairs(info, layouts, top) -> list:
    """Indices i of top-level statement pairs ``copy(acc, S); copy(S, G[...])`` (a whole float wgmma
    accumulator staged through a whole 2-D 16-bit shared tile ``S`` of at least three 64-column
    slabs, then stored whole) where the two copies are all ``S`` is used for."""
    accumulators = {decode_region(g.value.args[2]).buffer for g in layouts.gemms}
    shared = set(info.shared_buffers())
    out = []
    for i in range(len(top) - 1):
        a, b = top[i], top[i + 1]
        if op_name(a) != "copy" or op_name(b) != "copy" or any(
                len(c.value.args) > 3 and const_int(c.value.args[3]) == 1 for c in (a, b)):     # disable_tma
            continue
        acc, stage = decode_region(a.value.args[0]), decode_region(a.value.args[1])
        src, dst = decode_region(b.value.args[0]), decode_region(b.value.args[1])
        if not (acc.buffer in accumulators and acc.is_whole() and str(acc.buffer.dtype) == "float32"
                and stage.buffer in shared and stage.is_whole() and src.buffer.same_as(stage.buffer)
                and src.is_whole() and scope_of(dst.buffer) == "global"):
            continue
        shape = [const_int(x) for x in stage.buffer.shape]
        if (len(shape) != 2 or None in shape or shape[1] % SLAB_COLUMNS or shape[1] // SLAB_COLUMNS < 3
                or str(stage.buffer.dtype) not in ("float16", "bfloat16")
                or const_int(dst.extents[-1]) != shape[1]):
            continue
        users = [k for k, s in enumerate(top) if stage.buffer in smem_plan.names_buffers(s, shared)
                 or (is_tl_call(getattr(s, "value", None), "annotate_layout")
                     and s.value.args[0].source.same_as(stage.buffer))]
        if users == [i, i + 1]:
            out.append(i)
    return out


def _chunked(a, b):
    """``copy(acc, S); copy(S, G[r, c])`` as SLAB_COLUMNS-wide chunks through two shared tiles:
    chunk j copies ``acc[:, 64 j : 64 j + 64]`` into tile j % 2 and that tile to ``G[r, c + 64 j]``."""
    acc, stage = decode_region(a.value.args[0]), decode_region(a.value.args[1])
    dst = decode_region(b.value.args[1])
    rows, cols = (const_int(x) for x in stage.buffer.shape)
    tiles = [tirx.decl_buffer([rows, SLAB_COLUMNS], str(stage.buffer.dtype), f"{stage.buffer.name}_chunk{t}",
                              scope=SHARED) for t in range(2)]
    out = [tirx.AllocBuffer(t) for t in tiles]
    rest_a, rest_b = list(a.value.args[2:]), list(b.value.args[2:])
    whole = [0, 0], [rows, SLAB_COLUMNS]
    for j in range(cols // SLAB_COLUMNS):
        tile = tiles[j % 2]
        part = region(acc.buffer, [0, j * SLAB_COLUMNS], [rows, SLAB_COLUMNS], 1)
        into = ir.Call(get_op("copy"), [part, region(tile, *whole, 2)] + rest_a, ret_ty="handle")
        starts = list(dst.starts[:-1]) + [dst.starts[-1] + j * SLAB_COLUMNS]
        to = region(dst.buffer, starts, list(dst.extents[:-1]) + [SLAB_COLUMNS], 2)
        store = ir.Call(get_op("copy"), [region(tile, *whole, 1), to] + rest_b, ret_ty="handle")
        out += [tirx.Evaluate(into, span=a.span), tirx.Evaluate(store, span=b.span)]
    return out


def chunked(result: Staging, arch: str, configs: dict) -> Staging:
    """``tl.enable_chunked_epilogue`` (on unless false): the kernel of ``result`` with its
    whole-tile epilogue stages chunked (``_chunked``) where that lets the warp-specialised GEMM
    run persistent with its ring's extra buffer (``warp_specialize.plan_ring``) and it did not
    before; else ``result``."""
    info, layouts = result.info, result.layouts
    if not configs.get(CHUNK_KEY, True) or not layouts.wgmma:
        return result
    top = flatten([info.body])
    pairs = _chunk_pairs(info, layouts, top)
    if not pairs:
        return result
    before = result.lowerer or Lowerer(info, layouts, dict(configs), arch=arch)
    if before.ws is None or (before.ws.persistent is not None and before.ws.ring):
        return result
    items, k = [], 0
    while k < len(top):
        if k in pairs:
            items += _chunked(top[k], top[k + 1])
            k += 2
        else:
            items.append(top[k])
            k += 1
    new_info, new_layouts, lw = _planned(_with_body(info, items), arch, configs)
    if lw.ws is None or lw.ws.persistent is None or not lw.ws.ring or lw.smem_bytes > SMEM_BUDGET_SM90:
        return result
    return Staging(new_info, new_layouts, result.picked or [top[k + 1] for k in pairs], lw, result.skipped)


def apply(st) -> None:
    """Pipeline step (after layout inference): ``st.func``, ``st.info`` and ``st.layouts``
    become the staged kernel's where ``staged`` applies (and ``st.lowerer`` the Lowerer its
    budget check built, which the lowering then uses)."""
    result = chunked(staged(st.info, st.layouts, st.arch, st.pass_configs), st.arch, st.pass_configs)
    if result.picked:
        st.unstaged = (st.func, st.info, st.layouts)    # the lowering's fallback (engine.pipeline)
        st.func, st.info, st.layouts, st.lowerer = result.info.func, result.info, result.layouts, result.lowerer


__all__ = ["Staging", "stage", "staged", "chunked", "apply"]
