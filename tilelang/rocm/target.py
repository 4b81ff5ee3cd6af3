"""ROCm host and architecture facts (see ``tilelang.rocm``)."""

from __future__ import annotations

import os
import shutil


def check_hip_availability() -> bool:
    """True when a ROCm installation is found on this machine ($ROCM_PATH, /opt/rocm or hipcc)."""
    for root in (os.environ.get("ROCM_PATH"), os.environ.get("ROCM_HOME"), "/opt/rocm"):
        if root and os.path.isdir(os.path.join(root, "lib")) and os.path.isdir(os.path.join(root, "bin")):
            return True
    return shutil.which("hipcc") is not None


def rocm_warp_size_for_arch(arch: str | None) -> int | None:
    """Threads per wavefront of an AMD ``gfx`` architecture (64 on CDNA gfx9, 32 on RDNA), else None."""
    if not arch:
        return None
    arch = str(arch).split(":", 1)[0].strip()
    if arch.startswith("gfx9"):
        return 64
    if arch.startswith(("gfx10", "gfx11", "gfx12")):
        return 32
    return None


__all__ = ["check_hip_availability", "rocm_warp_size_for_arch"]
