"""``tilelang.tools.cuda``: developer tools for the CUDA backend.

``tilelang.tools.cuda.iket`` instruments kernels with IKET profiling events (see docs/iket.md).
"""

from tilelang.tools.cuda import iket

__all__ = ["iket"]
