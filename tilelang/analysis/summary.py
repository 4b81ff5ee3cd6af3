"""Hover data of one checked kernel: plain JSON-able dicts, from the checker's own analysis.

``summarize_kernel(k)`` reads the ``Kernel`` that ``analysis.analyze`` built while it ran the
checks (the kernel analysis and the layouts inferred with the compile's pass configs), so the
checks and the hovers read one analysis per build and cannot disagree. ``summarize(func, arch,
pass_configs)`` runs that analysis first (the Run lens, tests). The result::

    {"arch", "gpu", "smem_limit", "smem_total", "error": str|None,
     "launch":    {"line", "grid": [str], "threads": [int], "num_threads",
                   "written_threads"?: int (the count as written, where the compiler widens it)},
     "buffers":   {name: {"scope", "shape", "dtype", "bytes", "stages", "line",
                          "swizzle"?: str, "fragment"?: {...},
                          "live"?: [first, last] top-level statement (shared buffers),
                          "shares_with"?: [name] (shared buffers placed on the same bytes)}},
     "gemms":     [{"line", "M", "N", "K", "warp_m", "warp_n", "trans_a", "trans_b",
                    "variant", "a_scope", "a_dtype", "b_dtype", "c_dtype", "instruction"}],
     "pipelines": [{"line", "stages", "producers": [name], "mechanism"}],
     "stages_fit": int|None (over budget: the most pipeline stages that fit, for TL0501's fix),
     "fragment_registers": int, "flops_per_launch": int|None,
     "roofline": {"flops", "flops_by_dtype", "global_bytes", "dram_bytes", "shared_bytes",
                  "shared_why", "device", "time_s", "memory_s", "compute_s", "bound", "intensity",
                  "ridge", "peak_tflops", "bandwidth_gbps"} or {"no_estimate": why}
                 (``analysis.roofline.on_arch``),
     "epilogue_stage"?: [line] (sm_90a: copies staged through shared memory + TMA stores),
     "epilogue_registers"?: [[line, why]] (sm_90a: accumulator copies left as register stores),
     "persistent"?: bool (sm_90a: a grid of min(tiles, SMs) blocks looping over the tiles),
     "persistent_why"?: str (why such a loop keeps one tile per block),
     "persistent_pairs"?: int (the persistent grid's unit is a pair of row blocks x and gx - 1 - x of
                          equal summed trip counts, gx this value: causal attention),
     "persistent_tail_split"?: bool (such pairs, the last rounds' dealt as single tiles, longest first),
     "raster"?: {"panel", "grid": [gx, gy], "wave", "bytes", "best_panel", "best_bytes",
                 "plain_bytes"} (``T.use_swizzle`` in row order in a one-gemm kernel: the A and
                 B bytes a wave of blocks reads per K step, ``analysis.raster``)}

Lines are 1-based lines of the user's file (TVM spans). A fragment entry holds the layout's
name, where it came from, ``describe()``, words per axis, registers per thread, replication and
a table of the first threads' first registers (``table[t][r]`` = tile coordinates) and, under
``picture``, the layout's axis form (shape, threads, ``[kind, extent, stride, dim, coef]`` per axis)
for the editor to draw. Nothing here
raises: a failing analysis leaves its part empty and says why in ``error``. The language server
only formats these dicts (``tilelang_lsp.hover``); it never imports this module.
"""

from __future__ import annotations

import math

TABLE_THREADS = 4
TABLE_REGISTERS = 8
SMEM_ALIGN = 128


def summarize(func, arch: str, pass_configs: dict | None = None) -> dict:
    """The hover data of ``func`` on ``arch``: the checker's analysis, then ``summarize_kernel``."""
    from tilelang.analysis import analyze
    from tilelang.analysis.report import CheckContext

    k, _ = analyze(func, arch, CheckContext(pass_configs=dict(pass_configs or {})))
    return summarize_kernel(k, arch)


def summarize_kernel(k, arch: str | None = None) -> dict:
    """The hover data of a checked ``Kernel`` (None: the kernel analysis failed)."""
    from tilelang import targets

    arch = k.arch if k is not None else arch
    out = {"arch": arch, "gpu": None, "error": None, "launch": None, "buffers": {}, "gemms": [],
           "pipelines": [], "fragment_registers": 0, "smem_total": None, "flops_per_launch": None,
           "stages_fit": None}
    try:
        out["smem_limit"], out["gpu"] = targets.smem_per_block(arch), targets.gpu_name(arch)
    except ValueError:
        out["smem_limit"] = None
    if k is None:
        out["error"] = "the kernel analysis failed (see the diagnostics)"
        return out
    info, layouts = k.info, k.layouts
    if layouts is None:
        out["error"] = "layout inference failed (see the diagnostics)"
    out["launch"] = _widened(k, _launch(k.func, info))
    _buffers(info, layouts, out, reuse=not k.ctx.pass_configs.get("tl.disable_shared_memory_reuse"),
             refine_loops=_loop_reuse(k))
    if layouts is not None:
        out["gemms"] = [_gemm(stmt, plan, arch) for stmt, plan in layouts.gemms.items()]
        if arch == "sm_90a" and any(p.kind == "mma" for p in layouts.gemms.values()):
            _explain_mma(info, layouts, out["gemms"], narrow=not k.ctx.pass_configs.get("tl.disable_wgmma_narrow_slabs"))
        out["gemms"].sort(key=lambda g: g["line"] or 0)
    planned = _warp_specialised(k, out)
    if planned[0] is not None and planned[0].ring:   # the GEMM ring's extra buffer (warp_specialize.plan_ring)
        for buf in planned[0].pipe.staged:
            if buf.name in out["buffers"]:
                out["buffers"][buf.name]["stages"] = planned[0].ring
    out["pipelines"] = _pipelines(info, planned, _early_loads(k, arch, warp_specialised=planned[0] is not None))
    if planned[2] is not None and out["smem_total"] is not None:
        # sm_90a wgmma kernels: the lowering's exact carve-out (1024-byte tiles, mbarriers)
        out["smem_total"] = max(out["smem_total"], planned[2].smem_bytes)
    if planned[2] is not None and planned[2].own_bytes:    # tl.enable_occupancy_neutral_reuse kept them apart
        for entry in out["buffers"].values():
            entry.pop("shares_with", None)
    out["stages_fit"] = fitting_stages(out)
    _roofline(k, arch, out)
    try:
        raster = _raster(info, out)
    except Exception as err:  # noqa: BLE001 - an estimate only: its hover is left out
        raster = None
        out["error"] = out["error"] or f"rasterisation estimate failed: {type(err).__name__}: {err}"
    if raster is not None:
        out["raster"] = raster
    return out


def fitting_stages(summary: dict) -> int | None:
    """Over budget: the largest ``num_stages`` below the deepest pipeline's whose staged buffers fit
    the per-block budget with the compiler's placement (buffers never live together share
    bytes); None when the kernel fits, or no count does."""
    from tilelang.transform.smem_plan import Item, place

    limit, total = summary.get("smem_limit"), summary.get("smem_total")
    staged = [p["stages"] for p in summary["pipelines"] if p["producers"] and p["stages"] >= 2]
    buffers = [b for b in summary["buffers"].values() if b["scope"].startswith("shared")]
    if not staged or not limit or total is None or total <= limit or any(b["bytes"] is None for b in buffers):
        return None
    live = [tuple(b["live"]) if b.get("live") else None for b in buffers]
    for stages in range(max(staged) - 1, 0, -1):
        items = [Item(i, b["bytes"] * (stages if b["stages"] > 1 else 1), SMEM_ALIGN, lv)
                 for i, (b, lv) in enumerate(zip(buffers, live))]
        if place(items)[1] <= limit:
            return stages
    return None


def _raster(info, out) -> dict | None:
    """The rasterisation estimate of ``T.use_swizzle`` where it reads as a GEMM's: one gemm,
    constant grid; blockIdx.y picks the A tile (gemm M rows), blockIdx.x the B tile (N columns)."""
    from tilelang import targets
    from tilelang.analysis import raster
    from tilelang.language.dtypes import nbytes
    from tilelang.transform.block_order import find_swizzle

    swizzle, gemms, launch = find_swizzle(info.body), out["gemms"], out["launch"]
    try:
        wave = targets.sm_count(out["arch"])
    except ValueError:
        wave = None
    if swizzle is None or len(gemms) != 1 or wave is None or launch is None:
        return None
    (panel, order), (gx, gy) = swizzle, launch["grid"][:2]
    if not (isinstance(gx, int) and isinstance(gy, int)) or panel < 1 or gx * gy <= 1 or order != "row":
        return None
    g = gemms[0]
    est = raster.raster_estimate(panel, gx, gy, wave, g["M"] * g["K"] * nbytes(g["a_dtype"]),
                                 g["K"] * g["N"] * nbytes(g["b_dtype"]))
    return {"grid": [gx, gy], **est}


def _line(span) -> int | None:
    from tilelang.analysis.report import plain_span

    span = plain_span(span)
    return int(span.line) if span is not None else None


def _int_or_text(expr):
    from tilelang.tir_utils import const_int

    value = const_int(expr)
    return value if value is not None else str(expr)


def _launch(func, info) -> dict:
    grid = {"blockIdx.x": 1, "blockIdx.y": 1, "blockIdx.z": 1}
    for iv, extent in info.launch:
        tag = str(iv.thread_tag)
        if tag in grid:
            grid[tag] = _int_or_text(extent)
    return {"line": _line(getattr(func.body, "span", None)), "grid": list(grid.values()),
            "threads": [t for t in info.threads], "num_threads": info.num_threads}


def _widened(k, launch: dict) -> dict:
    """``launch`` plus ``written_threads`` where the compiler widens the kernel's threads."""
    if k.written_threads is not None:
        launch["written_threads"] = k.written_threads
    return launch


def _loop_reuse(k) -> bool:
    """Whether the compiler lets buffers private to a loop's iterations share bytes in this kernel
    (``Lowerer._weigh_loop_reuse``); asked of a Lowerer only where some buffer is such."""
    from tilelang.transform import smem_plan

    if k.layouts is None or not smem_plan.narrows(k.info.body, k.info.shared_buffers()):
        return True
    lw = k.lowerer
    if lw is None:
        try:
            from tilelang.transform.lower_tile_ops import Lowerer

            lw = Lowerer(k.info, k.layouts, dict(k.ctx.pass_configs), arch=k.arch)
        except Exception:  # noqa: BLE001 - a kernel the lowering rejects: the plan as planned
            return True
    return lw.loop_reuse


def _buffers(info, layouts, out, reuse: bool = True, refine_loops: bool = True) -> None:
    from tilelang.language.dtypes import nbytes
    from tilelang.tir_utils import walk_stmts
    from tilelang.transform import smem_plan
    from tilelang.transform.pipelined_loop import plan_stages
    from tvm import tirx

    stages = plan_stages(info)
    allocs = []
    walk_stmts(info.body, lambda s: allocs.append(s) if isinstance(s, tirx.AllocBuffer) else None)
    live = smem_plan.live_ranges(info.body, info.shared_buffers())
    sizes, known = {}, True
    for stmt in allocs:
        buf = stmt.buffer
        entry = _buffer_entry(buf, stmt, stages.get(buf, 1), nbytes(str(buf.dtype)))
        if layouts is not None:
            _add_layout(entry, buf, layouts, out)
        if entry["scope"].startswith("shared"):
            # lifetime in top-level statements: buffers never live together share bytes
            entry["live"] = live.get(buf)
            if entry["bytes"] is None:
                known = False
            else:
                sizes[buf] = entry["bytes"] * entry["stages"]
        out["buffers"].setdefault(buf.name, entry)
    _, total, alias = smem_plan.plan(info.body, sizes, reuse=reuse, live=live, refine_loops=refine_loops)
    for buf, others in alias.items():
        out["buffers"][buf.name]["shares_with"] = sorted(o.name for o in others)
    out["smem_total"] = total if known else None
    if not known:   # shared buffers of run-time extent: after the static bytes, sized at each launch
        out["smem_static"] = total
        out["smem_runtime"] = [f"{name} ({' x '.join(str(x) for x in e['shape'])} x {e['elem_bytes']} B)"
                               for name, e in out["buffers"].items()
                               if e["scope"].startswith("shared") and e["bytes"] is None]


def _buffer_entry(buf, stmt, stages, elem_bytes) -> dict:
    shape = [_int_or_text(s) for s in buf.shape]
    size = math.prod(shape) * elem_bytes if all(isinstance(s, int) for s in shape) else None
    return {"scope": str(buf.scope()), "shape": shape, "dtype": str(buf.dtype), "bytes": size,
            "elem_bytes": elem_bytes, "stages": stages, "line": _line(stmt.span)}


def _add_layout(entry, buf, layouts, out) -> None:
    frag = layouts.fragments.get(buf)
    if frag is not None:
        entry["fragment"] = fragment_summary(frag, entry["elem_bytes"], layouts.origin.get(buf))
        out["fragment_registers"] += entry["fragment"]["registers"]
    shared = layouts.shared.get(buf)
    if shared is not None:
        entry["swizzle"] = shared.describe()
        entry["swizzle_group"] = shared.group


def fragment_summary(frag, elem_bytes: int, origin) -> dict:
    """Layout facts of one ``Fragment`` for the hover (see the module docstring)."""
    owners = frag.owners()
    shape = [int(s) for s in frag.shape]
    rows = []
    for tid in range(min(TABLE_THREADS, frag.num_threads)):
        cells = [_coords(int(flat), shape) for flat in owners[tid][:TABLE_REGISTERS]]
        rows.append(cells)
    return {"name": frag.name, "origin": origin, "describe": frag.describe(), "axes": _axes_in_words(frag),
            "local_size": frag.local_size, "replication": frag.replication, "num_threads": frag.num_threads,
            "registers": -(-frag.local_size * elem_bytes // 4), "table": rows,
            # what the editor draws (tilelang_lsp.layout_images): the axis form, tilelang.layout.axes
            "picture": {"shape": shape, "num_threads": frag.num_threads,
                        "axes": [[a.kind, a.extent, a.stride, a.dim, a.coef] for a in frag.axes]}}


def _coords(flat: int, shape: list) -> list:
    out = []
    for extent in reversed(shape):
        out.append(flat % extent)
        flat //= extent
    return list(reversed(out))


def _axes_in_words(frag) -> list:
    words = []
    for a in sorted(frag.thread_axes, key=lambda a: a.stride):
        if a.extent == 1:
            continue
        digit = f"(tid / {a.stride}) % {a.extent}" if a.stride > 1 else f"tid % {a.extent}"
        where = "replicates the tile" if a.dim is None else f"steps dim {a.dim} by {a.coef}"
        words.append(f"thread digit {digit} {where}")
    for a in sorted(frag.local_axes, key=lambda a: a.stride):
        if a.extent == 1:
            continue
        digit = f"(reg / {a.stride}) % {a.extent}" if a.stride > 1 else f"reg % {a.extent}"
        words.append(f"register digit {digit} steps dim {a.dim} by {a.coef}")
    return words


def _gemm(stmt, plan, arch) -> dict:
    from tilelang import targets
    from tilelang.transform.kernel import FRAGMENT_SCOPE, decode_region

    a, b, c = (decode_region(x) for x in stmt.value.args[:3])
    a_scope = str(a.buffer.scope())
    k_step = targets.mma_k_granularity(a.dtype)
    shape = f"m16n8k{k_step}"
    instruction = f"mma.sync.aligned.{shape}"
    if a.dtype in ("float16", "bfloat16") or a_scope != FRAGMENT_SCOPE:
        instruction += " with ldmatrix loads from shared memory"
    variant = "tl::gemm_rs (A in registers, B in shared)" if a_scope == FRAGMENT_SCOPE else \
        "tl::gemm_ss (A and B in shared)"
    if plan.kind == "wgmma":
        shape = f"m64n{plan.N // getattr(plan, 'warpgroups_n', 1)}k16"
        instruction = f"wgmma.mma_async.sync.aligned.{shape} (sm_90a warpgroup MMA, operands read from shared memory)"
        variant = "tl::wgmma_gemm_rs (A in registers, B in shared)" if a_scope == FRAGMENT_SCOPE else \
            "tl::wgmma_gemm_ss (A and B in shared)"
        k_step = 16
    return {"kind": plan.kind, "line": _line(stmt.span), "M": plan.M, "N": plan.N, "K": plan.K, "warp_m": plan.warp_m,
            "warp_n": plan.warp_n, "trans_a": plan.trans_a, "trans_b": plan.trans_b, "variant": variant,
            "a_scope": a_scope, "a": a.buffer.name, "b": b.buffer.name, "c": c.buffer.name,
            "a_dtype": a.dtype, "b_dtype": b.dtype, "c_dtype": c.dtype, "instruction": instruction,
            "mma_shape": shape, "k_step": k_step}


def _dst(copy):
    """The buffer a copy statement writes."""
    from tilelang.transform.kernel import decode_region

    return decode_region(copy.value.args[1]).buffer


def _explain_mma(info, layouts, gemms, narrow: bool = True) -> None:
    """On sm_90a, say why each mma.sync gemm is not wgmma: its own reason (``wgmma_blocker``), or,
    for one that fits wgmma alone, the kernel's: column slices of one buffer that need different
    slab widths (``wgmma_slab_conflict``), or another gemm that cannot take wgmma where the kernel
    keeps its gemms on one kind (``Layouts.unmixed``)."""
    from tilelang.transform.layout_inference import wgmma_blocker, wgmma_slab_conflict

    stmts = list(layouts.gemms)
    reasons = {stmt: wgmma_blocker(info, stmt, narrow=narrow) for stmt in stmts}
    if layouts.unnarrowed:      # planned again without narrow slabs: say why they were given up
        reasons = {stmt: why or (f"it needs narrow wgmma slabs, which this kernel cannot take: {layouts.unnarrowed}"
                                 if wgmma_blocker(info, stmt, narrow=False) else None)
                   for stmt, why in reasons.items()}
    fits = [stmt for stmt in stmts if reasons[stmt] is None]
    conflict = wgmma_slab_conflict(fits, {}) if fits else None
    first = next((stmt for stmt in stmts if reasons[stmt]), None)
    for g, stmt in zip(gemms, stmts):
        if layouts.gemms[stmt].kind != "mma":
            continue
        if reasons[stmt]:
            g["why_not_wgmma"] = reasons[stmt]
        elif conflict:
            g["why_not_wgmma"] = conflict
        elif first is not None:
            g["why_not_wgmma"] = (f"the T.gemm at line {_line(first.span)} cannot ({reasons[first]}), and the "
                                  f"kernel keeps its gemms on one kind: {layouts.unmixed}")


def _pipelines(info, planned=(None, None, None), early_loads=()) -> list:
    from tilelang.transform import attention_schedule
    from tilelang.transform.pipelined_loop import pipelined_loops

    out = []
    ws, why_not, lw = planned
    early = {_line(span): (moved, stay, refill) for span, moved, stay, refill in early_loads}
    for pl in pipelined_loops(info.body):
        s, stages = pl.loop, pl.stages
        producers = [buf.name for buf in pl.staged]
        mechanism = _mechanism(stages, producers)
        if stages < 2 and producers:
            mechanism = _early_loads_text(early.get(_line(s.span))) or mechanism
        if lw is not None and producers and _async_wgmma_loop(lw, pl):
            mechanism = (f"cp.async (16-byte global-to-shared copies) into a ring of {stages} stages, issued "
                         f"{stages - 2} iterations ahead, feeding asynchronous wgmma with one group in flight "
                         f"(wait_group {stages - 3}, fence.proxy.async + __syncthreads, wgmma.wait_group 1)")
        if why_not and producers and stages >= 2:
            mechanism += f". Not warp-specialised with TMA on sm_90a: {why_not}"
        if ws is not None and ws.loop.same_as(s):
            consume = ("issue the wgmma asynchronously and release the previous stage" if ws.gemm is not None else
                       _overlap_text(ws) if ws.overlap is not None else
                       "run the loop body (its wgmma wait for their results) and release the stage at the end of "
                       "the iteration; the consumer warpgroups do not wait for each other inside the loop")
            ring = (f"{stages} stages" if not ws.ring else
                    f"{ws.ring} buffers ({stages} stages and one for the wgmma group kept in flight)")
            bulk = [f"`{_dst(p).name}`" for p, j in ws.producers if j is None]
            rows = [f"`{_dst(p).name}`" for p, j in ws.producers
                    if j is not None and not ws.tensormaps[j]["swizzle"] and len(_dst(p).shape) == 1]
            notes = ([f"{', '.join(rows)}: one unswizzled 1-D box each"] if rows else []) + \
                ([f"{', '.join(bulk)}: one 1-D bulk copy each, no tensor map"] if bulk else [])
            tiles = "each staged tile" + (f" ({'; '.join(notes)})" if notes else "")
            mechanism = (f"TMA (sm_90a): a producer warpgroup added to the block issues one tensor-map box per "
                         f"swizzle slab of {tiles} into a ring of {ring}, completing on "
                         f"mbarriers (full/empty per stage); the consumer warpgroups wait on the stage, "
                         f"{consume}. No block-wide barrier.")
            if ws.heads:
                heads = ", ".join(f"`{buf.name}`" for buf in ws.head_buffers)
                when = ("" if ws.persistent is None else
                        ", the next tile's once this tile's epilogue is done (a buffer written after the loop "
                        "shares its bytes: no room for both)" if ws.heads_late else
                        ", the next tile's into a second buffer as soon as this tile's loads are issued"
                        if ws.head_slots > 1 else ", the next tile's while the consumers finish this one")
                mechanism += (f" The producer also loads {heads} (copied in front of the loop) with TMA, on a "
                              f"barrier of its own{when}.")
        written = s.annotations.get(attention_schedule.WRITTEN_STAGES_ATTR)
        if written is not None:
            key = attention_schedule.ZERO_PROMOTE_KEY if int(written) == 0 else attention_schedule.PROMOTE_KEY
            mechanism += (f" (written with num_stages={int(written)}; the compiler gives the loop {stages} stages, "
                          f"`{key}`)")
        out.append({"line": _line(s.span), "stages": stages, "producers": producers,
                    "extent": _int_or_text(s.extent), "mechanism": mechanism,
                    "warp_specialized": ws is not None and ws.loop.same_as(s)})
    return out


def _warp_specialised(k, out=None):
    """(the compiler's warp-specialisation plan or None, why not, the Lowerer) for wgmma kernels,
    on the kernel the compiler lowers (its epilogue staged through shared memory where it is:
    ``transform.stage_epilogue``); ``out`` gets "epilogue_stage" (lines of the staged copies) and
    "persistent" (+ "persistent_why"). The check's Lowerer is reused when nothing was staged."""
    info, layouts, configs = k.info, k.layouts, dict(k.ctx.pass_configs)
    if layouts is None or not layouts.wgmma:
        return None, None, None
    try:
        from tilelang.transform import stage_epilogue, warp_specialize
        from tilelang.transform.lower_tile_ops import Lowerer

        result = stage_epilogue.chunked(stage_epilogue.staged(info, layouts, "sm_90a", configs), "sm_90a", configs)
        reuse = k.lowerer if result.info is info and result.layouts is layouts else None
        lw = result.lowerer or reuse or Lowerer(result.info, result.layouts, configs)
        if out is not None:
            out["epilogue_stage"] = [_line(s.span) for s in result.picked]
            out["epilogue_registers"] = [[_line(s.span), why] for s, why in result.skipped]
            out["persistent"] = lw.persistent_tiles is not None
            if lw.ws is not None and lw.ws.persistent is not None and lw.ws.persistent.paired_rows:
                out["persistent_pairs"] = lw.ws.persistent.paired_rows
                out["persistent_tail_split"] = not configs.get(warp_specialize.PAIRED_TAIL_KEY)
            if lw.persistent_why:
                out["persistent_why"] = lw.persistent_why
        return lw.ws, lw.ws_reason, lw
    except Exception:  # noqa: BLE001 - a kernel the lowering rejects: the plain description
        return None, None, None


def _early_loads(k, arch, warp_specialised=True) -> list:
    """``attention_schedule.planned_loads`` of the checked kernel ([] when it fails: the plain
    description then); where the one-wave default asked for a TMA producer the loop cannot have,
    as the compiler then lowers it (engine.pipeline._lower: without the key)."""
    from tilelang.transform import attention_schedule

    configs = dict(k.ctx.pass_configs)
    if not warp_specialised and getattr(k, "single_stage_auto", False):
        configs[attention_schedule.WS_SINGLE_STAGE_KEY] = False
    try:
        return attention_schedule.planned_loads(k.func, arch, configs)
    except Exception:  # noqa: BLE001 - hover text only
        return []


def _async_wgmma_loop(lw, pl) -> bool:
    """The loop is lowered as cp.async-fed asynchronous wgmma (``PipelinedLoop.async_wgmma``), not
    warp-specialised."""
    if lw.ws is not None and lw.ws.loop.same_as(pl.loop):
        return False
    return pl.async_wgmma(lw.layouts) is not None


def _overlap_text(ws) -> str:
    """How the consumers run an overlapped general body (``warp_specialize._lower_overlapped``)."""
    from tilelang.transform.kernel import decode_region
    from tilelang.transform.pipelined_loop import PipelinedLoop

    consumers = PipelinedLoop.of(ws.loop).consumers
    first, last, wait_at, deferred = ws.overlap
    text = (f"run the loop body with the gemm of line {_line(consumers[last].span)} issued asynchronously one "
            f"iteration late, right after the gemm of line {_line(consumers[first].span)}, so that it runs under "
            f"that gemm and the code after it up to line {_line(consumers[wait_at].span)}")
    if deferred:
        lines = ", ".join(str(_line(consumers[i].span)) for i in deferred)
        text += f"; line {lines} moves to the next iteration, between the two gemm issues"
    if len(ws.groups) > 1:
        late = ", ".join(decode_region(ws.producers[i][0].value.args[1]).buffer.name for i in ws.groups[1])
        early = ", ".join(decode_region(ws.producers[i][0].value.args[1]).buffer.name for i in ws.groups[0])
        text += (f"; {late} waits on mbarriers of its own, so {early} goes back to the producer as soon as the "
                 "first gemm retired")
    return text + ("; the consumer warpgroups do not wait for each other inside the loop (FlashAttention-3's "
                   "intra-warpgroup overlap; tl.disable_wgmma_overlap turns it off)")


def _early_loads_text(plan) -> str | None:
    """What ``transform.attention_schedule`` does to a loop of fewer than two stages: ``plan`` is
    (tiles loaded ahead, (tile, why) for those loaded where written, whether they are refilled for
    the next iteration), or None (left alone)."""
    if plan is None:
        return None
    moved, stay, refill = plan
    names = ", ".join(f"`{n}`" for n in moved)
    if refill:
        return (f"one stage: each of {names} is its own cp.async group, waited for just before the first "
                "statement that touches its tile and loaded again for the next iteration right after the last "
                "one, so it arrives under the rest of this iteration and the start of the next "
                "(tl.enable_one_stage_refill, opt-in; without it they load at the top of each iteration)")
    text = (f"not software-pipelined (num_stages < 2); the loads of {names} are issued together at the top of "
            "each iteration as cp.async groups, each waited for just before the first statement that touches "
            "its tile, so they arrive under the work before it")
    for name, why in stay:
        text += f"; `{name}` is loaded where written ({why})"
    return text + " (tl.disable_attention_schedule turns this off)"


def _mechanism(stages: int, producers: list) -> str:
    if not producers:
        return "no global-to-shared copies at the top of the loop body: nothing to pipeline"
    if stages < 2:
        return "not pipelined (num_stages < 2): each copy waits before the compute that reads it"
    return (f"cp.async (16-byte, L2-cached global-to-shared copies), a ring of {stages} shared-memory "
            f"buffers per staged tile: the copies for iteration k+{stages - 1} are in flight while "
            f"iteration k computes (commit_group, wait_group {stages - 1}, __syncthreads)")


def _roofline(k, arch: str, out: dict) -> None:
    """``out["roofline"]``: the kernel's counts and estimate on ``arch`` (``analysis.roofline``, the
    counting ``tilelang.tools.Analyzer`` uses), or ``{"no_estimate": why}``; ``flops_per_launch``."""
    from tilelang.analysis import roofline

    plans = k.layouts.gemms if k.layouts is not None else None
    try:
        counts = roofline.count([k.func], plans)
    except ValueError as err:
        out["roofline"] = {"no_estimate": str(err)}
        return
    except Exception as err:  # noqa: BLE001 - an estimate only: its hover lines are left out
        out["roofline"] = {"no_estimate": f"the count failed: {type(err).__name__}: {err}"}
        return
    out["roofline"] = roofline.on_arch(counts, arch)
    out["flops_per_launch"] = counts.flops or None
