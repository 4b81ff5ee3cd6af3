"""``@tilelang.jit``, ``tilelang.compile`` and ``tilelang.lower``.

``@tilelang.jit(out_idx=..., target=..., pass_configs=..., compile_flags=...)`` wraps a kernel
factory: calling it with the factory's arguments returns a ``JITKernel``. Kernels are cached in
memory per argument tuple and on disk (``tilelang.jit.cache``) by a key over the kernel's
TVMScript text, the target, the pass configs, the flags and the compiler's own version, so a
second process skips both lowering and nvcc.

``compile`` and jit factories may be called from several threads: tracing and lowering share
TVM state that is not thread-safe, so they run under one process-wide lock (``LOWER_LOCK``);
nvcc, a subprocess, runs outside it, so compiles in threads overlap.
"""

from __future__ import annotations

import functools
import inspect
import threading

from tilelang.diagnostics import hide_internal_frames
from tilelang.jit import cache, nvcc
from tilelang.jit.artifact import KernelArtifact
from tilelang.jit.kernel import JITKernel

LOWER_LOCK = threading.RLock()

__all__ = ["JITKernel", "compile", "jit", "lower"]


def _normalize_out_idx(out_idx):
    if out_idx is None:
        return []
    if isinstance(out_idx, int):
        return [out_idx]
    return [int(i) for i in out_idx]


@hide_internal_frames
def lower(func, target="auto", pass_configs=None, out_idx=None) -> KernelArtifact:
    """Lower a ``@T.prim_func`` to a KernelArtifact (CUDA source and launch description)."""
    from tilelang.engine import lower as _lower

    return _lower(func, target, pass_configs, _normalize_out_idx(out_idx))


def lower_for_compile(func, out_idx=None, target="auto", pass_configs=None, compile_flags=None):
    """The first half of ``compile``: (cache key, artifact), the artifact from the kernel cache
    when it holds one (then with its cubin), else freshly lowered (cubin not built yet). The
    autotuner uses it to lower under its lock and run nvcc outside it."""
    from tilelang.engine.lower import lower as _lower, normalize_target
    from tilelang.transform.pass_config import normalize

    arch = normalize_target(target)
    configs = normalize(pass_configs)
    flags = list(compile_flags or [])
    outs = _normalize_out_idx(out_idx)
    key = cache.cache_key("kernel", func.script(), arch, configs, flags, outs)
    artifact = cache.load(key) if cache.enabled() else None
    if artifact is None:
        artifact = _lower(func, arch, configs, outs)
        artifact.compile_flags = list(artifact.compile_flags) + flags
    return key, artifact


@hide_internal_frames
def compile(func, out_idx=None, target="auto", pass_configs=None, compile_flags=None,  # noqa: A001
            execution_backend=None, verbose=False) -> JITKernel:
    """Compile a ``@T.prim_func`` into a launchable ``JITKernel`` (using the disk cache)."""
    with LOWER_LOCK:
        key, artifact = lower_for_compile(func, out_idx, target, pass_configs, compile_flags)
    if artifact.cubin is None:
        try:
            artifact.cubin = nvcc.compile_cubin(artifact.source, artifact.arch, artifact.compile_flags)
        except nvcc.NVCCNotFoundError:
            artifact.cubin = None
        if artifact.cubin is not None and cache.enabled():
            cache.store(key, artifact)
    return JITKernel(artifact, prim_func=func)


class _JitFactory:
    """The object ``@tilelang.jit`` returns: call it like the factory to get a kernel."""

    def __init__(self, factory, out_idx, target, pass_configs, compile_flags):
        functools.update_wrapper(self, factory)
        self.factory = factory
        self.out_idx = out_idx
        self.target = target
        self.pass_configs = pass_configs
        self.compile_flags = compile_flags
        self._kernels = {}
        self._signature = inspect.signature(factory)
        bind = getattr(factory, "bind_compile_args", None)   # an @autotune factory inside @jit
        self._autotuned = callable(bind)
        if self._autotuned:
            bind(out_idx, target, pass_configs, compile_flags)

    def _key(self, args, kwargs):
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return tuple((k, _hashable(v)) for k, v in bound.arguments.items())

    @hide_internal_frames
    def __call__(self, *args, **kwargs):
        key = self._key(args, kwargs)
        kernel = self._kernels.get(key)
        if kernel is None:
            if self._autotuned:   # tunes in threads of its own, which take the lock themselves
                func = self.factory(*args, **kwargs)
            else:
                with LOWER_LOCK:
                    func = self.factory(*args, **kwargs)
            if isinstance(func, JITKernel):
                return func
            kernel = compile(func, self.out_idx, self.target, self.pass_configs, self.compile_flags)
            self._kernels[key] = kernel
        return kernel

    def get_prim_func(self, *args, **kwargs):
        """The parsed PrimFunc for these factory arguments (no compilation)."""
        if self._autotuned:
            return self.factory(*args, **kwargs)
        with LOWER_LOCK:
            return self.factory(*args, **kwargs)


def _hashable(value):
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


def jit(func=None, *, out_idx=None, target="auto", pass_configs=None, compile_flags=None,
        execution_backend=None, verbose=False, debug_root_path=None):
    """Decorate a kernel factory: ``@tilelang.jit(out_idx=[-1])``."""
    def wrap(factory):
        from tilelang.jit.eager import EagerJit, is_eager

        if is_eager(factory):
            return EagerJit(factory, target, pass_configs, compile_flags)
        return _JitFactory(factory, out_idx, target, pass_configs, compile_flags)

    if func is not None and callable(func):
        return wrap(func)
    return wrap
