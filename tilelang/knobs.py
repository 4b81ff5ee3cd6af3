"""Every environment variable TileLang reads, typed, in one place.

Contract:
- Each knob is a plain function that reads ``os.environ`` at call time, so a
  test (or a user) can change the environment between calls and be obeyed;
  nothing is cached here.
- Boolean knobs accept 1/0, true/false, yes/no, on/off (any case); unset or
  empty means the default.  Any other value raises ``ValueError`` naming the
  variable, so a typo is not silently read as "off".
- Path knobs return ``pathlib.Path`` (user-expanded) or ``None`` when unset.
- ``KNOBS`` lists every variable with its type and meaning, for docs and for
  ``describe()``.

Nothing in this module imports tvm, torch or anything else from tilelang.
"""

from __future__ import annotations

import os
from pathlib import Path

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}

# name -> (type, default, meaning); the functions below are the only readers.
KNOBS: dict[str, tuple[str, str, str]] = {
    "TILELANG_CACHE_DIR": ("path", "~/.cache/tilelang", "root of the on-disk kernel cache"),
    "TILELANG_DISABLE_CACHE": ("bool", "0", "1 disables loading and storing cached kernels"),
    "TILELANG_NVCC": ("path", "", "nvcc to use (else $CUDA_HOME/bin/nvcc, then PATH)"),
    "TILELANG_SRC_DIR": ("path", "<repo>/src", "directory holding tl.h, passed to nvcc as -I"),
    "TILELANG_USE_NVRTC": ("bool", "0", "1 compiles with NVRTC (cuda.bindings) instead of nvcc"),
    "TILELANG_DUMP_IR": ("bool|path", "0", "1 dumps IR after each pass; a path dumps it there"),
    "TILELANG_FRONTEND_DEBUG": ("bool", "0", "1 makes the frontend keep full Python tracebacks"),
    "TILELANG_KEEP_TEMPS": ("bool", "0", "1 keeps nvcc's temporary directories"),
    "TILELANG_AUTOTUNE_FORCE": ("bool", "0", "1 makes @tilelang.autotune re-tune instead of using stored results"),
    "CUDA_HOME": ("path", "", "CUDA toolkit root (CUDA_PATH is read too)"),
}


def _bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False if value else default
    raise ValueError(f"environment variable {name}={raw!r} is not a boolean; use 1/0, true/false, yes/no or on/off")


def _path(name: str) -> Path | None:
    raw = os.environ.get(name, "").strip()
    return Path(raw).expanduser() if raw else None


def package_dir() -> Path:
    """The directory of the ``tilelang`` package (this file's parent)."""
    return Path(__file__).resolve().parent


def cache_dir() -> Path:
    """TILELANG_CACHE_DIR, default ``~/.cache/tilelang``."""
    return _path("TILELANG_CACHE_DIR") or Path("~/.cache/tilelang").expanduser()


def disable_cache() -> bool:
    """TILELANG_DISABLE_CACHE: True turns the disk cache into a no-op."""
    return _bool("TILELANG_DISABLE_CACHE")


def nvcc_path() -> Path | None:
    """TILELANG_NVCC: an explicit nvcc executable, or None."""
    return _path("TILELANG_NVCC")


def cuda_home() -> Path | None:
    """CUDA_HOME, else CUDA_PATH, else None."""
    return _path("CUDA_HOME") or _path("CUDA_PATH")


def src_dir() -> Path:
    """TILELANG_SRC_DIR, default ``<repo>/src`` (the parent of the package dir)."""
    return _path("TILELANG_SRC_DIR") or package_dir().parent / "src"


def use_nvrtc() -> bool:
    """TILELANG_USE_NVRTC: prefer NVRTC (best effort) over the nvcc executable."""
    return _bool("TILELANG_USE_NVRTC")


def dump_ir() -> bool:
    """TILELANG_DUMP_IR set to a true value or to a directory."""
    raw = os.environ.get("TILELANG_DUMP_IR", "").strip()
    if raw.lower() in _FALSE:
        return False
    return True


def dump_ir_dir() -> Path | None:
    """The directory given in TILELANG_DUMP_IR, or None when it is a plain boolean."""
    raw = os.environ.get("TILELANG_DUMP_IR", "").strip()
    if raw.lower() in _TRUE or raw.lower() in _FALSE:
        return None
    return Path(raw).expanduser()


def frontend_debug() -> bool:
    """TILELANG_FRONTEND_DEBUG: keep full tracebacks in frontend errors."""
    return _bool("TILELANG_FRONTEND_DEBUG")


def keep_temps() -> bool:
    """TILELANG_KEEP_TEMPS: keep nvcc temporary directories for inspection."""
    return _bool("TILELANG_KEEP_TEMPS")


def autotune_force() -> bool:
    """TILELANG_AUTOTUNE_FORCE: ignore stored autotuning results."""
    return _bool("TILELANG_AUTOTUNE_FORCE")


def describe() -> str:
    """One line per knob: name, type, current value (or default) and meaning."""
    lines = []
    for name, (kind, default, meaning) in KNOBS.items():
        current = os.environ.get(name)
        shown = f"{current!r}" if current is not None else f"(default {default or 'unset'})"
        lines.append(f"{name} [{kind}] = {shown}: {meaning}")
    return "\n".join(lines)
