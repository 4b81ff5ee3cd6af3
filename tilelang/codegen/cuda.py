"""Turn a lowered PrimFunc into CUDA source with TVM's codegen and read back the entry signature.

TVM's ``tirx`` pipeline splits host and device code; we keep only the device module's source,
prepend ``#include "tl.h"`` (our device library in ``src/``) and parse the ``extern "C"
__global__`` declaration to learn the kernel name and the order of its arguments. The host side
is ours (``tilelang.jit``), so the LLVM host module TVM also builds is discarded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tvm

_SIG = re.compile(r'extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(([^)]*)\)\s*\{')


@dataclass
class CudaKernelSource:
    name: str
    source: str
    args: list          # [(c_type, name)] in kernel parameter order


_STUB_PTX = b".version 8.0\n.target sm_80\n.address_size 64\n"


def _skip_tvm_device_compile() -> None:
    """On a machine with CUDA, TVM compiles the device module while building it (NVRTC, without
    our headers). We only want the source, so its compile callback returns an empty module."""
    import tvm.support.nvcc  # noqa: F401 - registers TVM's callback first, so ours overrides it
    import tvm_ffi

    tvm_ffi.register_global_func("tvm_callback_cuda_compile", lambda *args: _STUB_PTX, override=True)


def emit_cuda(func, arch: str, name: str = "main", tensormaps=(), cluster_dims=None) -> CudaKernelSource:
    """CUDA source of ``func``; ``tensormaps`` names extra ``const __grid_constant__ CUtensorMap``
    parameters appended to the kernel (TVM has no type for them), which the device code reaches
    as ``TL_TMAP(j)`` == ``&tl_tmap_j``."""
    _skip_tvm_device_compile()
    target = tvm.target.Target({"kind": "cuda", "arch": arch})
    func = func.with_attr("global_symbol", name)
    mod = tvm.IRModule({name: func})
    with tvm.transform.PassContext(config={"tirx.disable_assert": True, "tirx.disable_cse_tir": True}):
        executable = tvm.compile(mod, target=target, tir_pipeline="tirx")
    source = executable.mod.imports[0].inspect_source()
    match = _SIG.search(source)
    if match is None:
        raise RuntimeError("could not find the kernel entry in TVM's CUDA output")
    args = []
    for part in match.group(2).split(","):
        part = part.strip()
        if not part:
            continue
        tokens = part.replace("*", " * ").split()
        args.append((" ".join(tokens[:-1]), tokens[-1]))
    if tensormaps:
        extra = ", ".join(f"const __grid_constant__ CUtensorMap {t}" for t in tensormaps)
        decl = re.compile(r'(__global__ void (?:__launch_bounds__\(\d+\) )?' + re.escape(match.group(1)) +
                          r'\(([^)]*))\)')
        # (a kernel whose only pointer is written through TMA stores has no other parameter)
        source = decl.sub(lambda m: m.group(1) + (", " if m.group(2).strip() else "") + extra + ")", source)
        args += [("CUtensorMap", t) for t in tensormaps]
        source = "#define TL_TMAP(j) (&tl_tmap_##j)\n" + source
    if cluster_dims:   # thread block clusters, fixed at compile time (a plain launch honours them)
        dims = ", ".join(str(int(d)) for d in cluster_dims)
        source = source.replace(f'__global__ void ', f'__global__ void __cluster_dims__({dims}) ')
    source = '#include "tl.h"\n' + source
    return CudaKernelSource(match.group(1), source, args)

