"""CUDA emission: TVM's CUDA code generator plus our device library (``src/``)."""

from .cuda import CudaKernelSource, emit_cuda

__all__ = ["CudaKernelSource", "emit_cuda"]
