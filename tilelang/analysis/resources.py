"""Per-block resources: shared memory against the target's budget (TL0501), registers per
thread of each fragment (TL0502) and the block's thread count (TL0503).

Input: a ``Kernel``; TL0502 needs its ``layouts``. Shared memory is counted the way the
compiler lays it out (``transform.smem_plan``): every shared buffer, 128-byte aligned (an mbarrier
8-byte aligned), times the
number of pipeline stages ``transform.pipelined_loop.plan_stages`` gives it, buffers with disjoint
lifetimes sharing bytes; once layouts
are known, sm_90a wgmma kernels are re-counted with the lowering's exact carve-out (1024-byte
aligned operand tiles, mbarrier rings: ``check_lowered_smem``). The notes list every buffer with
its share, largest first.
"""

from __future__ import annotations

import math

from tilelang import targets
from tilelang.diagnostics import Note
from tilelang.language.dtypes import nbytes
from tilelang.tir_utils import const_int
from tilelang.transform.kernel import FRAGMENT_SCOPE
from tilelang.transform import smem_plan
from tilelang.transform.pipelined_loop import plan_stages

SMEM_ALIGN = 128


def check_resources(k, rep) -> None:
    rep.guard("shared memory check", _check_smem, k, rep)
    rep.guard("thread count check", _check_threads, k, rep)


def check_registers(k, rep) -> None:
    if k.layouts is not None:
        rep.guard("register check", _check_registers, k, rep)


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n % 1024 else f"{n // 1024} KiB"


def shared_usage(k, gathers: bool = True):
    """[(buffer, bytes per copy, stages)] of the kernel's shared buffers; None if one is symbolic.
    ``gathers=False``: gathered T.Parallel copies keep one buffer (where staging them does not fit,
    the lowering leaves them so: engine.pipeline)."""
    stages = plan_stages(k.info, gathers)
    out = []
    for buf in k.info.shared_buffers():
        shape = [const_int(s) for s in buf.shape]
        if None in shape:
            return None
        out.append((buf, math.prod(shape) * nbytes(str(buf.dtype)), stages.get(buf, 1)))
    return out


def planned_smem(k, usage):
    """(total bytes, aliases) of the compiler's placement (``transform.smem_plan``) for ``usage``:
    buffers whose lifetimes are disjoint share bytes."""
    from tilelang.transform.lower_tile_ops import MBARRIER_ALIGN
    from tilelang.transform.user_ws import barrier_buffers

    reuse = not k.ctx.pass_configs.get("tl.disable_shared_memory_reuse")
    aligns = {buf: MBARRIER_ALIGN for buf in barrier_buffers(k.info.body)}
    _, total, alias = smem_plan.plan(k.info.body, {buf: size * n for buf, size, n in usage}, aligns, reuse=reuse)
    return total, alias


def _sharing_note(alias):
    pairs = sorted({tuple(sorted((a.name, b.name))) for a, bs in alias.items() for b in bs})
    if not pairs:
        return None
    return Note("already counted with shared bytes for buffers never live at the same time: "
                + ", ".join(f"'{a}' and '{b}'" for a, b in pairs))


def _check_smem(k, rep) -> None:
    usage = shared_usage(k)
    if not usage:
        return
    total, alias = planned_smem(k, usage)
    limit = targets.smem_per_block(k.arch)
    if total > limit:
        unstaged = shared_usage(k, gathers=False)
        if unstaged != usage and planned_smem(k, unstaged)[0] <= limit:
            return
        _report_smem(k, rep, usage, total, limit, _sharing_note(alias))


def check_lowered_smem(k, rep) -> None:
    """Once layouts are known (sm_90a wgmma kernels): the compiler's exact carve-out, whose
    1024-byte aligned wgmma tiles and mbarrier rings can exceed the budget that the buffers
    alone fit in. Reported only where the per-buffer count above did not already fire."""
    if k.layouts is None or not k.layouts.wgmma:
        return
    usage = shared_usage(k)
    if not usage:
        return
    limit = targets.smem_per_block(k.arch)
    estimate, _ = planned_smem(k, usage)
    if estimate > limit:
        return
    from tilelang.transform.lower_tile_ops import Lowerer

    k.lowerer = Lowerer(k.info, k.layouts, dict(k.ctx.pass_configs))
    total = k.lowerer.smem_bytes
    from tilelang.transform.layout_inference import budget_fallbacks, infer_layouts

    for change in budget_fallbacks(k.layouts):
        # wgmma warpgroups splitting N, and wgmma beside mma.sync, are optimisations: where their
        # plan does not fit, the lowering takes the next one (engine.pipeline), which is what counts
        if total <= limit:
            break
        layouts = infer_layouts(k.info, k.arch, {**dict(k.ctx.pass_configs), **change})
        lw = Lowerer(k.info, layouts, dict(k.ctx.pass_configs))
        if lw.smem_bytes < total:
            k.lowerer, total = None, lw.smem_bytes
            if not layouts.wgmma:
                return
    if total > limit and shared_usage(k, gathers=False) != usage:
        # staged gathers that do not fit are left as written (engine.pipeline)
        from tilelang.transform.pipelined_loop import GATHERS_KEY

        lw = Lowerer(k.info, k.layouts, {**dict(k.ctx.pass_configs), GATHERS_KEY: False})
        if lw.smem_bytes < total:
            k.lowerer, total = None, lw.smem_bytes
    if total > limit:
        _report_smem(k, rep, usage, total, limit, Note(
            f"on sm_90a, wgmma operand tiles start at 1024-byte boundaries and a warp-specialised pipeline "
            f"keeps 16 bytes of mbarriers per stage (and per tile group with barriers of its own): "
            f"{total - estimate} bytes beyond the buffers themselves"))


def _report_smem(k, rep, usage, total, limit, extra=None) -> None:
    usage.sort(key=lambda u: -u[1] * u[2])
    notes = []
    for buf, size, n in usage:
        shape = "x".join(str(const_int(s)) for s in buf.shape)
        times = f" x {n} pipeline stages = {_kib(size * n)}" if n > 1 else ""
        notes.append(Note(f"'{buf.name}' {shape} {buf.dtype}: {_kib(size)}{times}", rep.alloc_span(buf)))
    if extra is not None:
        notes.append(extra)
    staged = any(n > 1 for _, _, n in usage)
    hint = "use smaller tiles (often block_K)" + (", fewer pipeline stages (num_stages)" if staged else "")
    rep.emit("TL0501", f"the kernel needs {_kib(total)} ({total} bytes) of shared memory per block, "
             f"but {targets.gpu_name(k.arch)} allows {_kib(limit)} ({limit} bytes): {hint}, or "
             f"lower-precision staging buffers", rep.alloc_span(usage[0][0]), notes=notes)


def _check_registers(k, rep) -> None:
    for buf, layout in k.layouts.fragments.items():
        if k.scope(buf) != FRAGMENT_SCOPE:
            continue
        regs = -(-layout.local_size * nbytes(str(buf.dtype)) // 4)
        if regs <= targets.MAX_REGISTERS_PER_THREAD:
            continue
        shape = "x".join(str(s) for s in layout.shape)
        rep.emit("TL0502", f"fragment '{buf.name}' ({shape} {buf.dtype}) needs {regs} registers per "
                 f"thread over {layout.num_threads} threads, more than the {targets.MAX_REGISTERS_PER_THREAD} "
                 f"a thread can address: it spills to local memory", rep.alloc_span(buf),
                 notes=[Note(f"its layout: {layout.describe()}"),
                        Note("use more threads per block, a smaller tile, or a 16-bit type")])


def _check_threads(k, rep) -> None:
    threads = k.info.num_threads
    if threads > targets.MAX_THREADS_PER_BLOCK:
        rep.emit("TL0503", f"the block has {threads} threads, more than the {targets.MAX_THREADS_PER_BLOCK} "
                 f"a GPU allows", rep.kernel_span())
    elif threads > 32 and threads % 32 and k.tile_ops("reduce"):
        # (a block smaller than one warp shuffles over the mask of its live lanes)
        rep.emit("TL0503", f"the block has {threads} threads, not a multiple of the 32-thread warp: "
                 f"T.reduce_* combines partial results with warp shuffles over whole warps",
                 rep.kernel_span())
