"""``T.CUDASourceCodeKernel``: launch a ``__global__`` function written in CUDA by hand.

``T.CUDASourceCodeKernel(gx, gy, threads=128, source_code_or_path=..., entry_name=...)`` takes
the place of a ``with T.Kernel`` block: the grid and block are given as for ``T.Kernel``, the body
is the CUDA source (inline text, or a path to a ``.cu`` file that exists), compiled with
``tl.h`` included. The entry's parameters are passed by position: the prim_func's tensors (data
pointers) in order, then its scalar parameters and the symbols of its shapes, in order of first
appearance. The source is carried as an attribute (``SOURCE_ATTR``) around the launch; the engine
uses it as the kernel source instead of generating one.
"""

from __future__ import annotations

import os

from tvm import tirx
from tvm.tirx.script.builder import ir as builder

from .kernel import Kernel

SOURCE_ATTR = "tl.cuda_source_kernel"   # AttrStmt(node=StringImm(entry), value=StringImm(source)); see transform.kernel


def _load(source_code_or_path) -> str:
    if isinstance(source_code_or_path, os.PathLike):
        with open(source_code_or_path, encoding="utf-8") as f:
            return f.read()
    if not isinstance(source_code_or_path, str):
        raise TypeError("T.CUDASourceCodeKernel: source_code_or_path must be CUDA source text or a path, got "
                        f"{type(source_code_or_path).__name__}")
    if "\n" not in source_code_or_path and os.path.isfile(source_code_or_path):
        with open(source_code_or_path, encoding="utf-8") as f:
            return f.read()
    return source_code_or_path


def CUDASourceCodeKernel(*blocks, threads=None, source_code_or_path, entry_name="main_kernel",  # noqa: N802
                         cluster_dims=None, prelude=None):
    """Launch ``entry_name`` of the given CUDA source over a grid of ``blocks`` x ``threads``."""
    if not isinstance(entry_name, str) or not entry_name.strip():
        raise ValueError("T.CUDASourceCodeKernel: entry_name must be a non-empty string")
    source = _load(source_code_or_path)
    if prelude is not None:
        source = prelude + "\n" + source
    kernel = Kernel(*blocks, threads=128 if threads is None else threads, cluster_dims=cluster_dims)
    kernel.__enter__()
    try:
        frame = builder.attr(tirx.StringImm(entry_name), SOURCE_ATTR, tirx.StringImm(source))
        frame.__enter__()
        builder.evaluate(tirx.call_extern("int32", entry_name))
        frame.__exit__(None, None, None)
    finally:
        kernel.__exit__(None, None, None)


__all__ = ["CUDASourceCodeKernel", "SOURCE_ATTR"]
