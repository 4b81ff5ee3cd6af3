"""JITKernel: a compiled TileLang kernel callable on torch tensors.

Contract:
- ``JITKernel(artifact, ir=None, prim_func=None, include_dirs=())`` checks the
  artifact and prepares the argument plan; it needs no GPU, no nvcc and no
  tvm, so kernels can be built and introspected anywhere.  torch is imported
  only to build the argument plan; without torch the kernel can still be
  introspected and the first call raises ImportError.
- ``kernel(*args)``: pass every parameter, or (when ``out_idx`` is non-empty)
  only the inputs, and the outputs are allocated with torch.empty on the
  inputs' device.  Returns the output tensor (one), a list (several, as upstream), or None
  when out_idx is empty.  Every argument is validated before launching (see
  ``adapter_args``); the launch goes to torch's current stream of the tensors'
  device.  Without a GPU the call raises RuntimeError("no CUDA device: ...").
- The cubin is compiled with nvcc on first launch when the artifact has none.
- A kernel that indexes with 32-bit integers refuses a call binding a tensor of more than 2**31
  elements (``IndexWidthError``); when it knows how it was compiled (``tilelang.compile``, the
  jit factories, ``JITKernel(prim_func, ...)``) it compiles its 64-bit-index variant instead
  (pass config ``tl.enable_wide_index``: every symbolic-shape tensor indexed in int64), once,
  and runs the call on it. Calls with smaller tensors keep the 32-bit kernel.
- An artifact of several kernels (``parts``) launches them in order on the current stream; the
  first one allocates the outputs and the ``T.alloc_global`` workspaces (torch.empty).
- Introspection: ``get_kernel_source`` (also ``kernel_source``),
  ``get_host_source`` (our host side is Python: the launch description and the
  generated argument checker), ``export_sources``, ``get_ptx``/``show_ptx``/
  ``export_ptx``, ``get_sass``/``show_sass``, ``ptxas_info``,
  ``launch_description``, ``get_profiler``, ``run_once``; attributes
  ``artifact``, ``params``, ``out_idx``, ``name``, ``ir``, ``prim_func``,
  ``target`` (the arch), ``compile_flags``, ``pass_configs`` and ``execution_backend`` (as
  asked for), ``host_source``, ``adapter`` (the kernel itself), ``resource_usage`` / ``n_regs`` /
  ``n_spills`` / ``n_max_threads`` (ptxas, on first use); upstream's tuner record ``config``, ``latency``, ``ref_latency``
  (None unless the autotuner chose the kernel, ``update_tuner_result`` / ``get_tuner_result``).
"""

from __future__ import annotations

import math
import threading
from pathlib import Path

from tilelang.artifact import IndexWidthError, KernelArtifact
from tilelang.codegen.wide_index import WIDE_INDEX
from tilelang.jit import cache, nvcc
from tilelang.transform.pass_config import normalize


# ``tilelang.compile``, for upstream's ``JITKernel(prim_func, ...)``: set by ``tilelang.jit`` when it
# is imported (this module sits below it and cannot import it).
COMPILE = None


def wide_builder(func, out_idx, target, pass_configs, compile_flags):
    """What compiles ``func``'s 64-bit-index variant (``JITKernel.with_wide_variant``), or None when
    these pass configs already ask for it."""
    configs = dict(pass_configs or {})
    if configs.get(WIDE_INDEX):
        return None
    return lambda: COMPILE(func, out_idx=out_idx, target=target, pass_configs={**configs, WIDE_INDEX: True},
                           compile_flags=compile_flags)


class JITKernel:
    """A launchable kernel built from a KernelArtifact."""

    config = latency = ref_latency = None     # the autotuner's record of the kernel it chose (class default)

    def __init__(self, artifact: KernelArtifact | None = None, ir=None, prim_func=None, include_dirs=(), *,
                 func=None, out_idx=None, target="auto", pass_configs=None, compile_flags=None,
                 execution_backend=None, target_host=None, verbose=False, from_database=False):
        """``JITKernel(artifact)`` wraps a built kernel. Upstream's form ``JITKernel(prim_func,
        out_idx=..., target=..., pass_configs=..., compile_flags=...)`` (or ``func=``) compiles the
        PrimFunc as ``tilelang.compile`` does; ``execution_backend``, ``target_host``, ``verbose``
        and ``from_database`` are accepted for upstream code (we have one launcher)."""
        if func is None and artifact is not None and not isinstance(artifact, KernelArtifact):
            func, artifact = artifact, None
        self.pass_configs = dict(pass_configs or {})            # (as asked for)
        self.execution_backend = execution_backend or "auto"
        if artifact is None and func is None and from_database:
            # upstream's cache loader makes an empty kernel and fills it in; there is nothing to
            # fill here, so the shell only checks its pass configs and refuses to run
            normalize(pass_configs)
            self.artifact = None
            self._entry = self._from_database_shell
            return
        if artifact is None:
            if func is None:
                raise TypeError("JITKernel needs a KernelArtifact or a PrimFunc to compile")
            self.compile_flags = compile_flags
            self.target = target
            self.target_host = target_host
            self.verbose = verbose
            self._compile_and_create_adapter(func, out_idx)
            return
        self._setup(artifact, ir, prim_func, include_dirs)

    def _compile_and_create_adapter(self, func, out_idx):
        """Compile ``func`` and make this kernel launchable, in one instrumentation session
        (``tilelang.instrumentation``; with the pass timing tool when ``tl.pass_profile`` asks)."""
        from tilelang.instrumentation import compile_pass_instrumentation, current_compile_pass_instrumentation
        from tilelang.tools.pass_timing import create_pass_timing_tool

        attrs = getattr(func, "attrs", None)
        name = str(attrs["global_symbol"]) if attrs is not None and "global_symbol" in attrs else "main"
        configs = dict(self.pass_configs or {})
        timing = None if current_compile_pass_instrumentation() is not None else create_pass_timing_tool(configs)
        with compile_pass_instrumentation(name=name, tools=[timing] if timing is not None else []):
            meta = {"kernel": name, "target": str(self.target), "backend": self.execution_backend, "out_idx": out_idx}
            self.artifact = self._compile_artifact(func, configs, meta)
            return self._create_adapter_from_artifact(func, out_idx, self.artifact, configs, meta)

    def _compile_artifact(self, func, pass_configs, meta) -> KernelArtifact:
        """Lower ``func`` and build its cubin (``tilelang.compile``, with the disk cache)."""
        built = COMPILE(func, out_idx=meta.get("out_idx"), target=self.target, pass_configs=pass_configs,
                        compile_flags=self.compile_flags)
        return built.artifact

    def _create_adapter_from_artifact(self, func, out_idx, artifact, pass_configs, meta):
        """Make this kernel launch ``artifact`` (our adapter is the kernel itself)."""
        self._setup(artifact, None, func, ())
        return self.with_wide_variant(wide_builder(func, out_idx, self.target, pass_configs, self.compile_flags))

    def _setup(self, artifact, ir, prim_func, include_dirs) -> None:
        self.artifact = artifact
        self.ir = ir
        self.prim_func = prim_func
        self.include_dirs = list(include_dirs)
        self._launcher = None
        self._lock = threading.Lock()
        self._wide_build = self._wide = None    # the 64-bit-index variant (with_wide_variant)
        self._ptx: str | None = None
        self._sass: str | None = None
        artifact.check()
        self._plan = None
        self._entry = self._build_and_call
        self._parts = None   # several kernels (artifact.parts): (first with outputs, first, rest)
        self._parts_key = None   # ... and the disk-cache key to store them under once built
        if artifact.parts:
            self._entry = self._call_parts
            return
        try:
            self._build_plan()
        except ImportError:
            pass  # no torch here: introspection still works; calling will say why it cannot

    # ------------------------------------------------------------ calling
    def __call__(self, *args):
        try:
            return self._entry(*args)
        except IndexWidthError:
            if self._wide_build is None or self.artifact.parts:
                raise
            return self._wide_variant()(*args)

    def with_wide_variant(self, build):
        """``build()`` compiles this kernel's 64-bit-index variant (``tilelang.compile`` with
        ``tl.enable_wide_index``): the kernel runs a call that binds a tensor of more than 2**31
        elements on it, compiled on the first such call. ``build`` None: such calls are refused."""
        self._wide_build = build
        return self

    def _wide_variant(self) -> "JITKernel":
        with self._lock:
            if self._wide is None:
                self._wide = self._wide_build()
        return self._wide

    @staticmethod
    def _from_database_shell(*args):
        raise RuntimeError("this JITKernel was made with from_database=True and holds no kernel; build one with "
                           "tilelang.compile(prim_func, ...) or JITKernel(prim_func, ...)")

    def _call_parts(self, *args):
        """Several kernels: the first allocates the outputs (given only the inputs) and the
        workspaces, then every part runs in order with the params and the workspaces."""
        if self._parts is None:
            self._parts = self._build_parts()
        with_outs, first, rest = self._parts
        art = self.artifact
        n, outs, nws = len(art.params), list(art.out_idx), len(art.workspaces)
        if len(args) == n or not outs:
            got, full = first(*args), list(args)
            ws = [] if not nws else [got] if nws == 1 else list(got)
        else:
            got = with_outs(*args)
            got = [got] if len(outs) + nws == 1 else list(got)
            full, ws = list(args), got[len(outs):]
            for o, t in sorted(zip(outs, got[:len(outs)])):
                full.insert(o, t)
        for kernel in rest:
            kernel(*full, *ws)
        res = [full[o] for o in outs]
        return None if not res else res[0] if len(res) == 1 else list(res)

    def _build_parts(self):
        from dataclasses import replace

        art = self.artifact
        self.ensure_cubin()
        n = len(art.params)
        ws = list(range(n, n + len(art.workspaces)))
        head = art.parts[0]
        with_outs = JITKernel(replace(head, out_idx=list(art.out_idx) + ws), include_dirs=self.include_dirs)
        first = JITKernel(replace(head, out_idx=ws), include_dirs=self.include_dirs)
        rest = [JITKernel(p, include_dirs=self.include_dirs) for p in art.parts[1:]]
        return with_outs, first, rest

    def _build_plan(self):
        from tilelang.jit.adapter_args import ArgPlan  # imports torch

        with self._lock:
            if self._plan is None:
                self._plan = ArgPlan(self.artifact, launch=self._first_launch)
                self._entry = self._plan.entry
        return self._plan

    def _build_and_call(self, *args):
        try:
            self._build_plan()
        except ImportError as e:
            raise ImportError(f"calling a TileLang kernel needs torch, which failed to import: {e}") from e
        return self._entry(*args)

    def _first_launch(self, device, gx, gy, gz, stream, values, smem=None) -> None:
        """Build the launcher once, then route every later call straight to it (``smem``: a
        run-time dynamic shared memory size, ``ArgPlan``)."""
        launcher = self._get_launcher()
        self._plan.set_launch(launcher)
        launcher(device, gx, gy, gz, stream, values, smem)

    def _get_launcher(self):
        from tilelang.jit.driver import KernelLauncher

        with self._lock:
            if self._launcher is None:
                art = self.artifact
                self._launcher = KernelLauncher(self.ensure_cubin(), art.name, self._plan.arg_kinds,
                                                # (a run-time size: set per launch)
                                                art.block, art.dynamic_smem if isinstance(art.dynamic_smem, int)
                                                else 0, art.arch,
                                                cooperative="cooperative_groups::this_grid()" in (art.source or ""),
                                                pdl=uses_pdl(art), l2_window=_l2_window(art, len(self._plan.arg_kinds)))
            return self._launcher

    def store_parts_under(self, key: str) -> "JITKernel":
        """An artifact of several kernels whose cubins are not all built yet is written to the disk
        cache under ``key`` once ``ensure_cubin`` has built them (a later process loads it whole)."""
        if self.artifact.parts and any(p.cubin is None for p in self.artifact.parts):
            self._parts_key = key
        return self

    def ensure_cubin(self) -> bytes:
        """The artifact's cubin, compiling it with nvcc first if it has none."""
        art = self.artifact
        for part in art.parts:   # several kernels: one cubin each (the artifact's own stays None)
            if part.cubin is None:
                part.cubin = nvcc.compile_artifact(part, self.include_dirs)
        if art.parts:
            if self._parts_key is not None:
                key, self._parts_key = self._parts_key, None
                if cache.enabled():
                    cache.store(key, art)
            return art.parts[0].cubin
        if art.cubin is None:
            art.cubin = nvcc.compile_artifact(art, self.include_dirs)
        return art.cubin

    # ------------------------------------------------------------ attributes
    @property
    def name(self) -> str:
        return self.artifact.name

    @property
    def params(self) -> list:
        return self.artifact.params

    @property
    def out_idx(self) -> list[int]:
        return list(self.artifact.out_idx)

    @property
    def arg_plan_source(self) -> str:
        """The generated fast-path argument checker (for debugging)."""
        return self._build_plan().source

    def __repr__(self) -> str:
        sig = ", ".join(f"{p.name}: {p.dtype}[{', '.join(map(str, p.shape))}]" if p.kind == "tensor"
                        else f"{p.name}: ptr" if p.kind == "pointer" else f"{p.name}: {p.dtype}" for p in self.params)
        return f"JITKernel({self.name}({sig}), out_idx={self.out_idx}, arch={self.artifact.arch})"

    # ------------------------------------------------------------ introspection
    @property
    def target(self) -> str:
        """The arch compiled for (before compiling: the target asked for)."""
        art = self.__dict__.get("artifact")
        return art.arch if art is not None else self.__dict__.get("_target")

    @target.setter
    def target(self, value) -> None:
        self.__dict__["_target"] = value

    @property
    def compile_flags(self) -> list[str]:
        """The nvcc flags of the kernel (before compiling: the extra flags asked for, or None)."""
        art = self.__dict__.get("artifact")
        if art is not None:
            return list(art.compile_flags)
        flags = self.__dict__.get("_compile_flags")
        return None if flags is None else list(flags)

    @compile_flags.setter
    def compile_flags(self, value) -> None:
        self.__dict__["_compile_flags"] = value

    def get_kernel_source(self, kernel_only: bool = False) -> str:
        """The CUDA source; ``kernel_only=True`` (upstream's flag): from the kernel's declaration
        on, without the headers and TVM's prelude."""
        source = self.artifact.source
        if kernel_only:
            at = source.find('extern "C" __global__')
            return source[at:] if at >= 0 else source
        return source

    @property
    def kernel_source(self) -> str:
        return self.artifact.source

    @property
    def host_source(self) -> str:
        return self.get_host_source()

    @property
    def adapter(self) -> "JITKernel":
        """Upstream's launch adapter: here the kernel launches itself
        (``profiler.with_default_adapter(kernel.adapter)``)."""
        return self

    def update_tuner_result(self, latency, config, ref_latency) -> "JITKernel":
        """Record the autotuner's result on the kernel (upstream's method)."""
        self.latency, self.config, self.ref_latency = latency, config, ref_latency
        return self

    def get_tuner_result(self) -> dict:
        """``{"latency", "config", "ref_latency"}`` as the autotuner recorded them (None before)."""
        return {"latency": self.latency, "config": self.config, "ref_latency": self.ref_latency}

    def get_host_source(self) -> str:
        """The host side of the launch: where upstream generates C, we launch from Python with a
        generated argument checker; this is the launch description followed by that checker."""
        text = self.launch_description()
        try:
            return text + "\n# generated argument checker (Python)\n" + self.arg_plan_source
        except ImportError:   # no torch: the checker is built on first use of torch
            return text

    def launch_description(self) -> str:
        """A short human-readable description of how the kernel is launched."""
        art = self.artifact
        lines = [f"kernel: {art.name}", f"arch: {art.arch}", "params:"]
        for i, p in enumerate(art.params):
            if p.kind == "tensor":
                layout = "contiguous" if p.strides is None else f"strides [{', '.join(map(str, p.strides))}]"
                role = " (output)" if i in art.out_idx else ""
                lines.append(f"  #{i} {p.name}: {p.dtype}[{', '.join(map(str, p.shape))}] "
                             f"{layout}, align {p.align}{role}")
            elif p.kind == "pointer":
                made = "" if p.dtype == "handle" else f" to {p.dtype}[{', '.join(map(str, p.shape))}]"
                lines.append(f"  #{i} {p.name}: raw pointer{made} (an address or a tensor), align {p.align}")
            else:
                lines.append(f"  #{i} {p.name}: scalar {p.dtype}")
        syms = ", ".join(f"{s} <- {_symbol_source(art, src)}" for s, src in art.symbols.items())
        lines += [f"symbols: {syms or '(none)'}",
                  f"kernel_args: {', '.join(art.kernel_args)}",
                  f"grid: ({', '.join(map(str, art.grid))})",
                  f"block: ({', '.join(map(str, art.block))})",
                  *_cluster_line(art.source),
                  f"dynamic_smem: {art.dynamic_smem} bytes",
                  *(["launch: cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION "
                     "(T.pdl_sync)"] if uses_pdl(art) else []),
                  *_l2_lines(art),
                  f"index_bits: {art.index_bits}",
                  f"compile_flags: {' '.join(art.compile_flags) or '(none)'}"]
        return "\n".join(lines) + "\n"

    def export_sources(self, kernel_path=None, host_path=None) -> None:
        """Write the CUDA source to ``kernel_path`` and the launch description (the host side) to
        ``host_path``, each where given."""
        if kernel_path is not None:
            Path(kernel_path).write_text(self.artifact.source)
        if host_path is not None:
            Path(host_path).write_text(self.launch_description())

    def show_source(self, which: str = "kernel") -> None:
        """Print the CUDA source (``"kernel"``), the host side (``"host"``, ``get_host_source``) or
        both (``"both"``), as upstream's ``show_source``."""
        parts = {"kernel": [("", self.get_kernel_source)], "host": [("", self.get_host_source)],
                 "both": [("===== Kernel Source =====", self.get_kernel_source),
                          ("===== Host Source =====", self.get_host_source)]}
        if which not in parts:
            raise ValueError(f"show_source: which={which!r}, expected 'kernel', 'host' or 'both'")
        for title, source in parts[which]:
            if title:
                print(title)
            print(source())

    def print_source_code(self, which: str = "kernel", file=None) -> None:
        """Upstream's older name: ``show_source(which)``, or with ``file`` the kernel source
        written there (``export_sources(kernel_path=file)``)."""
        if file is not None:
            self.export_sources(kernel_path=file)
        else:
            self.show_source(which)

    def get_ptx(self) -> str:
        if self._ptx is None:
            art = self.artifact
            self._ptx = nvcc.compile_ptx(art.source, art.arch, art.compile_flags, self.include_dirs)
        return self._ptx

    def show_ptx(self) -> None:
        print(self.get_ptx())

    def export_ptx(self, path) -> None:
        _write_text(path, self.get_ptx())

    def get_sass(self) -> str:
        if self._sass is None:
            self._sass = nvcc.disassemble_sass(self.ensure_cubin())
        return self._sass

    def show_sass(self) -> None:
        print(self.get_sass())

    def export_sass(self, path) -> None:
        """Write the disassembled SASS (``get_sass``) to ``path``, creating its folder."""
        _write_text(path, self.get_sass())

    def export_library(self, kernel_file) -> None:
        """Upstream writes a TVM runtime module (``.so``) here. Kernels of this implementation
        are a cubin launched from Python, with no runtime module to write, so this says so and
        names what exists instead."""
        raise NotImplementedError(
            f"export_library({str(kernel_file)!r}): this TileLang builds a cubin launched through "
            "the CUDA driver, not a TVM runtime module, so there is no shared library to export. "
            "Use kernel.export_sources(kernel_path=...) for the CUDA source, kernel.export_ptx / "
            "export_sass for the PTX / SASS, or the disk cache (TILELANG_CACHE_DIR), which reloads "
            "compiled kernels in a later process.")

    def ptxas_info(self) -> nvcc.PtxasInfo:
        """Registers, spills and shared memory of this kernel's entry, from ``ptxas -v``."""
        art = self.artifact
        infos = nvcc.ptxas_info(art.source, art.arch, art.compile_flags, self.include_dirs)
        if art.name not in infos:
            raise RuntimeError(f"ptxas reported no entry named {art.name!r} (found {sorted(infos)}); "
                               "is the kernel declared extern \"C\"?")
        return infos[art.name]

    @property
    def resource_usage(self) -> dict:
        """Upstream's per-entry resource record (``{name: record}``; it fills it for HIP only):
        here the entry's ``ptxas_info()`` (runs ptxas once, on first use)."""
        usage = self.__dict__.get("_resource_usage")
        if usage is None:
            usage = self.__dict__["_resource_usage"] = {self.artifact.name: self.ptxas_info()}
        return usage

    @property
    def n_regs(self) -> int:
        """Registers per thread of the kernel (ptxas)."""
        return self.resource_usage[self.artifact.name].registers

    @property
    def n_spills(self) -> int:
        """Bytes spilled per thread (stores; ptxas)."""
        return self.resource_usage[self.artifact.name].spill_stores

    @property
    def n_max_threads(self) -> int:
        """Threads per block the kernel is launched with."""
        return math.prod(self.artifact.block)

    def get_profiler(self, tensor_supply=None, tensor_supply_type=None):
        from tilelang.profiler import Profiler

        return Profiler(self, tensor_supply=tensor_supply, tensor_supply_type=tensor_supply_type)

    def run_once(self, symbols=None):
        """One call on generated inputs (``get_profiler().run_once``)."""
        return self.get_profiler().run_once(symbols)


def uses_pdl(art: KernelArtifact) -> bool:
    """A kernel that waits on ``T.pdl_sync`` is launched with programmatic stream serialization."""
    return "cudaGridDependencySynchronize" in (art.source or "")


def _l2_window(art: KernelArtifact, nargs: int) -> tuple | None:
    """(index of the tensor's address among the launch values, its bytes or None, hit ratio) of
    ``T.annotate_l2_hit_ratio``, or None. A stream holds one window, so the last annotated tensor
    wins (as upstream, which sets them in turn); the argument plan passes its address after the
    ``nargs`` kernel arguments (``ArgPlan.l2_param``)."""
    from tilelang.artifact import KNOWN_DTYPES

    if not art.l2_persist:
        return None
    entry = art.l2_persist[-1]
    p = art.params[entry["param"]]
    nbytes = KNOWN_DTYPES.get(p.dtype, (0, ""))[0] if p.strides is None else 0
    for d in p.shape:
        nbytes = nbytes * d if isinstance(d, int) else 0
    return nargs, nbytes or None, float(entry["hit_ratio"])


def _l2_lines(art: KernelArtifact) -> list:
    """The launch description of ``T.annotate_l2_hit_ratio`` (upstream's host-call names as labels)."""
    if not art.l2_persist:
        return []
    lines = ["l2_persist: around each launch, on the launch stream (one window per stream: the last annotated "
             "tensor's)"]
    for entry in art.l2_persist[-1:]:
        lines.append(f"  __tvm_cuda_stream_set_access_policy_window_packed({art.params[entry['param']].name}, "
                     f"bytes of the tensor, hitRatio={entry['hit_ratio']}, hitProp=persisting, missProp=streaming; "
                     "persisting L2 limit raised to the window)")
    lines.append("  <launch>")
    lines.append("  __tvm_cuda_stream_reset_access_policy_window_packed(window cleared, persisting lines reset, "
                 "previous limit restored)")
    return lines


def _symbol_source(art: KernelArtifact, src) -> str:
    pi, di = src
    name = art.params[pi].name
    return name if di == -1 else f"{name}.shape[{di}]"


def _cluster_line(source: str) -> list:
    """``clusterDim = {x, y, z}`` for a kernel compiled with ``__cluster_dims__`` (T.ClusterKernel)."""
    import re

    m = re.search(r"__cluster_dims__\((\d+), (\d+), (\d+)\)", source or "")
    return [f"clusterDim = {{{m.group(1)}, {m.group(2)}, {m.group(3)}}}"] if m else []


def _write_text(path, text: str) -> None:
    """Write ``text`` to ``path``, creating the folder it names first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
