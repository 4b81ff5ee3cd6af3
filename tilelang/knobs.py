"""Every environment variable TileLang reads, typed, in one place.

Contract:
- Each knob is a plain function that reads ``os.environ`` at call time, so a
  test (or a user) can change the environment between calls and be obeyed;
  nothing is cached here.  ``force(name, value)`` overrides a variable for this
  process without touching ``os.environ`` (``tilelang.env.env.X = value`` uses
  it); ``force(name, None)`` lifts the override.
- Boolean knobs accept 1/0, true/false, yes/no, on/off (any case); unset or
  empty means the default.  Any other value raises ``ValueError`` naming the
  variable, so a typo is not silently read as "off".
- Path knobs return ``pathlib.Path`` (user-expanded) or ``None`` when unset.
- ``KNOBS`` lists every variable with its type and meaning, for docs and for
  ``describe()``.

Nothing in this module imports tvm, torch or anything else from tilelang.
"""

from __future__ import annotations

import json
import math
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
    "TILELANG_ENABLE_IR_SPAN": ("bool", "1", "0 builds kernels without source spans on their statements and buffers "
                                "(diagnostics then point at the function)"),
    "TILELANG_FRONTEND_DEBUG": ("bool", "0", "1 makes the frontend keep full Python tracebacks"),
    "TILELANG_KEEP_TEMPS": ("bool", "0", "1 keeps nvcc's temporary directories"),
    "TILELANG_AUTOTUNE_FORCE": ("bool", "0", "1 makes @tilelang.autotune re-tune instead of using stored results"),
    "TILELANG_AUTO_TUNING_DISABLE_CACHE": ("bool", "0", "1 makes the autotuner reuse no result, stored or from "
                                           "this process (TILELANG_DISABLE_CACHE=1 does too)"),
    "TILELANG_TMP_DIR": ("path", "<cache dir>/tmp", "upstream's scratch directory, readable as tilelang.env; our "
                         "nvcc runs use the system temp dir and the cache writes inside its own shards"),
    "TILELANG_PRINT_ON_COMPILATION": ("bool", "1", "upstream's knob: 1 logs each kernel name as it compiles (INFO)"),
    "TILELANG_COMPILE_TIMEOUT_SECONDS": ("float", "", "nvcc subprocess timeout in seconds (empty or 0: none)"),
    "TILELANG_JIT_DIAGNOSTICS": ("bool", "0", "1 logs each JIT phase (lower, nvcc) at INFO on tilelang.jit.diagnostics"),
    "TILELANG_PASS_PROFILE": ("bool", "0", "1 logs a per-pass timing report of every compile "
                              "(tilelang.tools.pass_timing; pass config tl.pass_profile)"),
    "TILELANG_PASS_PROFILE_THRESHOLD_MS": ("float", "0", "pass timing report: hide passes faster than this (ms)"),
    "TILELANG_PASS_DIFF": ("str", "0", "IR diff of each compile stage: 0 (off), terminal, html or both "
                           "(tilelang.utils.pass_diff_hook)"),
    "TILELANG_PASS_DIFF_OUTPUT": ("path", "tmp/pass_diff_output", "directory of the TILELANG_PASS_DIFF HTML reports"),
    "TILELANG_AUTO_TUNING_CPU_COUNTS": ("int", "-1", "autotuner compile threads (-1 or 0: one per usable CPU)"),
    "TILELANG_AUTOTUNE_LOWER_PROCS": ("int", "0", "autotuner: forked processes lowering configs at once (0: one per "
                                      "compile thread and CPU; 1: every config lowered in the tuning process, "
                                      "one at a time)"),
    "TILELANG_PASS_CONFIGS": ("json", "", "a JSON object of pass configs applied to every kernel of the process "
                              "under the kernel's own (e.g. '{\"tl.enable_thread_widening\": true}'); part of "
                              "each kernel's cache key, like any pass config"),
    "CUDA_HOME": ("path", "", "CUDA toolkit root (CUDA_PATH is read too)"),
}

# name -> value forced for this process (``force``); consulted before os.environ.
_FORCED: dict[str, object] = {}


def force(name: str, value) -> None:
    """Override environment variable ``name`` for this process (``None`` removes the override)."""
    if value is None:
        _FORCED.pop(name, None)
    else:
        _FORCED[name] = value


def forced(name: str):
    """The value forced for ``name``, or None."""
    return _FORCED.get(name)


def raw(name: str) -> str | None:
    """The variable's text: the forced value if any, else ``os.environ``, else None."""
    value = _FORCED.get(name)
    if value is not None:
        return str(value)
    return os.environ.get(name)


def _bool(name: str, default: bool = False) -> bool:
    text = raw(name)
    if text is None:
        return default
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False if value else default
    raise ValueError(f"environment variable {name}={text!r} is not a boolean; use 1/0, true/false, yes/no or on/off")


def _path(name: str) -> Path | None:
    text = (raw(name) or "").strip()
    return Path(text).expanduser() if text else None


def _nonnegative(name: str, text: str | None) -> float | None:
    """A finite number >= 0 parsed from ``text`` (None when empty); ValueError naming ``name``."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite non-negative number, got {text!r}")
    return value


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
    text = (raw("TILELANG_DUMP_IR") or "").strip()
    if text.lower() in _FALSE:
        return False
    return True


def pass_diff_mode() -> str | None:
    """TILELANG_PASS_DIFF: None when off (0/false/no/off/unset), "html" or "both" when named,
    else "terminal" (1/true/yes/on/terminal and any other value)."""
    text = (raw("TILELANG_PASS_DIFF") or "").strip().lower()
    if text in _FALSE:
        return None
    return text if text in ("html", "both") else "terminal"


def pass_diff_output() -> str:
    """TILELANG_PASS_DIFF_OUTPUT, default ``tmp/pass_diff_output`` (relative to the working dir)."""
    return raw("TILELANG_PASS_DIFF_OUTPUT") or "tmp/pass_diff_output"


def dump_ir_dir() -> Path | None:
    """The directory given in TILELANG_DUMP_IR, or None when it is a plain boolean."""
    text = (raw("TILELANG_DUMP_IR") or "").strip()
    if text.lower() in _TRUE or text.lower() in _FALSE:
        return None
    return Path(text).expanduser()


def enable_ir_span() -> bool:
    """Stamp the user's source spans on built statements and buffers (``tilelang.ir``)."""
    return _bool("TILELANG_ENABLE_IR_SPAN", default=True)


def frontend_debug() -> bool:
    """TILELANG_FRONTEND_DEBUG: keep full tracebacks in frontend errors."""
    return _bool("TILELANG_FRONTEND_DEBUG")


def keep_temps() -> bool:
    """TILELANG_KEEP_TEMPS: keep nvcc temporary directories for inspection."""
    return _bool("TILELANG_KEEP_TEMPS")


def autotune_force() -> bool:
    """TILELANG_AUTOTUNE_FORCE: ignore stored autotuning results."""
    return _bool("TILELANG_AUTOTUNE_FORCE")


def autotune_cache_disabled() -> bool:
    """TILELANG_AUTO_TUNING_DISABLE_CACHE: reuse no autotuning result (stored or memoised)."""
    return _bool("TILELANG_AUTO_TUNING_DISABLE_CACHE")


def tmp_dir() -> Path:
    """TILELANG_TMP_DIR, default ``<cache dir>/tmp``."""
    return _path("TILELANG_TMP_DIR") or cache_dir() / "tmp"


def print_on_compilation() -> bool:
    """TILELANG_PRINT_ON_COMPILATION (default on): log each kernel name as it is compiled."""
    return _bool("TILELANG_PRINT_ON_COMPILATION", default=True)


def compile_timeout_seconds() -> float | None:
    """TILELANG_COMPILE_TIMEOUT_SECONDS: seconds nvcc may run, or None (unset, empty or 0)."""
    value = _nonnegative("TILELANG_COMPILE_TIMEOUT_SECONDS", raw("TILELANG_COMPILE_TIMEOUT_SECONDS"))
    return value or None


def pass_profile() -> bool:
    """TILELANG_PASS_PROFILE (default 0): time every pass of every compile."""
    return _bool("TILELANG_PASS_PROFILE")


def pass_profile_threshold_ms() -> float:
    """TILELANG_PASS_PROFILE_THRESHOLD_MS (default 0): a finite number >= 0."""
    return _nonnegative("TILELANG_PASS_PROFILE_THRESHOLD_MS", raw("TILELANG_PASS_PROFILE_THRESHOLD_MS")) or 0.0


def parse_threshold_ms(value, name: str = "pass profile threshold") -> float:
    """A finite, non-negative number of milliseconds (from a pass config or the environment)."""
    try:
        text = str(float(value)) if isinstance(value, (bool, int, float)) else str(value)
        return _nonnegative(name, text) or 0.0
    except ValueError:
        raise ValueError(f"{name} must be a finite non-negative number") from None


def autotune_cpu_count() -> int:
    """TILELANG_AUTO_TUNING_CPU_COUNTS: compile threads for the autotuner (-1 or unset: auto)."""
    text = (raw("TILELANG_AUTO_TUNING_CPU_COUNTS") or "").strip()
    try:
        return int(text) if text else -1
    except ValueError:
        raise ValueError(f"TILELANG_AUTO_TUNING_CPU_COUNTS must be an integer, got {text!r}") from None


def autotune_lower_procs() -> int:
    """TILELANG_AUTOTUNE_LOWER_PROCS: the most autotune configs lowered at once in forked processes
    (0 or unset: auto; 1: none forked)."""
    text = (raw("TILELANG_AUTOTUNE_LOWER_PROCS") or "").strip()
    try:
        value = int(text) if text else 0
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"TILELANG_AUTOTUNE_LOWER_PROCS must be a non-negative integer, got {text!r}")
    return value


def pass_configs() -> dict:
    """TILELANG_PASS_CONFIGS: a JSON object of pass config keys -> values ({} when unset or empty)."""
    text = (raw("TILELANG_PASS_CONFIGS") or "").strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ValueError(f"TILELANG_PASS_CONFIGS must be a JSON object, e.g. '{{\"tl.disable_tma_lower\": true}}' "
                         f"({e})") from None
    if not isinstance(value, dict):
        raise ValueError(f"TILELANG_PASS_CONFIGS must be a JSON object of pass configs, got {type(value).__name__}")
    return value


def describe() -> str:
    """One line per knob: name, type, current value (or default) and meaning."""
    lines = []
    for name, (kind, default, meaning) in KNOBS.items():
        current = raw(name)
        shown = f"{current!r}" if current is not None else f"(default {default or 'unset'})"
        lines.append(f"{name} [{kind}] = {shown}: {meaning}")
    return "\n".join(lines)
