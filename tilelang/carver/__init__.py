"""``tilelang.carver``: descriptions of the GPU a kernel runs on (``tilelang.carver.arch``).

Contract: ``CUDA``, ``CDNA`` and ``CPU`` describe a device (SM count, shared memory, registers,
L2, peak throughput; see ``arch``); ``arch.driver`` queries the live CUDA device. Upstream's
configuration recommender (``carver.roller``, the templates) is not provided here.
"""

from tilelang.carver.arch import CDNA, CPU, CUDA, TileDevice, auto_infer_current_arch, get_arch

__all__ = ["CDNA", "CPU", "CUDA", "TileDevice", "auto_infer_current_arch", "get_arch"]
