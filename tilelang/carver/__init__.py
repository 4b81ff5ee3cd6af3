"""``tilelang.carver``: descriptions of the GPU a kernel runs on (``tilelang.carver.arch``).

Contract: ``CUDA``, ``CDNA`` and ``CPU`` describe a device (SM count, shared memory, registers,
L2, peak throughput; see ``arch``); ``arch.driver`` queries the live CUDA device.
``carver.template`` recommends tile configurations from those facts (``MatmulTemplate``), as
``carver.roller.Hint`` records; upstream's general roller over arbitrary PrimFuncs is not provided.
"""

from tilelang.carver.arch import CDNA, CPU, CUDA, TileDevice, auto_infer_current_arch, get_arch

__all__ = ["CDNA", "CPU", "CUDA", "TileDevice", "auto_infer_current_arch", "get_arch"]
