"""The device helpers upstream code imports from ``tilelang.utils.device`` (TileOPs' autotune
input suppliers: ``get_current_device``). This TileLang runs on NVIDIA GPUs through torch's CUDA
device, so ``IS_CUDA`` is whether torch sees one; ``IS_NPU`` is always False and ``IS_MPS`` says
only what torch's Apple backend reports (neither runs our kernels)."""

from __future__ import annotations

import os

import torch

IS_CUDA: bool = torch.cuda.is_available()
IS_NPU: bool = False
IS_MPS: bool = bool(getattr(getattr(torch.backends, "mps", None), "is_available", lambda: False)())

# the event type timing code records on the current device (None without one)
Event = torch.cuda.Event if IS_CUDA else (torch.mps.event.Event if IS_MPS else None)


def get_current_device():
    """The current CUDA device index (``"mps:0"`` on Apple's backend, None without a device)."""
    if IS_CUDA:
        return torch.cuda.current_device()
    return "mps:0" if IS_MPS else None


def device_synchronize(device: int | str | torch.device | None = None) -> None:
    """Wait for the work queued on ``device`` (the current device when None)."""
    if device is None:
        kind = "cuda" if IS_CUDA else "mps" if IS_MPS else None
    else:
        kind = "cuda" if isinstance(device, int) else torch.device(device).type
    if kind == "cuda":
        torch.cuda.synchronize(device)
    elif kind == "mps":
        torch.mps.synchronize()
    elif device is None:
        raise RuntimeError("device_synchronize: no CUDA (or MPS) device is available")
    else:
        raise ValueError(f"device_synchronize: {device!r} is not a CUDA or MPS device")


def get_available_cpu_count() -> int:
    """CPU cores this process may run on (its affinity set where the OS has one), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)
