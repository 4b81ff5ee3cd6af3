"""``tilelang.carver.arch``: device descriptions (``CUDA``, ``CDNA``, ``CPU``), the arch
predicates, ``get_arch(target)`` and ``driver`` (queries of the live CUDA device).

Contract: ``get_arch`` maps a target spelling to its description ("cuda", "auto", "sm_90a" or a
cuda Target -> ``CUDA``; "hip" / "gfx942" -> ``CDNA``; "llvm" -> ``CPU``) and raises ``ValueError``
for anything else. ``auto_infer_current_arch`` describes the GPU torch sees (``CPU`` without one).
"""

from __future__ import annotations

from tilelang.carver.arch import driver
from tilelang.carver.arch.arch_base import TileDevice
from tilelang.carver.arch.cdna import CDNA, is_cdna_arch
from tilelang.carver.arch.cpu import CPU, is_cpu_arch
from tilelang.carver.arch.cuda import (
    CUDA,
    check_sm_version,
    has_mma_support,
    is_ada_arch,
    is_ampere_arch,
    is_cuda_arch,
    is_hopper_arch,
    is_tensorcore_supported_precision,
    is_volta_arch,
)


def get_arch(target="cuda") -> TileDevice:
    """The description of the device ``target`` names."""
    kind = getattr(getattr(target, "kind", None), "name", None)
    if kind is None:
        text = str(target).strip()
        head = text.split()[0] if text else ""
        if head in ("cuda", "auto") or head.startswith("sm_") or isinstance(target, dict):
            return CUDA(target)
        kind = "hip" if head in ("hip", "rocm") or head.startswith("gfx") else head
    if kind == "cuda":
        return CUDA(target)
    if kind in ("hip", "rocm"):
        return CDNA(target)
    if kind in ("llvm", "c", "cpu"):
        return CPU(target)
    raise ValueError(f"unsupported target {target!r}: expected cuda (sm_XX), hip (gfx942) or llvm")


def auto_infer_current_arch() -> TileDevice:
    """The description of the GPU torch sees: ``CDNA`` on a ROCm build, ``CUDA`` with a CUDA
    device, else ``CPU``."""
    try:
        import torch
    except ImportError:
        return CPU()
    if getattr(torch.version, "hip", None) is not None:
        return CDNA("hip")
    if torch.cuda.is_available():
        return CUDA("cuda")
    return CPU()


__all__ = [
    "CDNA", "CPU", "CUDA", "TileDevice", "auto_infer_current_arch", "check_sm_version", "driver",
    "get_arch", "has_mma_support", "is_ada_arch", "is_ampere_arch", "is_cdna_arch", "is_cpu_arch",
    "is_cuda_arch", "is_hopper_arch", "is_tensorcore_supported_precision", "is_volta_arch",
]
