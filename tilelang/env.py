"""``tilelang.env``: upstream TileLang's environment object, over ``tilelang.knobs``.

    from tilelang.env import env
    env.TILELANG_CACHE_DIR                 # live read: forced value, else os.environ, else default
    env.TILELANG_CACHE_DIR = "/tmp/c"      # forces the value for this process (os.environ untouched)

Contract:
- Every attribute is an ``EnvVar`` descriptor on ``Environment``; reading it returns a string
  (or None), as upstream's do. Assigning forces the value through ``knobs.force``, so the
  compiler's own readers (``knobs.cache_dir()`` and friends) obey it too: the knobs stay the one
  home of every variable, this module only gives them upstream's names.
- ``EnvVar._forced_value`` is the forced value (read and written by upstream's tests).
- ``tilelang.env`` (the attribute of the package) is the ``env`` instance, as upstream's; the
  module stays importable as ``tilelang.env`` for ``from tilelang.env import env``.
- Variables upstream reads that mean nothing to our compiler (CUTLASS paths, ROCm, autodd...)
  are readable and forceable but change nothing; ``docs/pass_configs.md`` lists the knobs.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable, Mapping

from tilelang import knobs

__all__ = ["CUDA_HOME", "EnvVar", "Environment", "disable_cache", "enable_cache", "env",
           "is_cache_enabled", "parse_pass_profile_threshold_ms", "resolve_pass_profile_threshold_ms"]

_TRUE = ("1", "true", "yes", "on")


parse_pass_profile_threshold_ms = knobs.parse_threshold_ms


def resolve_pass_profile_threshold_ms(pass_configs: Mapping, key, env_threshold_ms: Callable[[], float]) -> float:
    """The pass config's threshold when ``key`` is present (even 0), else ``env_threshold_ms()``."""
    if key in pass_configs:
        return parse_pass_profile_threshold_ms(pass_configs[key], str(key))
    return env_threshold_ms()


class EnvVar:
    """A descriptor reading environment variable ``key`` live, with a per-process override."""

    def __init__(self, key: str, default=None):
        self.key = key
        self.default = default

    @property
    def _forced_value(self):
        return knobs.forced(self.key)

    @_forced_value.setter
    def _forced_value(self, value) -> None:
        knobs.force(self.key, value)

    def get(self):
        value = knobs.raw(self.key)
        if value is not None:
            return value
        return self.default() if callable(self.default) else self.default

    def __get__(self, instance, owner):
        return self.get()

    def __set__(self, instance, value) -> None:
        knobs.force(self.key, value)

    def __repr__(self) -> str:
        return f"EnvVar({self.key!r}, default={self.default!r})"


def _cuda_home() -> str:
    home = knobs.cuda_home()
    if home is None:
        from tilelang.jit import nvcc

        try:
            home = Path(nvcc.find_nvcc()).resolve().parent.parent
        except Exception:  # noqa: BLE001 - no toolkit: upstream reports ""
            return ""
    return str(home)


class Environment:
    """Upstream's names for the environment variables (see the module docstring)."""

    TILELANG_PACKAGE_PATH = knobs.package_dir()

    TILELANG_CACHE_DIR = EnvVar("TILELANG_CACHE_DIR", lambda: str(knobs.cache_dir()))
    TILELANG_TMP_DIR = EnvVar("TILELANG_TMP_DIR", lambda: str(knobs.tmp_dir()))
    TILELANG_DISABLE_CACHE = EnvVar("TILELANG_DISABLE_CACHE", "0")
    TILELANG_PRINT_ON_COMPILATION = EnvVar("TILELANG_PRINT_ON_COMPILATION", "1")
    TILELANG_COMPILE_TIMEOUT_SECONDS = EnvVar("TILELANG_COMPILE_TIMEOUT_SECONDS", "")
    TILELANG_PASS_PROFILE_THRESHOLD_MS = EnvVar("TILELANG_PASS_PROFILE_THRESHOLD_MS", "0")
    TILELANG_AUTO_TUNING_CPU_COUNTS = EnvVar("TILELANG_AUTO_TUNING_CPU_COUNTS", "-1")
    TILELANG_AUTOTUNE_FORCE = EnvVar("TILELANG_AUTOTUNE_FORCE", "0")
    TILELANG_DUMP_IR = EnvVar("TILELANG_DUMP_IR", "0")
    TILELANG_TEMPLATE_PATH = EnvVar("TILELANG_SRC_DIR", lambda: str(knobs.src_dir()))
    TILELANG_NVCC = EnvVar("TILELANG_NVCC", None)
    TILELANG_USE_NVRTC = EnvVar("TILELANG_USE_NVRTC", "0")
    TILELANG_KEEP_TEMPS = EnvVar("TILELANG_KEEP_TEMPS", "0")
    TILELANG_FRONTEND_DEBUG = EnvVar("TILELANG_FRONTEND_DEBUG", "0")
    # IR diff of every pipeline stage (tilelang.utils.pass_diff_hook): 0 | terminal | html | both
    TILELANG_PASS_DIFF = EnvVar("TILELANG_PASS_DIFF", "0")
    TILELANG_PASS_DIFF_OUTPUT = EnvVar("TILELANG_PASS_DIFF_OUTPUT", "tmp/pass_diff_output")
    # Read by upstream only; kept so that code setting them runs (see docs/pass_configs.md).
    TILELANG_KERNEL_CACHE_USE_LIB_STAMP = EnvVar("TILELANG_KERNEL_CACHE_USE_LIB_STAMP", "0")
    TILELANG_CLEANUP_TEMP_FILES = EnvVar("TILELANG_CLEANUP_TEMP_FILES", "1")
    TILELANG_JIT_DIAGNOSTICS = EnvVar("TILELANG_JIT_DIAGNOSTICS", "0")
    TILELANG_PASS_PROFILE = EnvVar("TILELANG_PASS_PROFILE", "0")   # 1: per-pass timing report (tools.pass_timing)
    # IR of every pass and the generated source, per compile (tilelang.tools.lower_trace)
    TL_LOWER_TRACE = EnvVar("TL_LOWER_TRACE", "0")   # 0 | 1 (html) | terminal | html | both
    TL_LOWER_TRACE_DIR = EnvVar("TL_LOWER_TRACE_DIR", str(Path(".") / "tmp" / "lower_trace_dir"))
    TILELANG_AUTO_TUNING_DISABLE_CACHE = EnvVar("TILELANG_AUTO_TUNING_DISABLE_CACHE", "0")
    TILELANG_DEFAULT_TARGET = EnvVar("TILELANG_DEFAULT_TARGET", "auto")
    TILELANG_DEFAULT_EXECUTION_BACKEND = EnvVar("TILELANG_EXECUTION_BACKEND", "auto")
    TILELANG_DEFAULT_VERBOSE = EnvVar("TILELANG_VERBOSE", "0")
    TILELANG_PASS_CONFIGS = EnvVar("TILELANG_PASS_CONFIGS", "")   # JSON pass configs for every kernel

    @property
    def CUDA_HOME(self) -> str:  # noqa: N802 - upstream's name
        return _cuda_home()

    # -------------------------------------------------------------- cache state
    def is_cache_enabled(self) -> bool:
        from tilelang.jit import cache

        return cache.enabled()

    def enable_cache(self) -> None:
        from tilelang.jit import cache

        cache.set_enabled(True)

    def disable_cache(self) -> None:
        from tilelang.jit import cache

        cache.set_enabled(False)

    def is_cache_globally_disabled(self) -> bool:
        return knobs.disable_cache()

    def is_autotune_cache_disabled(self) -> bool:
        return str(self.TILELANG_AUTO_TUNING_DISABLE_CACHE).strip().lower() in _TRUE

    # -------------------------------------------------------------- typed reads
    def is_print_on_compilation_enabled(self) -> bool:
        return knobs.print_on_compilation()

    def get_pass_profile_threshold_ms(self) -> float:
        try:
            return knobs.pass_profile_threshold_ms()
        except ValueError:
            raise ValueError("TILELANG_PASS_PROFILE_THRESHOLD_MS must be a finite non-negative number") from None

    def is_pass_profile_enabled(self) -> bool:
        return str(self.TILELANG_PASS_PROFILE or "").strip().lower() in _TRUE

    def get_lower_trace_mode(self) -> str | None:
        """TL_LOWER_TRACE as a mode: None when off (0/false/no/off/empty), "terminal" or "both"
        when named, else "html" (1/true/yes/on/html, and any other value)."""
        value = str(self.TL_LOWER_TRACE or "").strip().lower()
        if value in ("0", "false", "no", "off", ""):
            return None
        return value if value in ("terminal", "both") else "html"

    def get_lower_trace_dir(self) -> str:
        return str(self.TL_LOWER_TRACE_DIR or "").strip() or str(Path(".") / "tmp" / "lower_trace_dir")

    def get_compile_timeout_seconds(self) -> float | None:
        return knobs.compile_timeout_seconds()

    def get_pass_diff_mode(self) -> str | None:
        """TILELANG_PASS_DIFF as a mode: None when off (0/false/no/off/empty), "html" or "both"
        when named, else "terminal" (1/true/yes/on/terminal, and any other value)."""
        return knobs.pass_diff_mode()

    def get_default_target(self):
        return self.TILELANG_DEFAULT_TARGET or "auto"

    def get_default_execution_backend(self) -> str:
        return self.TILELANG_DEFAULT_EXECUTION_BACKEND

    def get_default_verbose(self) -> bool:
        return str(self.TILELANG_DEFAULT_VERBOSE).strip().lower() in _TRUE


env = Environment()

enable_cache = env.enable_cache
disable_cache = env.disable_cache
is_cache_enabled = env.is_cache_enabled


def __getattr__(name: str):
    if name == "CUDA_HOME":
        return _cuda_home()
    raise AttributeError(f"module 'tilelang.env' has no attribute {name!r}")
