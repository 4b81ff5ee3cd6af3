"""``tilelang.cuda.backend``: compiling CUDA source for a target (upstream's compile callback).

    binary = tilelang_callback_cuda_compile(source, target, pass_config)

Contract: ``tilelang_callback_cuda_compile(code, target, pass_config=None)`` compiles ``code``
with ``nvcc.compile_cuda`` (``tilelang.contrib.nvcc``) for ``target``'s ``arch``: without a code
list a cubin for ``-arch=sm_XX``; with one (``determine_target({..., "code": [...]})``)
``-gencode arch=compute_XX,code=...``, a fatbin when it names several SM codes. The pass configs
add the nvcc flags a kernel compile would use (fast math, ptxas options,
``tl.device_compile_flags``). Returns the binary's bytes.
"""

from __future__ import annotations

from tilelang.contrib import nvcc

__all__ = ["nvcc", "tilelang_callback_cuda_compile"]


def tilelang_callback_cuda_compile(code, target, pass_config=None) -> bytearray:
    """See the module docstring."""
    from tilelang.transform.pass_config import nvcc_flags

    attrs = getattr(target, "attrs", None) or {}
    arch = str(attrs["arch"]) if "arch" in attrs else f"sm_{nvcc.get_target_arch(nvcc.get_target_compute_version(target))}"
    if not arch.startswith("sm_"):
        raise ValueError(f"tilelang_callback_cuda_compile: target arch {arch!r} is not of the form sm_XX")
    codes = nvcc.get_target_code_list(nvcc.get_target_code(target))
    if codes:
        gencode = codes[0] if len(codes) == 1 else f"[{','.join(codes)}]"
        flags = ["-gencode", f"arch=compute_{arch[3:]},code={gencode}"]
    else:
        flags = [f"-arch={arch}"]
    target_format = "fatbin" if len(codes) > 1 else "cubin"
    options = nvcc_flags(pass_config or {})
    return nvcc.compile_cuda(code, target_format, flags, options=options, verbose=False)
