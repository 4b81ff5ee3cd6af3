"""``tilelang.cache``: upstream's cache entry points over our kernel disk cache.

    tilelang.cache.clear_cache()        # delete every stored kernel (and tuning record)
    tilelang.cache.cached(func, out_idx=[-1], target="auto")   # tilelang.compile, cache-backed

Contract: the store itself is ``tilelang.jit.cache`` (one directory per key under
``TILELANG_CACHE_DIR``, written atomically); this package only gives it upstream's names.
``cached`` is ``tilelang.compile`` (which always consults the cache when it is enabled);
upstream's per-backend ``KernelCache`` classes have no counterpart (one backend here).
"""

from __future__ import annotations

from pathlib import Path

from tilelang.jit import cache as _store

__all__ = ["cache_dir", "cached", "clear_cache", "disable_cache", "enable_cache", "is_cache_enabled"]


def cached(func=None, out_idx=None, *args, target="auto", target_host=None, execution_backend=None, verbose=None,
           pass_configs=None, compile_flags=None):
    """Compile ``func`` through the kernel cache (``tilelang.compile``)."""
    from tilelang.jit import compile as _compile

    return _compile(func, out_idx, target=target, pass_configs=pass_configs, compile_flags=compile_flags)


def clear_cache() -> None:
    """Remove every cached kernel and autotuning record under ``TILELANG_CACHE_DIR``."""
    _store.clear()


def cache_dir() -> Path:
    return _store.cache_dir()


def enable_cache() -> None:
    _store.set_enabled(True)


def disable_cache() -> None:
    _store.set_enabled(False)


def is_cache_enabled() -> bool:
    return _store.enabled()


class KernelCache:
    """Upstream's per-execution-backend cache object, as far as upstream code touches it.

    Every backend name maps to the one disk cache (``tilelang.jit.cache``). ``tilelang.compile``
    keeps no in-process table of kernels (each call consults the disk cache), so
    ``_memory_cache`` is always empty; clearing it is a no-op that upstream tests may call.
    """

    def __init__(self, backend: str):
        self.backend = backend
        self._memory_cache: dict = {}

    def __repr__(self) -> str:
        return f"KernelCache(backend={self.backend!r})"


_dispatch_map: dict[str, KernelCache] = {name: KernelCache(name)
                                         for name in ("tvm_ffi", "cython", "nvrtc", "ctypes", "cutedsl", "torch")}
