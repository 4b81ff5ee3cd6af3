"""Runs in the worker process: the ``language``, ``compile`` and ``run`` requests (completion data
and code lenses).

``language_index()`` -> ``{"T": [member], "tilelang": [member]}``: every public member of
``tilelang.language`` (and of ``tilelang``) with ``kind`` (function, class, dtype, value),
``signature`` (``"(A, B, C, transpose_A=False, ...)"``), ``params`` (``[{"name", "default"}]``),
the docstring and its source ``file``/``line`` when Python knows them.

``compile_kernel(service, {"path", "text", "factory", "target", "binding_index"})`` builds the
factory with the binding the checker would use (``binding.plan_file``) and the factory's pass
configs, lowers it (``tilelang.lower``), compiles it to PTX with nvcc once
(``jit.nvcc.compile_ptx``) and assembles that PTX with ``ptxas -v`` for the resource usage, and
returns registers, spills, shared memory, grid/block, the time of each step, the static
instruction mix of the PTX and the CUDA source.

``run_kernel(service, {...same})`` runs the kernel on the local GPU with random inputs
(``Profiler``): median time, TFLOP/s (from the T.gemm shapes) or GB/s (tensor bytes), the roofline
estimate on that GPU and the measured time's percentage of it (``roofline_of_run``), and, when
the file defines ``ref_program``, a comparison of outputs and time against it. Without a GPU it
says so and runs nothing. Failures are answers (``{"ok": True, "error": "..."}``), not exceptions.
"""

from __future__ import annotations

import inspect
import re
import time

PTX_PATTERNS = (
    ("mma.sync", r"mma\.sync\."),
    ("wgmma", r"wgmma\.mma_async"),
    ("ldmatrix", r"ldmatrix\.sync"),
    ("cp.async", r"cp\.async\.c[ag]\."),
    ("cp.async.commit/wait", r"cp\.async\.(?:commit_group|wait_group|wait_all)"),
    ("cp.async.bulk (TMA)", r"cp\.async\.bulk\."),
    ("ld.global", r"ld\.global\."),
    ("st.global", r"st\.global\."),
    ("ld.shared", r"ld\.shared\."),
    ("st.shared", r"st\.shared\."),
    ("bar.sync", r"(?:bar|barrier)\.sync"),
    ("shfl.sync", r"shfl\.sync\."),
)


# ----- completion data ------------------------------------------------------------------------

def language_index() -> dict:
    import tilelang
    import tilelang.language as T

    return {"T": _members(T), "tilelang": _members(tilelang)}


def _members(namespace) -> list:
    out = []
    for name in sorted(n for n in dir(namespace) if not n.startswith("_")):
        obj = getattr(namespace, name, None)
        if inspect.ismodule(obj) or type(obj).__name__ == "_Feature":  # modules, ``from __future__``
            continue
        out.append(_member(name, obj))
    return out


def _member(name: str, obj) -> dict:
    kind = "class" if inspect.isclass(obj) else "function" if callable(obj) else "value"
    if type(obj).__name__ in ("DtypeConstructor", "dtype"):  # T.float16 (tilelang.language.dtypes.dtype)
        kind = "dtype"
    entry = {"name": name, "kind": kind, "signature": None, "params": [], "doc": "", "file": None, "line": None}
    target = obj.__init__ if inspect.isclass(obj) and kind == "class" else obj
    try:
        sig = inspect.signature(target if kind != "class" else obj)
        params = [p for p in sig.parameters.values() if p.name != "self"]
        entry["params"] = [{"name": p.name, "default": None if p.default is p.empty else _default_text(p.default),
                            "kind": p.kind.name} for p in params]
        entry["signature"] = "(" + ", ".join(_param_text(p) for p in params) + ")"
    except (TypeError, ValueError):
        pass
    entry["doc"] = (inspect.getdoc(obj) or "")[:2000] if kind != "value" else ""
    source = obj if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismethod(obj) else type(obj)
    try:
        entry["file"] = inspect.getsourcefile(source)
        entry["line"] = inspect.getsourcelines(source)[1]
    except (TypeError, OSError):
        pass
    return entry


def _param_text(p) -> str:
    text = p.name
    if p.kind is p.VAR_POSITIONAL:
        text = "*" + text
    elif p.kind is p.VAR_KEYWORD:
        text = "**" + text
    if p.default is not p.empty:
        text += f"={_default_text(p.default)}"
    return text


def _default_text(value) -> str:
    import enum

    if isinstance(value, enum.Enum):
        return f"T.{type(value).__name__}.{value.name}"
    return repr(value)


# ----- building the kernel a lens asks for ----------------------------------------------------

class LensError(Exception):
    """A reason the lens cannot do its work, for the user."""


def bound_kernel(service, message: dict):
    """(PrimFunc, binding text, module) of the requested factory with its checker binding."""
    from tvm import tirx

    from tilelang.analysis.source import parse_file
    from tilelang_lsp import worker_build
    from tilelang_lsp.binding import plan_file
    from tilelang_lsp.worker_check import file_config, module_for

    path, text, name = message["path"], message["text"], message["factory"]
    try:
        model = parse_file(path, text)
    except SyntaxError as err:
        raise LensError(f"the file does not parse (line {err.lineno}: {err.msg})") from None
    plan = plan_file(model, file_config(path)[0])
    fp = next((fp for fp in plan.factories if fp.factory.name == name), None)
    if fp is None:
        raise LensError(f"no kernel factory named '{name}' in this file")
    if not fp.bindings:
        raise LensError(f"no values for {', '.join(fp.unbound)} of '{name}': add "
                        f"`# tilelang: check {name}({', '.join(n + '=...' for n in fp.unbound)})`")
    binding = fp.bindings[min(int(message.get("binding_index") or 0), len(fp.bindings) - 1)]
    module = module_for(service, message)
    request = {"factory": name, "args": list(binding.args), "kwargs": [list(kv) for kv in binding.kwargs],
               "prim_func": fp.factory.is_prim_func, "fill": binding.fill}
    try:
        func, _ = worker_build.call_factory(module, request)
    except Exception as err:  # noqa: BLE001 - the user's factory failed
        raise LensError(f"{binding.shown} raised {type(err).__name__}: {err}") from None
    if not isinstance(func, tirx.PrimFunc):
        raise LensError(f"{binding.shown} did not return a @T.prim_func")
    return func, binding, module


def _answer_error(err: Exception) -> dict:
    from tilelang.diagnostics import TileLangCompileError

    if isinstance(err, TileLangCompileError):
        first = err.diagnostics[0] if err.diagnostics else None
        where = f" (line {first.span.line})" if first is not None and first.span is not None else ""
        text = f"{first.code}: {first.message}{where}" if first is not None else str(err)
        return {"ok": True, "error": f"the compiler rejected the kernel: {text}"}
    return {"ok": True, "error": str(err)}


# ----- compile -----------------------------------------------------------------------------------

def compile_kernel(service, message: dict) -> dict:
    from tilelang import lower
    from tilelang.diagnostics import TileLangCompileError
    from tilelang.jit import nvcc

    from tilelang_lsp.worker_build import pass_configs_of
    from tilelang_lsp.worker_check import DEFAULT_TARGET, file_config

    target = message.get("target") or file_config(message["path"])[0].target or DEFAULT_TARGET
    try:
        func, binding, module = bound_kernel(service, message)
        times = {}
        start = time.perf_counter()
        artifact = lower(func, target, pass_configs_of(module.__dict__[message["factory"]]))
        times["lower_ms"] = _ms(start)
        start = time.perf_counter()
        ptx = nvcc.compile_ptx(artifact.source, artifact.arch, artifact.compile_flags)
        times["ptx_ms"] = _ms(start)
        start = time.perf_counter()
        info = ptxas_usage(ptx, artifact.arch, artifact.compile_flags)
        times["ptxas_ms"] = _ms(start)
        usage = info.get(artifact.name) or next(iter(info.values()), None)
        ptx, usage, bound = _occupancy_step(artifact, ptx, usage, times)
    except (LensError, TileLangCompileError, nvcc.NVCCError) as err:
        return _answer_error(err) | _nvcc_log(err)
    return {"ok": True, "error": None, "factory": message["factory"], "binding": binding.describe(),
            "target": artifact.arch, "kernel_name": artifact.name, "grid": artifact.grid, "block": artifact.block,
            "min_blocks_per_sm": bound,
            "dynamic_smem": artifact.dynamic_smem, "registers": getattr(usage, "registers", None),
            "spill_stores": getattr(usage, "spill_stores", None), "spill_loads": getattr(usage, "spill_loads", None),
            "static_smem": getattr(usage, "smem", None), "times": times,
            "compile_ms": sum(times.values()), "instructions": count_ptx(ptx), "cuda_source": artifact.source}


def _occupancy_step(artifact, ptx, usage, times):
    """(ptx, usage, the launch bound's block count or None) of the kernel as ``tilelang.compile``
    builds it: with the occupancy step (``tilelang.jit.occupancy``) where its lowering asked for one
    and the bounded build is what the compile keeps (``artifact.source`` then becomes that)."""
    from tilelang.jit import nvcc, occupancy

    if usage is None or not artifact.occupancy_step:
        return ptx, usage, None

    def build(source):
        start = time.perf_counter()
        ptx2 = nvcc.compile_ptx(source, artifact.arch, artifact.compile_flags)
        info = ptxas_usage(ptx2, artifact.arch, artifact.compile_flags)
        times["occupancy_ms"] = _ms(start)
        return ptx2, info.get(artifact.name) or next(iter(info.values()), None)

    kept = occupancy.attempt(artifact, usage, build)
    return (ptx, usage, None) if kept is None else kept


def _ptxas_flags(flags) -> list:
    """The options of nvcc ``flags`` that nvcc hands to ptxas (``--ptxas-options=...``,
    ``-maxrregcount``), as ptxas takes them."""
    out = []
    for flag in flags or ():
        if flag.startswith(("--ptxas-options=", "-Xptxas=")):
            out += [opt for opt in flag.split("=", 1)[1].split(",") if opt]
        elif flag.lstrip("-").startswith("maxrregcount="):
            out.append("--maxrregcount=" + flag.split("=", 1)[1])
    return out


def ptxas_usage(ptx: str, arch: str, flags=()) -> dict:
    """``{entry: PtxasInfo}`` of ``ptx`` assembled by ``ptxas -v`` for ``arch`` with the ptxas
    options among the kernel's nvcc ``flags``: the resource usage of the PTX already compiled,
    without a second nvcc run over the CUDA source."""
    import subprocess
    import tempfile
    from pathlib import Path

    from tilelang.artifact import arch_number
    from tilelang.jit import nvcc

    tool = nvcc.find_cuda_tool("ptxas")
    if tool is None:
        raise nvcc.CudaToolNotFoundError("ptxas was not found next to nvcc, under CUDA_HOME or on PATH")
    num, suffix = arch_number(arch)
    with tempfile.TemporaryDirectory(prefix="tilelang-ptxas-") as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx)
        cmd = [tool, "-v", f"-arch=sm_{num}{suffix}", *_ptxas_flags(flags), str(src),
               "-o", str(Path(tmp) / "kernel.cubin")]
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    log = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        raise nvcc.NVCCError(f"ptxas failed (exit status {proc.returncode}): {log[:2000]}", log=log, command=cmd)
    return nvcc.parse_ptxas_info(log)


def _nvcc_log(err) -> dict:
    log = getattr(err, "log", "") or ""
    return {"log": log[-4000:]} if log else {}


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1e3, 1)


def count_ptx(ptx: str) -> dict:
    """Static count of each instruction family in ``ptx`` (see ``PTX_PATTERNS``)."""
    body = [line.strip() for line in ptx.splitlines()]
    body = [line for line in body if line and not line.startswith("//")]
    out = {}
    for label, pattern in PTX_PATTERNS:
        regex = re.compile(r"^(?:@!?%\w+\s+)?" + pattern)
        out[label] = sum(1 for line in body if regex.match(line))
    return out


# ----- run ---------------------------------------------------------------------------------------

def run_kernel(service, message: dict) -> dict:
    import torch

    if not torch.cuda.is_available():
        return {"ok": True, "ran": False, "error": None, "factory": message["factory"],
                "message": "No CUDA GPU is visible on this machine (torch.cuda.is_available() is False), so "
                           "nothing was run. The Compile lens works without a GPU."}
    from tilelang.diagnostics import TileLangCompileError

    try:
        func, binding, module = bound_kernel(service, message)
        return _run_on_gpu(func, binding, module, message)
    except (LensError, TileLangCompileError, ValueError, RuntimeError) as err:
        return _answer_error(err) | {"ran": False}


def _run_on_gpu(func, binding, module, message) -> dict:
    import tilelang
    from tilelang.analysis.summary import summarize
    from tilelang.profiler import Profiler
    from tilelang_lsp.worker_build import pass_configs_of

    obj = module.__dict__.get(message["factory"])
    configs = pass_configs_of(obj)
    kernel = tilelang.compile(func, out_idx=getattr(obj, "out_idx", None), target="auto", pass_configs=configs)
    prof = Profiler(kernel)
    ms = prof.do_bench()
    out = {"ok": True, "ran": True, "error": None, "factory": message["factory"], "binding": binding.describe(),
           "device": _device_name(), "ms": ms}
    arch = kernel.artifact.arch if hasattr(kernel, "artifact") else "sm_90a"
    summary = summarize(func, arch, configs)
    flops = summary.get("flops_per_launch")
    if flops:
        out["tflops"] = flops / ms / 1e9
    else:
        out["gbps"] = _tensor_bytes(prof) / ms / 1e6
    out.update(roofline_of_run(summary.get("roofline"), arch, out["device"], ms))
    return _with_reference(out, prof, binding, module)


def roofline_of_run(counted: dict | None, arch: str, device: str, ms: float) -> dict:
    """``{"roofline": estimate on the GPU the kernel ran on (``tilelang.targets`` facts of the product
    ``device`` names), "roofline_percent": 100 * estimate / measured}`` from the hover summary's
    counts (``analysis.roofline``), or the reason there is none."""
    from tilelang.analysis import roofline

    if not counted or "flops" not in counted:
        return {"roofline": {"no_estimate": (counted or {}).get("no_estimate", "the kernel was not counted")}}
    estimate = roofline.on_arch(roofline.Counts.from_dict(counted), arch, device)
    return {"roofline": estimate,
            "roofline_percent": roofline.percent_of_roofline(estimate.get("time_s"), ms / 1e3)}


def _with_reference(out, prof, binding, module) -> dict:
    ref = module.__dict__.get("ref_program")
    if callable(ref):
        out.update(_compare_with_reference(prof, ref, binding, module))
    return out


def _device_name() -> str:
    import torch

    return torch.cuda.get_device_name(torch.cuda.current_device())


def _tensor_bytes(prof) -> int:
    args = prof.make_args(with_outputs=True)
    return sum(a.numel() * a.element_size() for a in args if hasattr(a, "element_size"))


def _compare_with_reference(prof, ref, binding, module) -> dict:
    """Outputs and time of the kernel against ``ref_program`` on the same inputs."""
    import functools

    from tilelang.profiler import do_bench

    extra = _reference_kwargs(ref, binding, module)
    call = functools.partial(ref, **extra)
    out = {"reference": "ref_program"}
    try:
        prof.assert_allclose(call)
        out["matches_reference"] = True
    except AssertionError as err:
        out["matches_reference"] = False
        out["mismatch"] = str(err)[:600]
    except Exception as err:  # noqa: BLE001 - the reference itself failed
        out["reference_error"] = f"{type(err).__name__}: {err}"[:600]
        return out
    args = prof.make_args()
    out["reference_ms"] = do_bench(lambda: call(*args))
    return out


def _reference_kwargs(ref, binding, module) -> dict:
    """The binding's keyword values whose names ``ref_program`` also takes (``trans_A=...``)."""
    try:
        names = set(inspect.signature(ref).parameters)
    except (TypeError, ValueError):
        return {}
    out = {}
    for name, text in binding.kwargs:
        if name in names:
            try:
                out[name] = eval(text, module.__dict__)  # noqa: S307 - the user's own source text
            except Exception:  # noqa: BLE001
                continue
    return out
