"""``TileDevice``: the fields every device description carries (upstream's names).

Sizes are in bytes. ``bandwidth`` and ``transaction_size`` are the relative weights upstream's
tile recommender uses, not measurements; the measured facts are ``memory_bandwidth_GBps`` (DRAM,
GB/s) and ``tensor_core_tflops`` (dense peak by operand dtype), None where unknown.
"""

from __future__ import annotations


class TileDevice:
    """A device description; subclasses fill the fields from a live device or from
    ``tilelang.targets``."""

    def __init__(self) -> None:
        self.platform: str = "unknown"
        self.name: str = "unknown"
        self.compute_capability: str = "unknown"
        self.reg_cap: int = 0                 # 32-bit registers a block may use
        self.smem_cap: int = 0                # shared memory a block gets without opting in
        self.max_smem_usage: int = 0          # the recommender's shared-memory budget per block
        self.compute_max_core: int = 0        # multiprocessors (SMs / CUs)
        self.warp_size: int = 0
        self.sm_partition: int = 0            # scheduler partitions per multiprocessor
        self.l2_cache_size_bytes: int = 0
        self.transaction_size: list[int] = [0, 0]
        self.bandwidth: list[int] = [0, 0]
        self.memory_bandwidth_GBps: float | None = None
        self.tensor_core_tflops: dict = {}

    def peak_tflops(self, dtype: str = "float16") -> float | None:
        """Dense tensor-core peak for operands of ``dtype`` (TFLOP/s), or None when unknown."""
        return self.tensor_core_tflops.get(str(dtype))

    def get_avaliable_tensorintrin_shapes(self) -> list:
        """[M, N] shapes of the tensor-core instructions the recommender may tile for."""
        return []
