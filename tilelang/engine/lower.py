"""``lower(func, target)``: run the pass pipeline on a parsed kernel and produce a
``KernelArtifact`` (CUDA source + launch description), or raise ``TileLangCompileError``.

This is the single boundary where compiler failures become diagnostics: a ``LoweringError``
(user mistake found by a pass) keeps its code and span; anything else is an internal error
(TL0003) located at the kernel, with the original exception kept as ``__cause__`` in debug mode.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field

from tvm import ir, tirx

from tilelang import targets
from tilelang.artifact import (NUM_SMS, ArtifactError, KernelArtifact, ParamSpec, affine_in, expr_names, is_shape_expr,
                               parse_int_expr)
from tilelang.codegen.wide_index import WIDE_INDEX
from tilelang.diagnostics import Diagnostic, Note, Severity, Span, TileLangCompileError
from tilelang.engine.callback import apply_cuda_postproc
from tilelang.engine.pipeline import PASSES
from tilelang.instrumentation import (abort_open_passes, compile_pass_instrumentation, create_pass_instruments,
                                      current_compile_pass_instrumentation, instrumentation_requested, pass_pipeline)
from tilelang.language.builtins import kernel_compile_flags, kernel_pass_configs, with_min_blocks_per_sm
from tilelang.tir_utils import any_expr, const_int, extern_name, tvm_ffi_walk, walk_stmts
from tilelang.transform.kernel import (LoweringError, analyze_kernel, compile_error, scope_of, source_kernel,
                                      split_kernels)
from tilelang.transform.pass_config import normalize, nvcc_flags
from tilelang.transform.pointer_ops import lower_pointer_ops
from tilelang.tools.pass_timing import create_pass_timing_tool, pass_profile_requested


# Debugging tools watching the pipeline (``tilelang.utils.pass_diff_hook``): each is called as
# ``observe(event, stage, state)`` with event "before" or "after" around every PASSES entry; it must
# not change the state. Empty by default (no cost).
PASS_OBSERVERS: list = []


@dataclass
class LowerState:
    func: object
    arch: str
    name: str
    pass_configs: dict = field(default_factory=dict)
    out_idx: list = field(default_factory=list)
    info: object = None
    layouts: object = None
    lowered: object = None
    cuda: object = None
    smem_bytes: int = 0
    tensormaps: list = field(default_factory=list)   # TMA descriptor specs (KernelArtifact.tensormaps)
    extra_threads: int = 0                            # producer warpgroup of a warp-specialised kernel
    persistent_tiles: object = None                   # a persistent kernel's number of output tiles
    lowerer: object = None                            # a Lowerer already built for info/layouts
    cluster_dims: object = None                       # (x, y, z) thread block cluster shape, or None
    min_blocks_per_sm: object = None                  # __launch_bounds__'s second argument the lowering asks for


def normalize_target(target) -> str:
    """The CUDA arch string (``sm_90a``...) for any accepted target spelling."""
    if target is None or target == "auto" or target == "cuda":
        return _detect_arch()
    if isinstance(target, dict):
        arch = target.get("arch")
        if target.get("kind", "cuda") != "cuda" or not arch:
            raise ValueError(f"unsupported target {target!r}: expected {{'kind': 'cuda', 'arch': 'sm_XX'}}")
        return _canonical_arch(arch)
    if hasattr(target, "arch") and not isinstance(target, str):
        return _canonical_arch(str(target.arch))
    text = str(target)
    if text.startswith("cuda"):
        for token in text.replace("=", " ").split():
            if token.startswith("sm_"):
                return _canonical_arch(token)
        return _detect_arch()
    if text.startswith("sm_"):
        return _canonical_arch(text)
    raise ValueError(f"unsupported target {target!r}: use 'auto', 'cuda', 'sm_90a', 'sm_80' or a dict")


def _canonical_arch(arch: str) -> str:
    return "sm_90a" if arch == "sm_90" else arch


def _detect_arch() -> str:
    env = os.environ.get("TILELANG_TARGET_ARCH")
    if env:
        return _canonical_arch(env)
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return "sm_90a" if (major, minor) == (9, 0) else f"sm_{major}{minor}"
    except Exception:  # noqa: BLE001 - no torch or no driver: fall back to the default
        pass
    return "sm_90a"


def lower(func, target="auto", pass_configs=None, out_idx=None, name=None, *, target_host=None,
          runtime_only=False, enable_host_codegen=False, enable_device_compile=False) -> KernelArtifact:
    """Compile a parsed kernel (PrimFunc) to a KernelArtifact (source only; nvcc runs later).
    Upstream's ``target_host``, ``runtime_only``, ``enable_host_codegen`` and
    ``enable_device_compile`` are accepted here and change nothing: ``tilelang.lower`` runs nvcc
    when asked, and the host side is our Python launcher. A target of another backend (upstream's
    ``"c"``, ``"llvm"``...) raises ValueError, after the kernel's own located errors if it has any."""
    kname = name or _func_name(func)
    configs = {**normalize(kernel_pass_configs(func)), **dict(pass_configs or {})}  # the caller's win
    try:
        arch = normalize_target(target)
    except ValueError:
        # another backend's target (upstream's "c", "llvm", "hip"...): the kernel's own located
        # errors first, as upstream reports them whatever the target, then the target's
        _report_kernel_errors(func, kname, configs, out_idx)
        raise
    if instrumentation_requested() or pass_profile_requested(configs):   # else no cost at all
        with _compile_session(kname, configs):
            return _lower_kernels(func, arch, kname, configs, out_idx)
    return _lower_kernels(func, arch, kname, configs, out_idx)


def _report_kernel_errors(func, kname, configs, out_idx) -> None:
    """Raise the TileLangCompileError lowering ``func`` for sm_90a meets, if any (nothing else)."""
    try:
        _lower_kernels(func, "sm_90a", kname, configs, out_idx)
    except TileLangCompileError:
        raise
    except Exception:  # noqa: BLE001 - only the kernel's own diagnostics are reported here
        pass


def _compile_session(kname, configs):
    """The instrumentation session of this compile (``tilelang.instrumentation``): the caller's
    when one is active, else a new one with the registered tools and, when ``tl.pass_profile`` /
    ``TILELANG_PASS_PROFILE`` asks, the pass timing tool."""
    timing = None if current_compile_pass_instrumentation() is not None else create_pass_timing_tool(configs)
    return compile_pass_instrumentation(name=kname, tools=[timing] if timing is not None else [])


def _lower_kernels(func, arch, kname, configs, out_idx) -> KernelArtifact:
    try:
        external = source_kernel(func)
        if external is not None:   # T.CUDASourceCodeKernel: the user's CUDA is the kernel
            return _source_artifact(func, external, arch, configs, out_idx)
        split = split_kernels(func)
    except LoweringError as err:
        raise TileLangCompileError([_to_diag(err, func)]) from None
    if split is not None and (len(split.funcs) > 1 or split.workspaces):
        return _lower_parts(func, split, arch, kname, configs, out_idx)
    if split is not None:   # one kernel after host-level statements (T.assume, bindings)
        func = split.funcs[0]
    return _lower_one(func, arch, kname, configs, out_idx)


_ENTRY = re.compile(r'__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(([^)]*)\)')
_C_SCALARS = {"int": "int32", "int32_t": "int32", "unsigned": "uint32", "unsigned int": "uint32",
              "uint32_t": "uint32", "long long": "int64", "int64_t": "int64", "long": "int64",
              "uint64_t": "uint64", "float": "float32", "double": "float64", "bool": "bool"}


def _source_artifact(func, external, arch, configs, out_idx) -> KernelArtifact:
    """A ``T.CUDASourceCodeKernel`` launch: its source with ``tl.h``; the entry's parameters are
    the tensors' data pointers in order, then the scalar params and shape symbols in order of
    first appearance."""
    entry, code, span = external
    entries = {m.group(1): m.group(2) for m in _ENTRY.finditer(code)}
    if entry not in entries:
        raise LoweringError("TL0002", f"T.CUDASourceCodeKernel: no __global__ function '{entry}' in the CUDA "
                            f"source. Available entries: {', '.join(entries) or '(none)'}", span)
    params, symbols = _params(func)
    tensors = [p.name for p in params if p.kind in ("tensor", "pointer")]
    scalars = []
    for p in params:
        for name in (p.shape if p.kind in ("tensor", "pointer") else [p.name]):
            if isinstance(name, str) and name not in scalars:
                scalars.append(name)
    args, types = [], []
    for k, decl in enumerate(a.strip() for a in entries[entry].split(",") if a.strip()):
        pool = tensors if "*" in decl else scalars
        if not pool:
            raise LoweringError("TL0002", f"T.CUDASourceCodeKernel: parameter {k} of '{entry}' ({decl}) has no "
                                f"{'tensor' if '*' in decl else 'scalar parameter or shape symbol'} left to take "
                                f"(tensors {tensors}, then scalars and symbols {scalars}, by position)", span)
        args.append(pool.pop(0))
        ctype = " ".join(t for t in decl.replace("*", " * ").split()[:-1] if t not in ("const", "__restrict__"))
        types.append("ptr" if "*" in decl else _C_SCALARS.get(ctype, "int32"))
    info = analyze_kernel(func)
    grid = {"blockIdx.x": "1", "blockIdx.y": "1", "blockIdx.z": "1"}
    block = [1, 1, 1]
    for iv, extent in info.launch:
        tag = str(iv.thread_tag)
        if tag.startswith("blockIdx"):
            grid[tag] = to_py(extent)
        else:
            block["xyz".index(tag[-1])] = const_int(extent)
    return KernelArtifact(
        name=entry, source='#include "tl.h"\n' + code, params=params, kernel_args=args,
        grid=[grid["blockIdx.x"], grid["blockIdx.y"], grid["blockIdx.z"]], block=block, dynamic_smem=0,
        arch=arch, symbols=symbols, out_idx=_out_indices(out_idx, len(params), func),
        compile_flags=nvcc_flags(configs) + [f for f in kernel_compile_flags(func) if f not in nvcc_flags(configs)],
        kernel_arg_types=types)


def _lower_parts(func, split, arch, kname, configs, out_idx) -> KernelArtifact:
    """Several ``T.Kernel`` blocks (and/or ``T.alloc_global`` scratch buffers): each block is
    lowered as a kernel of its own, taking the prim_func's params then the scratch buffers; the
    launcher runs them in order on one stream (``KernelArtifact.parts``)."""
    parts = [_lower_one(f, arch, kname if i == 0 else f"{kname}_{i}", configs, [])
             for i, f in enumerate(split.funcs)]
    params, symbols = _params(func)
    names = {p.name for p in params} | set(symbols)
    workspaces = []
    for ws in split.workspaces:
        spec = next(p for p in parts[0].params if p.name == ws.name)
        for d in spec.shape:
            if isinstance(d, str) and d not in names:
                raise TileLangCompileError([_to_diag(LoweringError(
                    "TL0002", f"T.alloc_global buffer '{ws.name}' has a dimension '{d}' that no parameter "
                    "gives"), func)])
        workspaces.append({"name": spec.name, "dtype": spec.dtype, "shape": list(spec.shape)})
    first = parts[0]
    outs = _out_indices(out_idx, len(params), func)
    return KernelArtifact(
        name=first.name, source="\n".join(p.source for p in parts), params=params,
        kernel_args=[a for a in first.kernel_args if a in names], grid=list(first.grid),
        block=list(first.block), dynamic_smem=first.dynamic_smem, arch=arch, symbols=symbols,
        out_idx=outs, compile_flags=list(first.compile_flags), parts=parts, workspaces=workspaces)


def _reject_unsaturated_rs(func) -> None:
    """``T.cast(round="rs", sat=False)``: stochastic rounding (cvt.rs) always saturates."""
    from tilelang.language.tir.ir import RS_NOSAT_SUFFIX
    from tilelang.tir_utils import children

    def nosat(e):
        name = e.args[0].value if (isinstance(e, tirx.Call) and e.args and isinstance(e.args[0], tirx.StringImm)) else ""
        return name.endswith(RS_NOSAT_SUFFIX)

    def visit(stmt):
        if isinstance(stmt, (tirx.BufferStore, tirx.Evaluate, tirx.LetStmt, tirx.Bind)) and any_expr(stmt, nosat) \
                and not any(any_expr(c, nosat) for c in children(stmt)):
            call = []
            any_expr(stmt, lambda e: nosat(e) and not call.append(e))
            raise LoweringError("TL0002", f"T.cast(round='rs', sat=False) to {call[0].dtype}: sat=false is not "
                                "supported; stochastic rounding always saturates to the finite range "
                                "(cvt.rs.satfinite)", stmt.span)

    walk_stmts(func.body, visit)


def _lower_one(func, arch, kname, configs, out_idx) -> KernelArtifact:
    st = LowerState(func, arch, kname, configs, out_idx=list(out_idx or []))
    try:
        st.func = lower_pointer_ops(st.func)   # T.access_ptr / T.ptx_cp_async (unchanged without them)
        _reject_unsaturated_rs(st.func)
        if current_compile_pass_instrumentation() is not None:
            _run_instrumented(st)   # the same stages, as TVM passes the session's tools see
        else:
            for stage, run in PASSES:
                _run_stage(stage, run, st)
    except LoweringError as err:
        raise _compile_error(err, func) from None
    except TileLangCompileError:
        raise
    except Exception as err:  # noqa: BLE001 - an internal bug, reported as such
        diag = Diagnostic(code="TL0003", severity=Severity.ERROR,
                          message=f"internal compiler error: {type(err).__name__}: {err}",
                          span=_func_span(func),
                          notes=[Note("this is a bug in TileLang; please report it with the kernel")])
        error = TileLangCompileError([diag])
        if os.environ.get("TILELANG_FRONTEND_DEBUG") == "1":
            raise error from err
        raise error from None
    return _artifact(st, out_idx)


def _run_stage(stage, run, st) -> None:
    for observe in PASS_OBSERVERS:
        observe("before", stage, st)
    run(st)
    for observe in PASS_OBSERVERS:
        observe("after", stage, st)


def _stage_module(st):
    """The kernel as it stands between two stages, as an IRModule (what pass instruments see)."""
    import tvm

    return tvm.IRModule({st.name: st.lowered if st.lowered is not None else st.func})


def _run_instrumented(st) -> None:
    """Run PASSES as TVM module passes named ``tl.<stage>`` in a PassContext holding the active
    session's instruments, under the pipeline phase ``pipeline_cuda``: tools see every stage
    begin and end, with the kernel's IR before and after it. The TVM passes codegen runs
    (``tirx.StmtSimplify``...) are reported from codegen's own PassContext."""
    import tvm

    raised = []   # an exception crossing TVM's FFI comes back retyped: re-raise the original

    def stage_pass(stage, run):
        def apply(_mod, _ctx):
            try:
                _run_stage(stage, run, st)
            except BaseException as err:
                raised.append(err)
                raise
            return _stage_module(st)

        return tvm.transform.module_pass(apply, opt_level=0, name=f"tl.{stage}")

    with pass_pipeline("cuda"):
        instruments = create_pass_instruments(context=f"stage=lower, kernel={st.name}")
        with tvm.transform.PassContext(instruments=instruments):
            for stage, run in PASSES:
                try:
                    stage_pass(stage, run)(_stage_module(st))
                except Exception as err:
                    abort_open_passes(raised[0] if raised else err)
                    if raised:
                        raise raised[0] from None
                    raise


def _func_name(func) -> str:
    attrs = getattr(func, "attrs", None)
    if attrs is not None and "global_symbol" in attrs:
        return str(attrs["global_symbol"])
    return "main"


def _func_span(func):
    span = getattr(func.body, "span", None)
    return Span.from_tvm(span) if span is not None else None


def _compile_error(err: LoweringError, func) -> TileLangCompileError:
    return compile_error([_to_diag(err, func)])


def _to_diag(err: LoweringError, func) -> Diagnostic:
    span = Span.from_tvm(err.span) if err.span is not None else _func_span(func)
    return Diagnostic(code=err.code, severity=Severity.ERROR, message=err.message, span=span,
                      notes=[Note(n) for n in err.notes])


def _shape_expr(p, d, extent) -> str:
    """A buffer dimension that is an integer expression of symbols (``m * 2 + 1``), as the text the
    argument binder evaluates; the symbols themselves are bound by other dimensions or scalars."""
    text = str(extent)
    try:
        parse_int_expr(text, expr_names(text))
    except ArtifactError:
        raise LoweringError("TL0002", f"shape of '{p.name}' dimension {d} is {extent}: a dimension must be an int, "
                            "a symbolic variable or + - * // % of them") from None
    return text


def _params(func):
    from tvm import ir

    from tilelang.language.pointer import pointer_param_indices

    params, symbols = [], {}
    pointers = set(pointer_param_indices(func))
    for index, p in enumerate(func.params):
        if tirx.is_buffer_var(p):
            shape = []
            for d, extent in enumerate(p.shape):
                value = const_int(extent)
                if value is not None:
                    shape.append(value)
                elif isinstance(extent, tirx.Var):
                    shape.append(extent.name)
                    if index not in pointers:   # a raw address carries no shape to read
                        symbols.setdefault(extent.name, [index, d])
                else:
                    shape.append(_shape_expr(p, d, extent))
            strides = None
            if p.strides:
                strides = [const_int(s) if const_int(s) is not None else str(s) for s in p.strides]
            kind = "pointer" if index in pointers else "tensor"
            params.append(ParamSpec(p.name, kind, str(p.dtype), shape, strides))
        elif isinstance(p.ty, ir.PointerType):   # a T.ptr parameter used as a plain address
            params.append(ParamSpec(p.name, "pointer", "handle", []))
        else:
            params.append(ParamSpec(p.name, "scalar", str(p.ty.dtype if hasattr(p.ty, "dtype") else p.ty), []))
            symbols.setdefault(p.name, [index, -1])
    for index, spec in enumerate(params):   # a symbol only inside `n * 4`: solved from that dimension
        for d, entry in enumerate(spec.shape if spec.kind == "tensor" else []):
            for name in sorted(expr_names(entry)) if is_shape_expr(entry) else []:
                if name not in symbols and affine_in(entry, name) is not None:
                    symbols[name] = [index, d]
    return params, symbols


def to_py(expr) -> str:
    """A Python integer expression for a TIR launch extent."""
    value = const_int(expr)
    if value is not None:
        return str(value)
    name = type(expr).__name__
    if isinstance(expr, tirx.Var):
        return expr.name
    ops = {"Add": "+", "Sub": "-", "Mul": "*", "FloorDiv": "//", "FloorMod": "%", "Div": "//"}
    if name in ops:
        return f"({to_py(expr.a)} {ops[name]} {to_py(expr.b)})"
    if name in ("Min", "Max"):
        return f"{name.lower()}({to_py(expr.a)}, {to_py(expr.b)})"
    if name == "Cast":
        return to_py(expr.value)
    raise ValueError(f"unsupported launch extent {expr}")


def _out_indices(out_idx, n, func) -> list:
    outs = []
    for i in ([out_idx] if isinstance(out_idx, int) else list(out_idx or [])):
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise TileLangCompileError([Diagnostic(
                code="TL0701", severity=Severity.ERROR,
                message=f"out_idx {i} is out of range for a kernel with {n} parameters",
                span=_func_span(func))])
        outs.append(j)
    return outs


def _artifact(st: LowerState, out_idx) -> KernelArtifact:
    params, symbols = _params(st.func)
    by_name = {p.name: p for p in params}
    kernel_args = []
    tensormaps = {t["name"] for t in st.tensormaps}
    for ctype, arg in st.cuda.args:
        base = arg[:-4] if arg.endswith("_ptr") and arg[:-4] in by_name else arg
        if base not in by_name and base + "_ptr" in by_name:
            base += "_ptr"      # a T.ptr parameter `x_ptr` printed bare (codegen.cuda._bare_names)
        in_strides = any(base in (p.strides or []) for p in params)   # read from its first occurrence
        if base not in by_name and base not in symbols and base not in tensormaps and not in_strides:
            raise RuntimeError(f"kernel argument {arg} matches no parameter or symbol")
        kernel_args.append(base)
    grid = {"blockIdx.x": "1", "blockIdx.y": "1", "blockIdx.z": "1"}
    block = [1, 1, 1]
    for iv, extent in st.info.launch:
        tag = str(iv.thread_tag)
        if tag.startswith("blockIdx"):
            grid[tag] = to_py(extent)
        else:
            block["xyz".index(tag[-1])] = const_int(extent)
    block[0] += st.extra_threads   # a warp-specialised kernel's producer warpgroup
    if st.persistent_tiles is not None:   # one block per SM (at most one per tile), looping over tiles
        grid = {"blockIdx.x": f"min({to_py(st.persistent_tiles)}, {NUM_SMS})", "blockIdx.y": "1", "blockIdx.z": "1"}
        if st.cluster_dims is not None and tuple(st.cluster_dims)[0] == 2:   # clusters of two: an even grid
            grid["blockIdx.x"] = f"{grid['blockIdx.x']} // 2 * 2"
    outs = _out_indices(out_idx, len(params), st.func)
    flags = nvcc_flags(st.pass_configs)   # fast math, ptxas options, tl.device_compile_flags
    flags += [f for f in kernel_compile_flags(st.func) if f not in flags]  # T.annotate_compile_flags
    source = with_min_blocks_per_sm(apply_cuda_postproc(st.cuda.source, st.arch), st.func)
    min_blocks = st.min_blocks_per_sm
    if not min_blocks and not st.pass_configs.get("tl.disable_single_wave_launch_bound"):
        min_blocks = _single_wave_min_blocks(list(grid.values()), block, st.arch)
    if not min_blocks and not st.pass_configs.get("tl.disable_streaming_launch_bound"):
        min_blocks = 1 if st.lowered is not None and register_streaming(st.lowered) else None
    if min_blocks:   # a pair of blocks per SM (setmaxnreg) or one wave (a user annotation is in already)
        source = re.sub(r"__launch_bounds__\((\d+)\)", rf"__launch_bounds__(\1, {int(min_blocks)})", source)
    return KernelArtifact(
        name=st.cuda.name, source=source, params=params, kernel_args=kernel_args,
        grid=[grid["blockIdx.x"], grid["blockIdx.y"], grid["blockIdx.z"]], block=block,
        dynamic_smem=_smem_size(st.smem_bytes), arch=st.arch, symbols=symbols, out_idx=outs,
        compile_flags=flags, tensormaps=list(st.tensormaps), l2_persist=_l2_persist(st.func, params),
        host_asserts=_host_asserts(st.func, params, symbols),
        kernel_arg_types=_wide_symbol_arg_types(st.cuda.args, kernel_args, by_name, tensormaps),
        index_bits=64 if st.pass_configs.get(WIDE_INDEX) else 32,
        occupancy_step=bool(st.pass_configs.get("tl.enable_occupancy_step", True)))


def _smem_size(nbytes):
    """The artifact's dynamic_smem: an int, or the expression of a run-time size (shared buffers
    of run-time extent: ``Lowerer.dynamic_smem_expr``)."""
    if isinstance(nbytes, int):
        return nbytes
    value = const_int(nbytes)
    return int(value) if value is not None else to_py(nbytes)


def _single_wave_min_blocks(grid, block, arch):
    """1 (``__launch_bounds__(T, 1)``) for a kernel whose whole grid, a constant, is one wave of
    at most one block per SM on the architecture's data-centre part, with at most 128 threads a
    block (so that two blocks still fit an SM's 64 K registers at 255 a thread, on parts with
    fewer SMs); None otherwise. Nothing is gained there from the few registers ptxas otherwise
    keeps for more blocks per SM, and more let it start a loop's loads before a wait
    (upstream's gdn_chunk_delta_h: 128 blocks, 98 -> 119 registers, every W load ahead of the
    h tile's TMA store wait). Upstream declares ``(T, 1)`` for every kernel."""
    sms = targets.sm_count(arch) if arch else None
    threads = math.prod(block)
    try:
        blocks = math.prod(int(str(g)) for g in grid)
    except ValueError:
        return None     # (a grid that depends on the arguments)
    if sms is None or threads > 128 or blocks > sms:
        return None
    return 1


# calls that mark a kernel as more than plain loads, arithmetic and stores (``register_streaming``)
_STAGING_CALLS = ("cp_async", "mma", "wgmma", "tma", "mbarrier", "ldmatrix", "stmatrix", "setmaxnreg", "bulk")
# ... and, inside the streaming loop itself, synchronisation of any kind
_LOOP_SYNC_CALLS = ("sync", "barrier", "fence", "atomic", "shfl")


def _call_names(node) -> list:
    """The names of the calls in ``node``: a ``call_extern``'s function, else the op's name."""
    names = []
    tvm_ffi_walk(node, lambda n: names.append(extern_name(n) or getattr(n.op, "name", ""))
                 if isinstance(n, tirx.Call) else None)
    return names


def register_streaming(func) -> bool:
    """Whether a lowered kernel streams global memory through registers: a serial loop of at
    least two iterations loads a global tensor into a thread's local array in each one (a gemv's
    slices of x and of W, dequantised in registers), or stores it straight to global memory (a
    T.copy from global to global: attention backward's dQ postprocess, 64 elements a thread,
    ptxas 32 -> 72 registers with the minimum, as upstream's), synchronises nothing inside, and the kernel
    uses no tensor cores, cp.async, TMA or mbarriers. Such a kernel gets ``__launch_bounds__(T,
    1)``, as upstream declares for every kernel: without the minimum, ptxas keeps to the registers
    that fill the SM with blocks (32 a thread at 128 threads) and interleaves each iteration's
    loads with their arithmetic; with it, it issues the loads of several unrolled iterations
    before the first use (H200, upstream's dequant_gemv_fp16xint4: 32 -> 56 registers, 18.3 ->
    16.7-17.4 us; the split-K gemvs 18.4 -> 17.2-18.0 us). Kernels with shared-memory tiles or
    tensor cores lost with the minimum (splitk_gemm 445 -> 546 us, varlen attention 6 %), and so
    did a kernel whose loads sit outside any loop (gdn_cumsum 24.5 -> 26 us): those keep ``(T)``."""
    if any(any(k in n for k in _STAGING_CALLS) for n in _call_names(func.body)):
        return False
    found = []

    def streams(loop) -> bool:
        n = const_int(loop.extent)
        if loop.kind != tirx.ForKind.SERIAL or loop.thread_binding is not None or (n is not None and n < 2):
            return False
        if any(any(k in c for k in _LOOP_SYNC_CALLS) for c in _call_names(loop.body)):
            return False
        loads = []

        def on_store(s):
            if isinstance(s, tirx.BufferStore) and scope_of(s.buffer) in ("local", "global"):
                tvm_ffi_walk(s.value, lambda e: loads.append(e) if isinstance(e, ir.TensorLoad)
                             and scope_of(e.source) == "global" else None)

        walk_stmts(loop.body, on_store)
        return bool(loads)

    walk_stmts(func.body, lambda s: found.append(s) if isinstance(s, tirx.For) and streams(s) else None)
    return bool(found)


def _wide_symbol_arg_types(cuda_args, kernel_args, by_name, tensormaps):
    """The C type of every kernel argument, when a symbol is passed wider than int32 (an int64
    ``T.symbolic``: the launcher must pack 8 bytes); None otherwise (the launcher's defaults)."""
    types = []
    for (ctype, _), base in zip(cuda_args, kernel_args):
        words = [t for t in ctype.replace("*", " * ").split() if t not in ("const", "__restrict__")]
        if "*" in words:
            types.append("ptr")
        elif base in tensormaps or "CUtensorMap" in words:
            types.append("tensormap")
        else:
            types.append(_C_SCALARS.get(" ".join(words)))
    wide = any(t not in (None, "int32") for t, a in zip(types, kernel_args) if a not in by_name and a not in tensormaps)
    return types if wide and None not in types else None


_CMP = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def _py_cond(expr) -> str:
    """A Python condition for a TIR boolean over integers (ValueError if it is not one)."""
    name = type(expr).__name__
    if name in _CMP:
        return f"({to_py(expr.a)} {_CMP[name]} {to_py(expr.b)})"
    if name in ("And", "Or"):
        return f"({_py_cond(expr.a)} {name.lower()} {_py_cond(expr.b)})"
    if name == "Not":
        return f"(not {_py_cond(expr.a)})"
    if name == "Cast" and str(expr.dtype) == "bool":
        return _py_cond(expr.value)
    raise ValueError(f"not a host condition: {expr}")


def _host_asserts(func, params, symbols) -> list:
    """``T.assume(cond)`` conditions the launcher can check: over symbols and integer scalars only."""
    host = set(symbols) | {p.name for p in params if p.kind == "scalar" and p.dtype.startswith(("int", "uint"))}
    for p in params:
        host |= {e for e in list(p.shape) + list(p.strides or []) if isinstance(e, str) and e.isidentifier()}
    found = []

    def visit(node):
        if extern_name(node) == "tl::assume":
            found.append(node.args[1])
        return False

    any_expr(func.body, visit)
    out = []
    for cond in found:
        names = set()
        any_expr(cond, lambda e: isinstance(e, tirx.Var) and names.add(e.name) is not None)
        if isinstance(cond, tirx.Cast) and str(cond.dtype) == "bool":
            cond = cond.value
        if not names or not names <= host:
            continue
        try:
            entry = {"expr": _py_cond(cond), "text": str(cond)}
        except ValueError:
            continue
        if entry not in out:
            out.append(entry)
    return out


def _l2_persist(func, params) -> list:
    """``T.annotate_l2_hit_ratio`` attributes as ``KernelArtifact.l2_persist`` entries (the first
    ratio given for a tensor wins)."""
    from tvm import tirx

    from tilelang.language.annotate import L2_HIT_RATIO_ATTR
    from tilelang.tir_utils import children, walk_stmts

    found = []
    walk_stmts(func.body, lambda s: found.append((getattr(s.node, "value", str(s.node)), float(s.value.value)))
               if isinstance(s, tirx.AttrStmt) and s.attr_key == L2_HIT_RATIO_ATTR else None)
    index = {p.name: i for i, p in enumerate(params) if p.kind == "tensor"}
    out = {}
    for name, ratio in found:
        if name not in index:
            raise TileLangCompileError([_to_diag(LoweringError(
                "TL0002", f"T.annotate_l2_hit_ratio names '{name}', which is not a tensor parameter of the "
                "kernel (only global tensors passed to it can be kept in L2)"), func)])
        out.setdefault(index[name], round(ratio, 6))
    return [{"param": i, "hit_ratio": r} for i, r in out.items()]
