"""FP8 dtype selection as upstream's ``tilelang.language.fp8`` has it.

``determine_fp8_type("e4m3" | "e5m2")`` names the FP8 dtype kernels should use on this platform:
on CUDA (the only backend we compile for) ``float8_e4m3fn`` / ``float8_e5m2``; where torch is a
ROCm build, the FNUZ variants AMD GPUs use (gfx950 has the OCP ones), so that code written for
both keeps choosing as upstream does. ``determine_torch_fp8_type`` gives the torch dtype of that
name.
"""

from __future__ import annotations

_FORMATS = ("e4m3", "e5m2")


def determine_fp8_type(fp8_format: str = "e4m3"):
    """The ``T.float8_*`` dtype for ``fp8_format`` on this platform (ValueError for another format)."""
    import torch

    from tilelang import language as T

    if fp8_format not in _FORMATS:
        raise ValueError(f"Unsupported FP8 format: {fp8_format!r} (expected 'e4m3' or 'e5m2')")
    e4m3 = fp8_format == "e4m3"
    if getattr(torch.version, "hip", None) is None:
        return T.float8_e4m3fn if e4m3 else T.float8_e5m2
    arch = ""
    if torch.cuda.is_available():
        arch = getattr(torch.cuda.get_device_properties(0), "gcnArchName", "")
    if arch.startswith("gfx950"):   # OCP formats on MI350
        return T.float8_e4m3fn if e4m3 else T.float8_e5m2
    return T.float8_e4m3fnuz if e4m3 else T.float8_e5m2fnuz


def determine_torch_fp8_type(fp8_format: str = "e4m3"):
    """The torch dtype named by ``determine_fp8_type(fp8_format)``."""
    import torch

    name = str(determine_fp8_type(fp8_format))
    dtype = getattr(torch, name, None)
    if dtype is None:
        raise RuntimeError(f"this torch build has no dtype {name}")
    return dtype
