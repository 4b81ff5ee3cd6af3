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
import logging
import os
import shlex
import threading

from tvm import tirx

from tilelang.diagnostics import hide_internal_frames
from tilelang.jit import cache, nvcc
from tilelang.artifact import KernelArtifact
from tilelang import knobs
from tilelang.jit.binding import FactoryFunc
from tilelang.jit.diagnostics import jit_phase
from tilelang.jit.impl import JITImpl
from tilelang.jit import kernel as _kernel_module
from tilelang.jit.kernel import JITKernel, wide_builder
# the tl.* configs of the entered PassContexts as a hashable key (empty outside any)
from tilelang.tvm_compat import tl_configs_key as _context_configs

LOWER_LOCK = threading.RLock()
_log = logging.getLogger("tilelang")

__all__ = ["JITImpl", "JITKernel", "compile", "jit", "lower", "par_compile"]


def _normalize_out_idx(out_idx, func=None):
    attrs = getattr(func, "attrs", None)
    returned = attrs is not None and "tilelang_out_idx" in attrs
    if out_idx is None:  # a prim_func returning T.empty outputs records them (tilelang.frontend)
        return [int(i) for i in attrs["tilelang_out_idx"]] if returned else []
    if returned:
        raise ValueError(f"Out index conflict: out_idx={out_idx} is given, but the kernel already returns its "
                         f"T.empty outputs (out_idx {list(attrs['tilelang_out_idx'])}); drop out_idx")
    if isinstance(out_idx, int):
        return [out_idx]
    return [int(i) for i in out_idx]


def with_context_configs(pass_configs) -> dict:
    """``pass_configs`` over the ``tl.*`` configs of the entered ``tvm.transform.PassContext``s
    (upstream-style ``with PassContext(config={"tl.disable_tma_lower": True}): tilelang.lower(f)``),
    over those of ``TILELANG_PASS_CONFIGS`` (every kernel of the process)."""
    from tilelang import knobs
    from tilelang.tvm_compat import tl_configs

    return {**knobs.pass_configs(), **tl_configs(), **dict(pass_configs or {})}


@hide_internal_frames
def lower(func=None, target="auto", pass_configs=None, out_idx=None, target_host=None, runtime_only=False,
          enable_host_codegen=False, enable_device_compile=False, *, func_or_mod=None) -> KernelArtifact:
    """Lower a ``@T.prim_func`` (or an IRModule holding one, upstream's ``func_or_mod``) to a
    KernelArtifact (CUDA source and launch description). ``enable_device_compile=True`` also
    runs nvcc (``artifact.cubin``); upstream's ``target_host``, ``runtime_only`` and
    ``enable_host_codegen`` are accepted and change nothing (the host side is our Python
    launcher)."""
    import tvm

    from tilelang.engine import lower as _lower
    from tilelang.transform.pass_config import normalize

    func = func if func is not None else func_or_mod
    if isinstance(func, tvm.IRModule):
        funcs = [f for _, f in func.functions.items() if isinstance(f, tvm.tirx.PrimFunc)]
        if len(funcs) != 1:
            raise ValueError(f"tilelang.lower: the IRModule holds {len(funcs)} PrimFuncs; lower one kernel at a time")
        func = funcs[0]

    artifact = _lower(func, target, normalize(with_context_configs(pass_configs)), _normalize_out_idx(out_idx, func))
    if enable_device_compile:
        artifact.cubin = nvcc.compile_artifact(artifact)
    return artifact


def lower_for_compile(func, out_idx=None, target="auto", pass_configs=None, compile_flags=None):
    """The first half of ``compile``: (cache key, artifact), the artifact from the kernel cache
    when it holds one (then with its cubin), else freshly lowered (cubin not built yet). The
    autotuner uses it to lower under its lock and run nvcc outside it."""
    from tilelang.engine.lower import lower as _lower, normalize_target
    from tilelang.transform.pass_config import normalize

    arch = normalize_target(target)
    configs = normalize(with_context_configs(pass_configs))
    # a string is a command line's worth of flags (upstream takes ``str | list[str]``)
    flags = shlex.split(compile_flags) if isinstance(compile_flags, str) else list(compile_flags or [])
    outs = _normalize_out_idx(out_idx, func)
    key = cache.cache_key("kernel", func.script(), arch, configs, flags, outs)
    # a compile asked to draw its layouts (TL_LAYOUT_VISUALIZATION_ENABLE) lowers again to draw them
    drawing = bool(configs.get("tl.layout_visualization_enable"))
    artifact = cache.load(key) if cache.enabled() and not drawing else None
    if artifact is None:
        artifact = _lower(func, arch, configs, outs)
        artifact.compile_flags = list(artifact.compile_flags) + flags
    return key, artifact


@hide_internal_frames
def compile(func, out_idx=None, target="auto", pass_configs=None, compile_flags=None,  # noqa: A001
            execution_backend=None, verbose=False, target_host=None) -> JITKernel:
    """Compile a ``@T.prim_func`` into a launchable ``JITKernel`` (using the disk cache).
    ``execution_backend``, ``target_host`` and ``verbose`` are upstream's and accepted unused
    (one backend here: nvcc and the CUDA driver)."""
    with LOWER_LOCK, jit_phase("lower", kernel=_name_of(func), target=str(target)):
        key, artifact = lower_for_compile(func, out_idx, target, pass_configs, compile_flags)
    if artifact.parts:   # several kernels: each part's cubin is built on first launch, then stored
        pass
    elif artifact.cubin is None:
        if knobs.print_on_compilation():
            _log.info("TileLang compiles kernel %s for %s", artifact.name, artifact.arch)
        try:
            with jit_phase("nvcc", kernel=artifact.name, target=artifact.arch):
                artifact.cubin = nvcc.compile_artifact(artifact)
        except nvcc.NVCCNotFoundError:
            artifact.cubin = None
        if artifact.cubin is not None and cache.enabled():
            cache.store(key, artifact)
    _write_kernel_source((pass_configs or {}).get("cuda.kernels_output_dir"), artifact)
    kernel = JITKernel(artifact, prim_func=func, pass_configs=pass_configs,
                       execution_backend=execution_backend).store_parts_under(key)
    return kernel.with_wide_variant(wide_builder(func, out_idx, target, pass_configs, compile_flags))


_kernel_module.COMPILE = compile   # JITKernel(prim_func, ...) compiles through it


def _name_of(func) -> str:
    attrs = getattr(func, "attrs", None)
    return str(attrs["global_symbol"]) if attrs is not None and "global_symbol" in attrs else "main"


def _write_kernel_source(directory, artifact: KernelArtifact) -> None:
    """``cuda.kernels_output_dir``: keep each compiled kernel's CUDA source as ``<name>.cu``."""
    if directory:
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, f"{artifact.name}.cu"), "w") as f:
            f.write(artifact.source)


class _JitFactory(JITImpl):
    """The object ``@tilelang.jit`` returns: call it like the factory to get a kernel.

    Kernels are memoised per canonical argument tuple (``func.parse_args``: positional, keyword
    and default spellings of one call share a kernel) and per literal call form (a repeated call
    skips the binding). Upstream's attributes: ``func`` (a ``FactoryFunc``), ``mode`` ("lazy"),
    ``compile(*args)``, ``par_compile(configs)``, ``get_tir(*args)``, ``get_kernel_source(*args)``,
    ``signature``.
    """

    __test__ = False   # a kernel factory, not a test: pytest must not collect a ``test_*`` one

    def __init__(self, factory, out_idx, target, pass_configs, compile_flags, debug_root_path=None):
        functools.update_wrapper(self, factory)
        self.factory = factory
        self.out_idx = out_idx
        self.target = target
        self.pass_configs = pass_configs
        self.compile_flags = compile_flags
        self.debug_root_path = debug_root_path
        self.func = FactoryFunc(factory)
        self.mode = "lazy"
        self._kernel_cache: dict = {}
        self._call_form_cache: dict = {}
        bind = getattr(factory, "bind_compile_args", None)   # an @autotune factory inside @jit
        self._autotuned = callable(bind)
        if self._autotuned:
            bind(out_idx, target, pass_configs, compile_flags)

    @property
    def signature(self) -> inspect.Signature:
        """The factory's signature (upstream's ``JITImpl.signature``: libraries read the tile
        parameters it takes from it)."""
        return inspect.signature(self.factory)

    @hide_internal_frames
    def __call__(self, *args, **kwargs):
        form = _call_form(args, kwargs)
        if form is None and not self._autotuned:
            _refuse_unhashable(self.__name__, args, kwargs)
        context = _context_configs()   # a kernel built inside `with PassContext(config=...)` is its own
        if context and form is not None:
            form = (form, context)
        kernel = self._call_form_cache.get(form) if form is not None else None
        if kernel is not None:
            return kernel
        if self._autotuned:   # its own memo and compile arguments; its kernels are final
            key = None
        else:
            key, _ = self.func.parse_args(*args, **kwargs)
            key = (key, context) if context else key
            kernel = self._kernel_cache.get(key)
        if kernel is None:
            func = self.get_tir(*args, **kwargs)
            if isinstance(func, JITKernel):
                return func
            kernel = self._compile_tir(func)
            if key is not None:
                self._kernel_cache[key] = kernel
        if form is not None:
            self._call_form_cache[form] = kernel
        return kernel

    def _compile_tir(self, func) -> JITKernel:
        kernel = compile(func, self.out_idx, self.target, self.pass_configs, self.compile_flags)
        if self.debug_root_path:
            _write_debug_files(self.debug_root_path, self.__name__, kernel, func)
        return kernel

    def get_tir(self, *args, **kwargs):
        """The parsed PrimFunc for these factory arguments (no compilation)."""
        if self._autotuned:
            return self.factory(*args, **kwargs)
        with LOWER_LOCK:
            return self.factory(*args, **kwargs)

    get_prim_func = get_tir

    @hide_internal_frames
    def compile(self, *args, **kwargs) -> JITKernel:
        """Compile the factory's kernel for these arguments (through the disk cache, not the memo)."""
        func = self.get_tir(*args, **kwargs)
        return func if isinstance(func, JITKernel) else self._compile_tir(func)

    def get_kernel_source(self, *args, **kwargs) -> str:
        return self(*args, **kwargs).get_kernel_source()

    def par_compile(self, configs, num_workers: int | None = None, ignore_error: bool = False) -> list:
        """Kernels for several argument sets (tuples: positional, dicts: keywords), compiled in
        threads; with ``ignore_error`` a failing one is None (and logged) instead of raising."""
        funcs = []
        for cfg in configs:
            if not isinstance(cfg, (tuple, dict)):
                raise ValueError(f"a par_compile config is a tuple of positional or a dict of keyword arguments, "
                                 f"not {type(cfg).__name__}")
            funcs.append(self.get_tir(*cfg) if isinstance(cfg, tuple) else self.get_tir(**cfg))
        return par_compile(funcs, self.out_idx, self.target, self.pass_configs, self.compile_flags,
                           num_workers=num_workers, ignore_error=ignore_error)


def _typed(value):
    """``value`` with its type beside it (also inside tuples): 1, 1.0 and True are equal as dict
    keys but build different kernels."""
    if isinstance(value, tuple):
        return tuple, tuple(_typed(v) for v in value)
    return type(value), value


def _call_form(args: tuple, kwargs: dict):
    """The literal call as a dict key, or None when an argument is unhashable."""
    form = (tuple(_typed(a) for a in args), tuple((k, _typed(v)) for k, v in kwargs.items()))
    try:
        hash(form)
    except TypeError:
        return None
    return form


def _refuse_unhashable(name: str, args: tuple, kwargs: dict) -> None:
    """A lazy factory memoises kernels by its literal call: every argument must be hashable."""
    named = [(f"argument #{i}", v) for i, v in enumerate(args)] + [(f"argument '{k}'", v) for k, v in kwargs.items()]
    for what, value in named:
        try:
            hash(_typed(value))
        except TypeError:
            raise TypeError(f"{name}(): {what} is unhashable ({type(value).__name__}: {value!r}); a lazy "
                            f"@tilelang.jit factory caches its kernels by the call's arguments, so pass "
                            f"hashable values (a tuple instead of a list)") from None


def _write_debug_files(root: str, name: str, kernel: JITKernel, func) -> None:
    """``debug_root_path``: the kernel's CUDA source and TVMScript, as upstream writes them."""
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, f"tilelang_jit_kernel_{name}.c"), "w") as f:
        f.write(kernel.get_kernel_source())
    with open(os.path.join(root, f"tilelang_jit_program_{name}.py"), "w") as f:
        f.write(func.script())


def par_compile(funcs, out_idx=None, target="auto", pass_configs=None, compile_flags=None, num_workers=None,
                ignore_error: bool = False, execution_backend=None, target_host=None, verbose=None) -> list:
    """``compile`` each PrimFunc in ``funcs`` in up to ``num_workers`` threads (default: one per
    CPU), keeping their order; lowering takes turns (``LOWER_LOCK``), nvcc runs in parallel."""
    import concurrent.futures

    funcs = list(funcs)
    workers = num_workers or max(1, min(len(funcs), os.cpu_count() or 1))
    results: list = [None] * len(funcs)
    with concurrent.futures.ThreadPoolExecutor(workers, "tl-par-compile") as pool:
        futures = {pool.submit(compile, f, out_idx, target, pass_configs, compile_flags): i
                   for i, f in enumerate(funcs)}
        for future in concurrent.futures.as_completed(futures):
            i = futures[future]
            try:
                results[i] = future.result()
            except Exception as err:
                if not ignore_error:
                    raise
                _log.warning("par_compile: kernel #%d failed: %s", i, err)
    return results


def _hashable(value):
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


class _CompiledOnUse(JITImpl):
    """``@tilelang.jit(...)`` on a ``@T.prim_func``: the ``JITKernel`` of that function, compiled
    (through the disk cache) the first time it is called or inspected."""

    def __init__(self, func, options):
        self._func, self._options, self._kernel = func, options, None
        attrs = func.attrs or {}
        self.__name__ = str(attrs["global_symbol"]) if "global_symbol" in attrs else "kernel"

    def _compiled(self) -> JITKernel:
        if self._kernel is None:
            self._kernel = compile(self._func, **self._options)
        return self._kernel

    @hide_internal_frames
    def __call__(self, *args, **kwargs):
        return self._compiled()(*args, **kwargs)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._compiled(), name)


def jit(func=None, *, out_idx=None, target="auto", pass_configs=None, compile_flags=None,
        execution_backend=None, verbose=False, debug_root_path=None, target_host=None):
    """Decorate a kernel factory: ``@tilelang.jit(out_idx=[-1])``. Stacked directly on a
    ``@T.prim_func`` (an older upstream form, still common in user code), it gives that kernel,
    compiled on first use."""
    def wrap(factory):
        from tilelang.jit.eager import EagerJit, is_eager

        if isinstance(factory, tirx.PrimFunc):
            return _CompiledOnUse(factory, dict(out_idx=out_idx, target=target, pass_configs=pass_configs,
                                                compile_flags=compile_flags))
        if is_eager(factory):
            return EagerJit(factory, target, pass_configs, compile_flags, compile)
        return _JitFactory(factory, out_idx, target, pass_configs, compile_flags, debug_root_path)

    if func is not None and callable(func):
        return wrap(func)
    return wrap
