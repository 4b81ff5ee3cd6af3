"""NVRTC availability (upstream's ``tilelang.jit.adapter.nvrtc``): ``is_nvrtc_available`` is True
when ``cuda.bindings.nvrtc`` imports; ``TILELANG_USE_NVRTC=1`` then compiles with it."""

from __future__ import annotations

import importlib.util


def _available() -> bool:
    try:
        return importlib.util.find_spec("cuda.bindings.nvrtc") is not None
    except (ImportError, ValueError):
        return False


is_nvrtc_available = _available()

__all__ = ["is_nvrtc_available"]
