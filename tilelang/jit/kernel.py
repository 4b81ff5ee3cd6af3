"""JITKernel: a compiled TileLang kernel callable on torch tensors.

Contract:
- ``JITKernel(artifact, ir=None, prim_func=None, include_dirs=())`` checks the
  artifact and prepares the argument plan; it needs no GPU, no nvcc and no
  tvm, so kernels can be built and introspected anywhere.  torch is imported
  only to build the argument plan; without torch the kernel can still be
  introspected and the first call raises ImportError.
- ``kernel(*args)``: pass every parameter, or (when ``out_idx`` is non-empty)
  only the inputs, and the outputs are allocated with torch.empty on the
  inputs' device.  Returns the output tensor (one), a tuple (several), or None
  when out_idx is empty.  Every argument is validated before launching (see
  ``adapter_args``); the launch goes to torch's current stream of the tensors'
  device.  Without a GPU the call raises RuntimeError("no CUDA device: ...").
- The cubin is compiled with nvcc on first launch when the artifact has none.
- Introspection: ``get_kernel_source`` (also ``kernel_source``),
  ``get_host_source`` (our host side is Python: the launch description and the
  generated argument checker), ``export_sources``, ``get_ptx``/``show_ptx``/
  ``export_ptx``, ``get_sass``/``show_sass``, ``ptxas_info``,
  ``launch_description``, ``get_profiler``, ``run_once``; attributes
  ``artifact``, ``params``, ``out_idx``, ``name``, ``ir``, ``prim_func``,
  ``target`` (the arch), ``compile_flags``.
"""

from __future__ import annotations

import threading
from pathlib import Path

from tilelang.artifact import KernelArtifact
from tilelang.jit import nvcc


class JITKernel:
    """A launchable kernel built from a KernelArtifact."""

    def __init__(self, artifact: KernelArtifact, ir=None, prim_func=None, include_dirs=()):
        self.artifact = artifact
        self.ir = ir
        self.prim_func = prim_func
        self.include_dirs = list(include_dirs)
        self._launcher = None
        self._lock = threading.Lock()
        self._ptx: str | None = None
        self._sass: str | None = None
        artifact.check()
        self._plan = None
        self._entry = self._build_and_call
        try:
            self._build_plan()
        except ImportError:
            pass  # no torch here: introspection still works; calling will say why it cannot

    # ------------------------------------------------------------ calling
    def __call__(self, *args):
        return self._entry(*args)

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

    def _first_launch(self, device, gx, gy, gz, stream, values) -> None:
        """Build the launcher once, then route every later call straight to it."""
        launcher = self._get_launcher()
        self._plan.set_launch(launcher)
        launcher(device, gx, gy, gz, stream, values)

    def _get_launcher(self):
        from tilelang.jit.driver import KernelLauncher

        with self._lock:
            if self._launcher is None:
                art = self.artifact
                self._launcher = KernelLauncher(self.ensure_cubin(), art.name, self._plan.arg_kinds,
                                                art.block, art.dynamic_smem, art.arch)
            return self._launcher

    def ensure_cubin(self) -> bytes:
        """The artifact's cubin, compiling it with nvcc first if it has none."""
        art = self.artifact
        if art.cubin is None:
            art.cubin = nvcc.compile_cubin(art.source, art.arch, art.compile_flags, self.include_dirs)
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
                        else f"{p.name}: {p.dtype}" for p in self.params)
        return f"JITKernel({self.name}({sig}), out_idx={self.out_idx}, arch={self.artifact.arch})"

    # ------------------------------------------------------------ introspection
    @property
    def target(self) -> str:
        return self.artifact.arch

    @property
    def compile_flags(self) -> list[str]:
        return list(self.artifact.compile_flags)

    def get_kernel_source(self) -> str:
        return self.artifact.source

    @property
    def kernel_source(self) -> str:
        return self.artifact.source

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
            else:
                lines.append(f"  #{i} {p.name}: scalar {p.dtype}")
        syms = ", ".join(f"{s} <- {_symbol_source(art, src)}" for s, src in art.symbols.items())
        lines += [f"symbols: {syms or '(none)'}",
                  f"kernel_args: {', '.join(art.kernel_args)}",
                  f"grid: ({', '.join(map(str, art.grid))})",
                  f"block: ({', '.join(map(str, art.block))})",
                  f"dynamic_smem: {art.dynamic_smem} bytes",
                  f"index_bits: {art.index_bits}",
                  f"compile_flags: {' '.join(art.compile_flags) or '(none)'}"]
        return "\n".join(lines) + "\n"

    def export_sources(self, kernel_path, host_path=None) -> None:
        """Write the CUDA source to ``kernel_path`` and, optionally, the launch description."""
        Path(kernel_path).write_text(self.artifact.source)
        if host_path is not None:
            Path(host_path).write_text(self.launch_description())

    def get_ptx(self) -> str:
        if self._ptx is None:
            art = self.artifact
            self._ptx = nvcc.compile_ptx(art.source, art.arch, art.compile_flags, self.include_dirs)
        return self._ptx

    def show_ptx(self) -> None:
        print(self.get_ptx())

    def export_ptx(self, path) -> None:
        Path(path).write_text(self.get_ptx())

    def get_sass(self) -> str:
        if self._sass is None:
            self._sass = nvcc.disassemble_sass(self.ensure_cubin())
        return self._sass

    def show_sass(self) -> None:
        print(self.get_sass())

    def ptxas_info(self) -> nvcc.PtxasInfo:
        """Registers, spills and shared memory of this kernel's entry, from ``ptxas -v``."""
        art = self.artifact
        infos = nvcc.ptxas_info(art.source, art.arch, art.compile_flags, self.include_dirs)
        if art.name not in infos:
            raise RuntimeError(f"ptxas reported no entry named {art.name!r} (found {sorted(infos)}); "
                               "is the kernel declared extern \"C\"?")
        return infos[art.name]

    def get_profiler(self, tensor_supply=None, tensor_supply_type=None):
        from tilelang.profiler import Profiler

        return Profiler(self, tensor_supply=tensor_supply, tensor_supply_type=tensor_supply_type)

    def run_once(self, symbols=None):
        """One call on generated inputs (``get_profiler().run_once``)."""
        return self.get_profiler().run_once(symbols)


def _symbol_source(art: KernelArtifact, src) -> str:
    pi, di = src
    name = art.params[pi].name
    return name if di == -1 else f"{name}.shape[{di}]"
