"""``check(func, target_arch, context)``: every IR-level check of one parsed kernel, in order.

Contract: returns diagnostics sorted by position and never raises on a user mistake; a bug in a
check becomes one TL0003 diagnostic (``Reporter.guard``). Order matters only for deduplication:
the specific checks run first, then layout inference (``transform.layout_inference``), whose
``LoweringError`` becomes a diagnostic at its own span unless a check already reported an error
on those lines; register pressure needs the inferred layouts and runs last. Inference gets the
context's pass configs, as the compiler's does (``tl.disable_wgmma`` changes the layouts).

A prim_func the compiler accepts with host-level statements before its ``with T.Kernel`` (name
bindings, ``T.assume``) or with several kernels is cut the way the compiler cuts it
(``transform.kernel.split_kernels``) and each part is checked; an output written by any part
counts as written. A ``T.CUDASourceCodeKernel`` has no tile ops to check.

``analyze`` returns ``(Kernel or None, diagnostics)``: the same run, with the facts it computed
(``Kernel``: analysis and layouts), so that the hover summary (``analysis.summary``) reads the
analysis the checks read instead of computing its own.
"""

from __future__ import annotations

import dataclasses

from tilelang import targets
from tilelang.analysis.alignment import check_alignment
from tilelang.analysis.bounds import check_bounds
from tilelang.analysis.dataflow import check_dataflow
from tilelang.analysis.divergence import check_divergence
from tilelang.analysis.fragments import check_fragment_reads, check_split_accumulation
from tilelang.analysis.gemm import check_gemms
from tilelang.analysis.kernel import Kernel
from tilelang.analysis.report import CheckContext, Reporter
from tilelang.analysis.resources import check_lowered_smem, check_registers, check_resources
from tilelang.analysis.shapes import check_shapes
from tilelang.diagnostics import Diagnostic, Note, Severity, Span, sort_diagnostics
from tilelang.transform import attention_schedule, stage_operands, user_ws, widen_threads
from tilelang.transform.kernel import LoweringError, analyze_kernel, source_kernel, split_kernels, static_shape
from tilelang.transform.layout_inference import infer_layouts

CHECKS = (
    ("gemm", check_gemms),              # TL0101 TL0102 TL0103
    ("shapes", check_shapes),           # TL0601 TL0603 TL0604
    ("bounds", check_bounds),           # TL0602
    ("alignment", check_alignment),     # TL0301 TL0302
    ("dataflow", check_dataflow),       # TL0401 TL0402 TL0403
    ("divergence", check_divergence),   # TL0404
    ("resources", check_resources),     # TL0501 TL0503
)


def check(func, target_arch: str = "sm_90a", context: CheckContext | None = None) -> list[Diagnostic]:
    """All diagnostics for one kernel on ``target_arch``; see the module docstring."""
    return analyze(func, target_arch, context)[1]


def analyze(func, target_arch: str = "sm_90a", context: CheckContext | None = None):
    """``(Kernel or None, diagnostics)``: ``check``'s run and the facts it computed (None when the
    kernel analysis itself failed; ``Kernel.layouts`` is None when inference failed)."""
    ctx = context or CheckContext()
    rep = Reporter(func, ctx)
    try:
        targets.parse_arch(target_arch)
        if source_kernel(func) is not None:      # T.CUDASourceCodeKernel: the user's CUDA, not tile ops
            return None, []
        split = split_kernels(func)
    except LoweringError as err:
        _report_lowering(rep, err)
        return None, sort_diagnostics(rep.finish())
    except Exception as err:  # noqa: BLE001 - reported as TL0003 by finish()
        rep.crashes.append(f"kernel analysis: {type(err).__name__}: {err}")
        return None, sort_diagnostics(rep.finish())
    if split is None:
        return _analyze_one(func, target_arch, ctx, rep)
    if len(split.funcs) == 1 and not split.workspaces:
        return _analyze_one(split.funcs[0], target_arch, ctx, Reporter(split.funcs[0], ctx))
    return _analyze_parts(func, split, target_arch, ctx)


def _analyze_parts(func, split, target_arch, ctx):
    """A prim_func the compiler cuts into several kernels (``split_kernels``): every part is
    checked on its own, except that an output counts as written when any part writes it."""
    n = len(func.params)
    out_idx = None if ctx.out_idx is None else [int(i) + n if int(i) < 0 else int(i) for i in ctx.out_idx]
    part_ctx = dataclasses.replace(ctx, out_idx=out_idx)
    found, first, infos = [], None, []
    for part in split.funcs:
        try:
            infos.append(analyze_kernel(part))
        except Exception:  # noqa: BLE001 - the part's own run reports it
            pass
    seen = set()
    for part in split.funcs:
        k, diags = _analyze_one(part, target_arch, part_ctx, Reporter(part, part_ctx), siblings=infos)
        first = first or k
        for d in diags:
            key = (d.code, d.message, d.span)
            if key not in seen:
                seen.add(key)
                found.append(d)
    return first, sort_diagnostics(found)


def _analyze_one(func, target_arch, ctx, rep, siblings=()):
    written = func
    try:
        # the kernel the compiler makes: a gemm's fragment B copied to shared memory first
        # (transform/stage_operands.py), 256 threads where 128 would spill (transform/widen_threads.py)
        staged = stage_operands.stage(func)
        # (one-stage warp specialisation decided, and stages promoted, as the engine does)
        configs = dict(ctx.pass_configs)
        staged, decided = attention_schedule.plan_one_stage(staged, target_arch, configs)
        auto = decided is not configs
        if auto:
            ctx = dataclasses.replace(ctx, pass_configs=decided)
        func = widen_threads.widen(staged, target_arch, dict(ctx.pass_configs))
        # (T.ws blocks: the compute role's threads, as the compiler lays them out)
        info = user_ws.apply(analyze_kernel(func), target_arch)
    except LoweringError as err:
        _report_lowering(rep, err)
        return None, sort_diagnostics(rep.finish())
    except Exception as err:  # noqa: BLE001 - reported as TL0003 by finish()
        rep.crashes.append(f"kernel analysis: {type(err).__name__}: {err}")
        return None, sort_diagnostics(rep.finish())
    k = Kernel.build(func, info, target_arch, ctx)
    k.single_stage_auto = auto
    if not func.same_as(staged):
        k.written_threads = widen_threads.FROM
    k.siblings = [s for s in siblings if s.func is not written]
    rep.allocs = k.allocs
    for name, fn in CHECKS:
        rep.guard(f"{name} checks", fn, k, rep)
    rep.guard("out_idx check", check_out_idx, k, rep)
    k.layouts = rep.guard("layout inference", _infer, k, rep)
    rep.guard("register checks", check_registers, k, rep)            # TL0502
    rep.guard("lowered shared memory check", check_lowered_smem, k, rep)  # TL0501 (sm_90a carve-out)
    rep.guard("run-time shared extent check", _check_run_time_extents, k, rep)  # TL0002
    rep.guard("fragment access checks", check_fragment_reads, k, rep)  # TL0203
    rep.guard("split accumulation checks", check_split_accumulation, k, rep)  # TL0405
    rep.guard("pipelines as written", _check_pipelines_as_written, k, rep)  # TL0406
    return k, sort_diagnostics(rep.finish())


def _check_pipelines_as_written(k, rep):
    """T.Pipelined loops the compiler runs as written for their own synchronisation
    (``user_ws._as_written``)."""
    for loop, stages, why in getattr(k.info, "pipelines_as_written", ()):
        rep.emit("TL0406", f"T.Pipelined(num_stages={stages}) runs as written, one iteration after another: "
                 f"its body orders its own loads ({why}), so nothing is issued ahead",
                 rep.header_span(loop),
                 notes=["plain T.copy loads are pipelined (on sm_90a, `tl.cluster_multicast` shares operand "
                        "tiles within a cluster); T.ws blocks with one mbarrier per stage order stages by hand"])


def _check_run_time_extents(k, rep):
    """Shared buffers of run-time extent the compiler cannot place (a swizzled layout, pipeline
    stages, 4-bit elements): the lowering's TL0002, reported here at the allocation."""
    if k.layouts is None:
        return
    from tilelang.transform.lower_tile_ops import run_time_extent_error
    from tilelang.transform.pipelined_loop import plan_stages

    tail = [buf for buf in k.info.shared_buffers() if not static_shape(buf) and buf in k.layouts.shared]
    stages = plan_stages(k.info) if tail else {}
    for buf in tail:
        err = run_time_extent_error(buf, k.layouts.shared[buf], stages.get(buf, 1))
        if err is not None:
            _report_lowering(rep, err)


def _infer(k, rep):
    try:
        return infer_layouts(k.info, k.arch, dict(k.ctx.pass_configs))
    except LoweringError as err:
        _report_lowering(rep, err)
        return None


def _report_lowering(rep, err: LoweringError) -> None:
    """A compiler ``LoweringError`` as a diagnostic at its span (an error: the kernel won't build)."""
    span = Span.from_tvm(err.span, rep.ctx.source(_file_of(err.span))) if err.span is not None else None
    if rep.has_error_near(span) or _limit_noted(rep, span):
        return
    narrowed = None
    if err.span is not None:
        narrowed = rep.header_span(_SpanHolder(err.span))
    rep.emit(err.code, err.message, narrowed or span or rep.kernel_span(),
             notes=[Note(n) for n in err.notes], severity=Severity.ERROR)


def _limit_noted(rep, span) -> bool:
    """Whether a TL0804 (a limit of the installed compiler, not of the kernel) already explains
    why lowering stops on the lines of ``span``."""
    return span is not None and any(d.code == "TL0804" and d.span is not None and d.span.file == span.file
                                    and span.line <= d.span.line <= span.end_line for d in rep.diagnostics)


def _file_of(tvm_span) -> str | None:
    name = getattr(getattr(tvm_span, "source_name", None), "name", None)
    return str(name) if name else None


class _SpanHolder:
    """Lets ``Reporter.header_span`` narrow a bare TVM span (a loop's span to its header)."""

    def __init__(self, span):
        self.span = span


def check_out_idx(k, rep) -> None:
    """TL0701: every ``out_idx`` entry names a parameter (negative entries count from the end)."""
    if not k.ctx.out_idx:
        return
    n = len(k.func.params)
    for i in k.ctx.out_idx:
        if not -n <= int(i) < n:
            rep.emit("TL0701", f"out_idx {i} is out of range for a kernel with {n} parameters "
                     f"(valid: 0..{n - 1} or -{n}..-1)", k.ctx.out_idx_span or rep.kernel_span(),
                     notes=[Note(f"the parameters are {', '.join(p.name for p in k.func.params)}")])
