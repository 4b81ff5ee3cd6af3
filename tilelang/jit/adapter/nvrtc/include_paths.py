"""Upstream's import path for the CUDA header discovery our NVRTC compile uses
(``tilelang.jit.nvcc.cuda_include_dirs``)."""

from tilelang.jit.nvcc import cuda_include_dirs as discover_cuda_include_paths

__all__ = ["discover_cuda_include_paths"]
