"""Toolchain helpers with upstream TileLang's names (``from tilelang.contrib import nvcc``).

Only ``nvcc`` is provided: this compiler targets CUDA GPUs alone, so upstream's hipcc, rocm,
msvc, nvrtc and CuTeDSL helpers have nothing to drive here.
"""

from tilelang.contrib import nvcc  # noqa: F401

__all__ = ["nvcc"]
