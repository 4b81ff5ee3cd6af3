"""``CDNA``: an AMD Instinct GPU, described (not compiled for) from ``tilelang.targets.amd_spec``.

Contract: ``CDNA(target)`` takes "hip" / "rocm" (the MI300X, gfx942), a processor name such as
"gfx942", "hip -mcpu=gfx942" or a TVM hip Target; a processor we hold no description of is a
``ValueError``. No ROCm device is queried.
"""

from __future__ import annotations

from tilelang import targets
from tilelang.carver.arch.arch_base import TileDevice

DEFAULT_MCPU = "gfx942"


def is_cdna_arch(arch: TileDevice) -> bool:
    return isinstance(arch, CDNA)


def _mcpu_of(target) -> str:
    kind = getattr(getattr(target, "kind", None), "name", None)
    if kind is not None:
        if kind not in ("hip", "rocm"):
            raise ValueError(f"CDNA describes a hip target, not {kind!r}")
        mcpu = target.attrs.get("mcpu", None)
        return str(mcpu) if mcpu else DEFAULT_MCPU
    for token in str(target).replace("=", " ").split():
        if token.startswith("gfx"):
            return token
    if str(target).split()[0] in ("hip", "rocm", "auto"):
        return DEFAULT_MCPU
    raise ValueError(f"CDNA expects 'hip', 'gfx942' or 'hip -mcpu=gfx942', got {target!r}")


class CDNA(TileDevice):
    """An AMD CDNA GPU: upstream's fields plus ``mcpu``, ``memory_bandwidth_GBps`` and
    ``tensor_core_tflops`` (matrix-core peaks)."""

    def __init__(self, target="hip"):
        super().__init__()
        self.mcpu: str = _mcpu_of(target)
        spec = targets.amd_spec(self.mcpu)
        if spec is None:
            raise ValueError(f"no built-in description of the AMD GPU {self.mcpu}: "
                             f"described is {DEFAULT_MCPU} (MI300X)")
        self.target = f"hip -mcpu={self.mcpu}"
        self.platform = "CDNA"
        self.name = spec["name"]
        self.compute_capability = self.mcpu[3:5]
        self.smem_cap = spec["smem_per_sm"]
        self.compute_max_core = spec["sm_count"]
        self.warp_size = spec["warp_size"]
        self.l2_cache_size_bytes = spec["l2_bytes"]
        self.memory_bandwidth_GBps = spec["dram_bandwidth_gbps"]
        self.tensor_core_tflops = spec["peak_tflops"]
        # upstream's recommender budget and weights (relative, not measured)
        self.reg_cap = 32768
        self.max_smem_usage = 2 * self.smem_cap
        self.sm_partition = 4
        self.transaction_size = [32, 128]
        self.bandwidth = [1300, 14000]

    def __repr__(self) -> str:
        return f"CDNA({self.mcpu}: {self.name}, {self.compute_max_core} CUs)"


__all__ = ["CDNA", "is_cdna_arch"]
