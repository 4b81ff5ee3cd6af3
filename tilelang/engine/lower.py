"""``lower(func, target)``: run the pass pipeline on a parsed kernel and produce a
``KernelArtifact`` (CUDA source + launch description), or raise ``TileLangCompileError``.

This is the single boundary where compiler failures become diagnostics: a ``LoweringError``
(user mistake found by a pass) keeps its code and span; anything else is an internal error
(TL0003) located at the kernel, with the original exception kept as ``__cause__`` in debug mode.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from tvm import tirx

from tilelang.artifact import NUM_SMS, KernelArtifact, ParamSpec
from tilelang.diagnostics import Diagnostic, Note, Severity, Span, TileLangCompileError
from tilelang.engine.callback import apply_cuda_postproc
from tilelang.engine.pipeline import PASSES
from tilelang.language.builtins import kernel_compile_flags, kernel_pass_configs, with_min_blocks_per_sm
from tilelang.tir_utils import const_int
from tilelang.transform.kernel import LoweringError
from tilelang.transform.pass_config import normalize, nvcc_flags


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


def lower(func, target="auto", pass_configs=None, out_idx=None, name=None) -> KernelArtifact:
    """Compile a parsed kernel (PrimFunc) to a KernelArtifact (source only; nvcc runs later)."""
    arch = normalize_target(target)
    kname = name or _func_name(func)
    configs = {**normalize(kernel_pass_configs(func)), **dict(pass_configs or {})}  # the caller's win
    st = LowerState(func, arch, kname, configs, out_idx=list(out_idx or []))
    try:
        for _, run in PASSES:
            run(st)
    except LoweringError as err:
        raise TileLangCompileError([_to_diag(err, func)]) from None
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


def _func_name(func) -> str:
    attrs = getattr(func, "attrs", None)
    if attrs is not None and "global_symbol" in attrs:
        return str(attrs["global_symbol"])
    return "main"


def _func_span(func):
    span = getattr(func.body, "span", None)
    return Span.from_tvm(span) if span is not None else None


def _to_diag(err: LoweringError, func) -> Diagnostic:
    span = Span.from_tvm(err.span) if err.span is not None else _func_span(func)
    return Diagnostic(code=err.code, severity=Severity.ERROR, message=err.message, span=span,
                      notes=[Note(n) for n in err.notes])


def _params(func):
    params, symbols = [], {}
    for index, p in enumerate(func.params):
        if tirx.is_buffer_var(p):
            shape = []
            for d, extent in enumerate(p.shape):
                value = const_int(extent)
                if value is not None:
                    shape.append(value)
                elif isinstance(extent, tirx.Var):
                    shape.append(extent.name)
                    symbols.setdefault(extent.name, [index, d])
                else:
                    raise LoweringError("TL0002", f"shape of '{p.name}' dimension {d} must be an int or a "
                                        f"single symbolic variable, got {extent}")
            strides = None
            if p.strides:
                strides = [const_int(s) if const_int(s) is not None else str(s) for s in p.strides]
            params.append(ParamSpec(p.name, "tensor", str(p.dtype), shape, strides))
        else:
            params.append(ParamSpec(p.name, "scalar", str(p.ty.dtype if hasattr(p.ty, "dtype") else p.ty), []))
            symbols.setdefault(p.name, [index, -1])
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


def _artifact(st: LowerState, out_idx) -> KernelArtifact:
    params, symbols = _params(st.func)
    by_name = {p.name: p for p in params}
    kernel_args = []
    tensormaps = {t["name"] for t in st.tensormaps}
    for ctype, arg in st.cuda.args:
        base = arg[:-4] if arg.endswith("_ptr") and arg[:-4] in by_name else arg
        if base not in by_name and base not in symbols and base not in tensormaps:
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
    n = len(params)
    outs = []
    for i in ([out_idx] if isinstance(out_idx, int) else list(out_idx or [])):
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise TileLangCompileError([Diagnostic(
                code="TL0701", severity=Severity.ERROR,
                message=f"out_idx {i} is out of range for a kernel with {n} parameters",
                span=_func_span(st.func))])
        outs.append(j)
    flags = nvcc_flags(st.pass_configs)   # fast math, ptxas options, tl.device_compile_flags
    flags += [f for f in kernel_compile_flags(st.func) if f not in flags]  # T.annotate_compile_flags
    source = with_min_blocks_per_sm(apply_cuda_postproc(st.cuda.source, st.arch), st.func)
    return KernelArtifact(
        name=st.cuda.name, source=source, params=params, kernel_args=kernel_args,
        grid=[grid["blockIdx.x"], grid["blockIdx.y"], grid["blockIdx.z"]], block=block,
        dynamic_smem=int(st.smem_bytes), arch=st.arch, symbols=symbols, out_idx=outs,
        compile_flags=flags, tensormaps=list(st.tensormaps))
