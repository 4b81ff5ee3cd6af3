"""The tuning loop, ``AutoTuner`` and the ``@autotune`` wrapper.

One tuning run (``_tune``), for a factory, the caller's fixed arguments and a config list:
1. The key (``store.tuning_key``) is looked up in this process's memo, then on disk unless
   forced (``force``, ``TILELANG_AUTOTUNE_FORCE=1``).  A hit compiles only the stored winner
   (a kernel disk-cache hit when it was compiled before) and needs no GPU.
2. Otherwise the runner's ``require()`` (a CUDA GPU for ``GpuRunner``), then every config is
   compiled in parallel (``build.compile_all``), then each compiled config is checked and timed
   one after the other in the calling thread (``runner.check``, ``runner.bench``).  A config
   that fails anywhere is skipped with a one-line reason on stderr and in the result's table;
   only when every config fails is an ``AutotuneError`` raised, listing every reason.
3. The fastest config wins; the result goes to the memo and to disk, and its kernel gets the
   attributes ``config``, ``latency``, ``ref_latency`` and ``autotune_result``.
Runs are serialised by a process-wide lock, so two threads never time kernels at once.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tilelang.autotuner import build, configs as cfgs, store
from tilelang.autotuner.progress import Progress
from tilelang.autotuner.runner import AutotuneError, GpuRunner
from tilelang.diagnostics import TileLangCompileError
from tilelang.tvm_compat import tl_configs_key as _context_configs
from tilelang.diagnostics.errors import filter_traceback
from tilelang.jit.kernel import JITKernel
from tilelang.profiler import TensorSupplyType

_TUNE_LOCK = threading.RLock()
_MEMO: dict[str, "AutotuneResult"] = {}


@dataclass
class CompileArgs:
    """How every config is compiled (as ``tilelang.compile`` takes them)."""

    out_idx: Any = None
    target: Any = "auto"
    pass_configs: dict | None = None
    compile_flags: list | None = None
    execution_backend: Any = "auto"     # upstream's; one backend here (nvcc + the CUDA driver)
    target_host: Any = None             # upstream's; unused

    def as_dict(self) -> dict:
        out = dataclasses.asdict(self)
        for unused in ("execution_backend", "target_host"):   # (cache keys stay as they were)
            out.pop(unused)
        return out


@dataclass
class ProfileArgs:
    """How every config is checked and timed (``autotune``'s keyword arguments)."""

    warmup: float = 25
    rep: float = 100
    timeout: float = 100
    supply_type: TensorSupplyType = TensorSupplyType.Auto
    ref_prog: Callable | None = None
    supply_prog: Callable | None = None
    rtol: float = 1e-2
    atol: float = 1e-2
    max_mismatched_ratio: float = 0.01
    skip_check: bool = False
    manual_check_prog: Callable | None = None
    cache_input_tensors: bool = False  # inputs are always made once per run and shared
    early_stop: bool = False
    early_stop_factor: float = 2.0
    backend: str = "event"   # do_bench's timing backend: "event", "cupti" or "cudagraph"


@dataclass
class ConfigResult:
    """One row of the table: a config's latency (ms), or why it was skipped."""

    config: dict
    latency: float | None = None
    error: str | None = None
    compile_s: float | None = None
    early_stopped: bool = False


_RESULT_FILE, _KERNEL_DIR = "result.json", "kernel"


@dataclass
class AutotuneResult:
    """The winner (``config``, ``latency`` in ms, compiled ``kernel``) and the whole table;
    ``func`` (its PrimFunc) and ``libcode`` (its CUDA source) default to the kernel's.
    ``save_to_disk(path)`` / ``AutotuneResult.load_from_disk(path, compile_args)`` keep a winner
    in a directory of the user's (upstream's API: the config, latencies and the compiled kernel,
    so the loaded kernel runs without compiling again)."""

    config: dict | None = None
    latency: float | None = None
    kernel: Any = None
    ref_latency: float | None = None
    results: list[ConfigResult] = field(default_factory=list)
    from_cache: bool = False
    key: str = ""
    arguments: str = ""  # the exact call the kernel was compiled for (see _for_call)
    func: Any = None
    libcode: str | None = None

    def __post_init__(self):
        if self.func is None:
            self.func = getattr(self.kernel, "prim_func", None)
        if self.libcode is None and self.kernel is not None and hasattr(self.kernel, "get_kernel_source"):
            self.libcode = self.kernel.get_kernel_source()

    def save_to_disk(self, path, verbose: bool = False) -> None:
        """Write the config, the latencies and the compiled kernel into the directory ``path``
        (created; a result already there is replaced)."""
        import json

        from tilelang.jit import cache

        artifact = getattr(self.kernel, "artifact", None)
        if artifact is None:
            raise ValueError("AutotuneResult.save_to_disk: the result has no compiled kernel to save")
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        cache.write_entry(path / _KERNEL_DIR, artifact)
        record = {"config": self.config, "latency": self.latency, "ref_latency": self.ref_latency,
                  "key": self.key, "arguments": self.arguments}
        (path / _RESULT_FILE).write_text(json.dumps(record, indent=1, sort_keys=True, default=repr))
        if verbose:
            print(f"tilelang.autotune: saved config {self.config} and its kernel to {path}")

    @classmethod
    def load_from_disk(cls, path, compile_args: CompileArgs | None = None) -> "AutotuneResult | None":
        """The result ``save_to_disk`` wrote into ``path`` (None where there is none). The kernel
        is the one compiled then: ``compile_args`` (upstream's, for its backend) changes nothing."""
        import json

        from tilelang.jit import cache

        path = Path(path)
        if not (path / _RESULT_FILE).is_file():
            return None
        record = json.loads((path / _RESULT_FILE).read_text())
        kernel = JITKernel(cache.read_entry(path / _KERNEL_DIR))
        return cls(record.get("config"), record.get("latency"), kernel, record.get("ref_latency"),
                   from_cache=True, key=record.get("key", ""), arguments=record.get("arguments", ""))

    def table(self) -> str:
        """Every config with its latency or the reason it was skipped, one per line."""
        rows = [(cfgs.describe(r.config), "-" if r.latency is None else f"{r.latency:.4f}",
                 "best" if r.config == self.config and r.error is None else
                 (r.error or ("early-stopped" if r.early_stopped else ""))) for r in self.results]
        width = max([len("config")] + [len(r[0]) for r in rows])
        lines = [f"{'config':<{width}}  {'ms':>9}  note"]
        lines += [f"{c:<{width}}  {l:>9}  {n}".rstrip() for c, l, n in rows]
        return "\n".join(lines)

    def __repr__(self) -> str:
        ok = sum(r.error is None for r in self.results)
        return (f"AutotuneResult(config={self.config!r}, latency={self.latency!r}, ref_latency={self.ref_latency!r}, "
                f"{ok}/{len(self.results)} configs ran, from_cache={self.from_cache})")


@dataclass
class _Problem:
    """One factory call to tune: everything a tuning run needs besides how to measure."""

    name: str
    factory: Callable
    signature: inspect.Signature
    fixed: dict
    configs: list
    compile_args: CompileArgs
    key_arguments: dict
    arguments: str


# ------------------------------------------------------------------ the factory and its call
def _unwrap(target) -> tuple[Callable, CompileArgs | None]:
    """The raw factory behind ``target`` and, for a ``@tilelang.jit`` one, its compile arguments."""
    from tilelang.jit import _JitFactory
    from tilelang.jit.eager import EagerJit

    if isinstance(target, EagerJit):
        return target.tuning_factory(), None  # returns compiled kernels (the eager out_idx)
    if isinstance(target, AutotunedFactory):
        raise TypeError(f"{target.__name__!r} is already decorated with @autotune")
    if isinstance(target, _JitFactory):
        return target.factory, CompileArgs(target.out_idx, target.target, target.pass_configs, target.compile_flags)
    if not callable(target):
        raise TypeError(f"autotune needs a kernel factory (a function returning a @T.prim_func), got {target!r}")
    return target, None


def _problem(target, configs, compile_args: CompileArgs | None, args: tuple, kwargs: dict,
             do_not_specialize=()) -> _Problem:
    factory, jit_args = _unwrap(target)
    name = getattr(factory, "__name__", type(factory).__name__)
    signature = inspect.signature(factory)
    fixed, tuned = cfgs.resolve(configs, signature, args, kwargs, name, do_not_specialize)
    bound = signature.bind_partial(*args, **kwargs)
    bound.apply_defaults()
    everything = dict(bound.arguments)
    keyed = {k: v for k, v in everything.items() if k not in set(do_not_specialize or ())}
    from tilelang.jit.eager import EagerJit

    if isinstance(target, EagerJit):  # a tensor argument counts by its shape and dtype
        keyed = {k: target.key_of(v) for k, v in keyed.items()}
    return _Problem(name, factory, signature, fixed, tuned, compile_args or jit_args or CompileArgs(), keyed,
                    _marker(everything))


def _marker(arguments: dict) -> str:
    from tilelang.jit import cache

    return cache.canonical_json(store.plain(arguments))


def _thunk(problem: _Problem, config: dict):
    args, kwargs = cfgs.call_args(problem.signature, problem.fixed, config)
    return functools.partial(problem.factory, *args, **kwargs)


def _compile_args(problem: _Problem, config: dict) -> dict:
    """The run's compile arguments with the config's own ``pass_configs`` merged over them."""
    args = problem.compile_args.as_dict()
    extra = cfgs.compile_overrides(config, problem.signature)
    if extra:
        args["pass_configs"] = {**(args.get("pass_configs") or {}), **extra}
    return args


def _compile_one(problem: _Problem, config: dict):
    with build.LOWER_LOCK:
        func = _thunk(problem, config)()
    if isinstance(func, JITKernel):
        return func
    return build.build_kernel(func, _compile_args(problem, config))


# ------------------------------------------------------------------ one run
def _tune(problem: _Problem, profile: ProfileArgs, runner=None, force: bool = False) -> AutotuneResult:
    from tilelang.engine.lower import normalize_target

    if problem.configs == [{}]:
        return _finish(AutotuneResult({}, None, _compile_one(problem, {}), arguments=problem.arguments))
    arch = normalize_target(problem.compile_args.target)
    key = _tuning_key(problem, profile, arch)
    with _TUNE_LOCK:
        if key is None:   # callbacks decide what is correct: nothing is reused (see _tuning_key)
            return _for_call(_run(problem, profile, runner or GpuRunner(profile), "uncached"), problem)
        result = _MEMO.get(key) if store.reuse_enabled() else None   # (upstream: no reuse with the cache off)
        if result is None and not (force or store.force_retune()):
            result = _from_record(store.load(key), problem, key)
        if result is None:
            result = _run(problem, profile, runner or GpuRunner(profile), key)
            store.store(key, _record(result, problem, arch))
        _MEMO[key] = result
        return _for_call(result, problem)


def _profile_key(profile: ProfileArgs) -> dict:
    """What of the profile decides which configs count as correct and which inputs they see."""
    return {"supply_type": getattr(profile.supply_type, "name", str(profile.supply_type)), "rtol": profile.rtol,
            "atol": profile.atol, "max_mismatched_ratio": profile.max_mismatched_ratio,
            "skip_check": profile.skip_check, "cache_input_tensors": profile.cache_input_tensors}


def _callbacks(profile: ProfileArgs) -> dict:
    return {name: cb for name, cb in (("ref_prog", profile.ref_prog), ("supply_prog", profile.supply_prog),
                                      ("manual_check_prog", profile.manual_check_prog)) if cb is not None}


def _tuning_key(problem: _Problem, profile: ProfileArgs, arch: str) -> str | None:
    """The key a tuning result is memoised and stored under: the factory, its arguments, the configs,
    the compile arguments, what decides correctness (``_profile_key``) and the callbacks' code and
    captured values. None when a callback's identity cannot be taken (nothing is reused then)."""
    try:
        callbacks = {name: store.callable_identity(cb) for name, cb in _callbacks(profile).items()}
    except (TypeError, ValueError):
        return None
    # (the tl.* configs of an entered PassContext build other kernels: another key)
    return store.tuning_key(problem.factory, problem.key_arguments, problem.configs,
                            {**problem.compile_args.as_dict(), "profile": _profile_key(profile),
                             "callbacks": callbacks, "context": [list(c) for c in _context_configs()]}, arch)


def _for_call(result: AutotuneResult, problem: _Problem) -> AutotuneResult:
    """``result`` for this exact call: with ``do_not_specialize`` the memo may hold a kernel built
    for other values of those arguments, and then the same config is compiled for these."""
    if result.arguments == problem.arguments:
        return result
    kernel = _compile_one(problem, result.config)
    return _finish(dataclasses.replace(result, kernel=kernel, arguments=problem.arguments))


def _finish(result: AutotuneResult) -> AutotuneResult:
    kernel = result.kernel
    kernel.config, kernel.latency, kernel.ref_latency = result.config, result.latency, result.ref_latency
    kernel.autotune_result = result
    return result


def _from_record(record: dict | None, problem: _Problem, key: str) -> AutotuneResult | None:
    if record is None:
        return None
    index = record["best_index"]
    if not 0 <= index < len(problem.configs) or store.jsonable(problem.configs[index]) != record.get("best_config"):
        return None
    config = problem.configs[index]
    rows = record.get("results") or []
    table = [ConfigResult(c, r.get("latency"), r.get("error"), r.get("compile_s"), bool(r.get("early_stopped")))
             for c, r in zip(problem.configs, rows)]
    latency = record.get("latency")
    when = record.get("created", "?")
    Progress(problem.name).line(f"stored best {{{cfgs.describe(config)}}} ({_ms(latency)}, tuned {when}); "
                                f"{store.FORCE_ENV}=1 re-tunes")
    result = AutotuneResult(config, latency, _compile_one(problem, config), record.get("ref_latency"), table,
                            from_cache=True, key=key, arguments=problem.arguments)
    return _finish(result)


def _record(result: AutotuneResult, problem: _Problem, arch: str) -> dict:
    from tilelang.version import __version__

    return {"name": problem.name, "arch": arch, "tilelang_version": __version__,
            "created": time.strftime("%Y-%m-%d %H:%M:%S"),
            "best_index": problem.configs.index(result.config), "best_config": store.jsonable(result.config),
            "latency": result.latency, "ref_latency": result.ref_latency,
            "results": [{"config": store.jsonable(r.config), "latency": r.latency, "error": r.error,
                         "compile_s": r.compile_s, "early_stopped": r.early_stopped} for r in result.results]}


def _ms(latency) -> str:
    return "? ms" if latency is None else f"{latency:.4g} ms"


def _cpu_count() -> int:
    """Compile threads: TILELANG_AUTO_TUNING_CPU_COUNTS when positive, else the usable CPUs."""
    from tilelang import knobs

    wanted = knobs.autotune_cpu_count()
    if wanted > 0:
        return wanted
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _run(problem: _Problem, profile: ProfileArgs, runner, key: str) -> AutotuneResult:
    runner.require()
    t0 = time.monotonic()
    progress = Progress(problem.name)
    table = [ConfigResult(c) for c in problem.configs]
    ref_latency = None
    try:
        built = _compile_phase(problem, profile, table, progress)
        best = _bench_phase(problem, profile, runner, table, built, progress)
        if best is not None and profile.ref_prog is not None:
            try:
                ref_latency = runner.ref_latency(profile.warmup, profile.rep)
            except AutotuneError:
                raise
            except Exception as e:  # noqa: BLE001 - the reference's speed is informative only
                progress.line(f"could not time ref_prog: {build.reason_of(e)}")
    finally:
        progress.close()  # also on Ctrl-C: no half-drawn bar left on the terminal
    if best is None:
        reasons = "\n".join(f"  {{{cfgs.describe(r.config)}}}: {r.error}" for r in table)
        raise AutotuneError(f"autotune {problem.name}: all {len(table)} configs failed:\n{reasons}")
    i, kernel = best
    ran = sum(r.latency is not None for r in table)
    ref = f", ref_prog {_ms(ref_latency)}" if ref_latency is not None else ""
    progress.line(f"best {{{cfgs.describe(problem.configs[i])}}} {_ms(table[i].latency)}{ref}; "
                  f"{ran} of {len(table)} configs timed, {len(table) - ran} skipped, {time.monotonic() - t0:.1f} s")
    result = AutotuneResult(problem.configs[i], table[i].latency, kernel, ref_latency, table, key=key,
                            arguments=problem.arguments)
    return _finish(result)


def _compile_phase(problem: _Problem, profile: ProfileArgs, table: list, progress: Progress) -> dict:
    n = len(problem.configs)
    workers = min(n, _cpu_count())
    progress.start("compile", n, f"compiling {n} configs, {workers} at a time")

    def report(outcome) -> None:
        if outcome is None:
            progress.tick()
            return
        row = table[outcome.index]
        if isinstance(outcome, build.Failed):
            row.error = f"compile: {outcome.reason}"
            progress.advance(f"skip {{{cfgs.describe(row.config)}}}: {row.error}", keep=True)
        else:
            row.compile_s = outcome.seconds
            progress.advance(f"{{{cfgs.describe(row.config)}}} ({outcome.seconds:.1f} s)")

    thunks = [_thunk(problem, c) for c in problem.configs]
    per_config = [_compile_args(problem, c) for c in problem.configs]
    outcomes = build.compile_all(thunks, per_config, profile.timeout, workers, report)
    return {i: o.kernel for i, o in sorted(outcomes.items()) if isinstance(o, build.Built)}


def _bench_phase(problem, profile: ProfileArgs, runner, table: list, built: dict, progress: Progress):
    progress.start("bench", len(built))
    best = None
    for i, kernel in built.items():
        row = table[i]
        stage = "check"
        try:
            runner.check(kernel, row.config)
            stage = "run"
            row.latency, row.early_stopped = _measure(runner, kernel, row.config, profile,
                                                      None if best is None else table[best[0]].latency)
        except AutotuneError:
            raise
        except Exception as e:  # noqa: BLE001 - one bad config must not stop the run
            row.latency, row.error = None, f"{stage}: {build.reason_of(e)}"
            progress.advance(f"skip {{{cfgs.describe(row.config)}}}: {row.error}", keep=True)
            continue
        if not row.early_stopped and (best is None or row.latency < table[best[0]].latency):
            best = (i, kernel)
        note = " (early-stopped)" if row.early_stopped else ""
        progress.advance(f"{{{cfgs.describe(row.config)}}}: {_ms(row.latency)}{note}",
                         best=table[best[0]].latency if best else None)
    return best


def _measure(runner, kernel, config: dict, profile: ProfileArgs, best: float | None) -> tuple[float, bool]:
    """(latency in ms, early-stopped): a short probe first when early stopping is on."""
    if profile.early_stop and best is not None:
        probe = runner.bench(kernel, config, max(1.0, profile.warmup / 10), max(1.0, profile.rep / 10))
        if probe > profile.early_stop_factor * best:
            return probe, True
    return runner.bench(kernel, config, profile.warmup, profile.rep), False


# ------------------------------------------------------------------ public API
_USER_ERRORS = (AutotuneError, cfgs.ConfigError, cfgs.ConfigTypeError, TileLangCompileError)


def _user_facing(function):
    """What ``hide_internal_frames`` does for compile errors, for the tuner's own errors too: they
    leave a public entry point with only the user's frames (all of them with
    TILELANG_FRONTEND_DEBUG=1).  The cut happens in the outermost tilelang frame, because frames
    are added to a traceback as it unwinds."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        __tracebackhide__ = True  # noqa: F841
        try:
            return function(*args, **kwargs)
        except _USER_ERRORS as error:
            filter_traceback(error)
            raise

    return wrapper

class AutoTuner:
    """Upstream's builder: ``AutoTuner.from_kernel(kernel=f, configs=[...])
    .set_compile_args(out_idx=[-1]).set_profile_args(ref_prog=ref).run(warmup=25, rep=100)``.

    ``kernel`` is called as ``kernel(**config)`` (fix other arguments with a closure or
    ``functools.partial``); a ``@tilelang.jit`` factory lends its compile arguments unless
    ``set_compile_args`` is called.
    """

    def __init__(self, fn: Callable, configs):
        self.fn = fn
        self.configs = configs
        self.compile_args: CompileArgs | None = None
        self.profile_args = ProfileArgs()
        self._runner = None
        self._kernel_parameters = None

    @classmethod
    def from_kernel(cls, kernel: Callable, configs) -> "AutoTuner":
        return cls(kernel, configs)

    @property
    def cache_dir(self) -> Path:
        """Where tuning results are stored (``<TILELANG_CACHE_DIR>/autotune``)."""
        return store.directory()

    def set_kernel_parameters(self, k_parameters, f_parameters=None) -> "AutoTuner":
        """Upstream's hook for the arguments the kernel was built with (``(args, kwargs items)``
        and the factory's parameters): here, as there, they only enter the key a result is stored
        under, so two tuners of one closure over different arguments keep separate results."""
        self._kernel_parameters = store.plain([k_parameters, dict(f_parameters or {})])
        return self

    def set_compile_args(self, out_idx=None, target="auto", execution_backend=None, target_host=None,
                         verbose=None, pass_configs=None, compile_flags=None) -> "AutoTuner":
        """``execution_backend``, ``target_host`` and ``verbose`` are accepted for upstream code and unused."""
        self.compile_args = CompileArgs(out_idx, target or "auto", pass_configs, compile_flags)
        return self

    def set_profile_args(self, warmup=25, rep=100, timeout=30, supply_type=TensorSupplyType.Auto, ref_prog=None,
                         supply_prog=None, rtol=0.01, atol=0.01, max_mismatched_ratio=0.01, skip_check=False,
                         manual_check_prog=None, cache_input_tensors=False, backend="event", early_stop=False,
                         early_stop_factor=2.0) -> "AutoTuner":
        """See ``autotune``; ``backend`` is ``do_bench``'s timing backend (event, cupti, cudagraph)."""
        from tilelang.profiler.bench import BACKENDS

        if backend not in BACKENDS:
            raise ValueError(f"unknown timing backend {backend!r}; use one of {', '.join(BACKENDS)}")
        self.profile_args = ProfileArgs(warmup, rep, timeout, supply_type, ref_prog, supply_prog, rtol, atol,
                                        max_mismatched_ratio, skip_check, manual_check_prog, cache_input_tensors,
                                        early_stop, early_stop_factor, backend)
        return self

    def generate_cache_key(self, parameters, extra_parameters) -> str | None:
        """The key this tuner's result is stored under (upstream's API): ``parameters`` are the
        kernel's ``inspect.signature(...).parameters`` (their defaults count), ``extra_parameters``
        more values. Like upstream's, it is None when the profile has callbacks (``ref_prog``,
        ``supply_prog``, ``manual_check_prog``): upstream then reuses nothing. Our own tuning does
        store such results, keyed by the callbacks' code and captured values (``_tuning_key``)."""
        from tilelang.engine.lower import normalize_target

        if _callbacks(self.profile_args):
            return None
        compile_args = self.compile_args or _unwrap(self.fn)[1] or CompileArgs()
        defaults = {name: p.default for name, p in dict(parameters).items()
                    if p.default is not inspect.Parameter.empty}
        problem = _Problem(getattr(self.fn, "__name__", "kernel"), _unwrap(self.fn)[0], inspect.signature(self.fn),
                           {}, list(self.configs), compile_args, {**defaults, **dict(extra_parameters or {})}, "")
        return _tuning_key(problem, self.profile_args, normalize_target(compile_args.target))

    @_user_facing
    def run(self, warmup=None, rep=None, timeout=None, use_pipeline: bool = False,
            enable_grouped_compile: bool = False, group_compile_size: int = 2, benchmark_devices=None,
            benchmark_multi_gpu: bool = False, early_stop=None, early_stop_factor=None, *,
            force: bool = False) -> AutotuneResult:
        """Tune (or reuse a stored result); ``warmup``/``rep``/``timeout``/``early_stop``/
        ``early_stop_factor`` override the profile args.

        Upstream's scheduling switches are accepted and checked, and change no result:
        ``use_pipeline`` (benchmark while later configs compile), ``enable_grouped_compile`` /
        ``group_compile_size`` (compile configs in groups: see ``grouped_compile``; here every config
        is compiled on its own, which is what upstream falls back to off CUDA+tvm_ffi) and
        ``benchmark_multi_gpu`` / ``benchmark_devices`` (spread the timing over several GPUs): every
        config is timed on the current device, one after the other.
        """
        if isinstance(group_compile_size, bool) or not isinstance(group_compile_size, int) or group_compile_size < 1:
            raise ValueError(f"group_compile_size must be a positive int, got {group_compile_size!r}")
        if early_stop_factor is not None and early_stop_factor < 1.0:
            raise ValueError(f"early_stop_factor must be >= 1.0, got {early_stop_factor}")
        if benchmark_devices is not None and not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                     for d in benchmark_devices):
            raise ValueError(f"benchmark_devices must be CUDA device ordinals, got {benchmark_devices!r}")
        profile = dataclasses.replace(self.profile_args, **{k: v for k, v in
                                                            (("warmup", warmup), ("rep", rep), ("timeout", timeout),
                                                             ("early_stop", early_stop),
                                                             ("early_stop_factor", early_stop_factor))
                                                            if v is not None})
        problem = _problem(self.fn, self.configs, self.compile_args, (), {})
        if self._kernel_parameters is not None:
            problem.key_arguments = {**problem.key_arguments, "__kernel_parameters__": self._kernel_parameters}
        return _tune(problem, profile, self._runner, force)

    __call__ = run


class AutotunedFactory:
    """What ``@autotune`` returns: call it like the factory to get the best compiled kernel."""

    def __init__(self, target, configs, profile: ProfileArgs, do_not_specialize=None, force: bool = False,
                 runner=None):
        functools.update_wrapper(self, target, updated=())
        factory, _ = _unwrap(target)  # refuses what cannot be tuned, at decoration time
        self._target = target
        self._configs = configs
        self._profile = profile
        self._do_not_specialize = tuple(do_not_specialize or ())
        self._force = force
        self._runner = runner
        self._kernels: dict = {}
        # tuning results per tuning key (upstream's name); clearing it forgets the kernels too
        self._tuner_cache = _TunerCache(self._kernels.clear)
        self._jit_args: CompileArgs | None = None   # set by an enclosing @tilelang.jit
        unknown = [n for n in self._do_not_specialize if n not in inspect.signature(factory).parameters]
        if unknown:
            raise ValueError(f"autotune do_not_specialize names {unknown}, which are not parameters of "
                             f"{factory.__name__}{inspect.signature(factory)}")

    @_user_facing
    def __call__(self, *args, **kwargs):
        from tilelang.jit.eager import EagerJit

        kernel = self.compile(*args, **kwargs)
        if isinstance(self._target, EagerJit) and args:  # an eager kernel runs on its tensors
            return self._target.run(kernel, args, kwargs)
        return kernel

    @_user_facing
    def compile(self, *args, **kwargs):
        """The tuned kernel for these arguments (tuning if needed)."""
        from tilelang.jit import _hashable

        kwargs.pop("__return_kernel", None)   # upstream's flag; the kernel is what is returned
        key = (tuple(_hashable(a) for a in args), tuple(sorted((k, _hashable(v)) for k, v in kwargs.items())),
               _context_configs())
        kernel = self._kernels.get(key)
        if kernel is None:
            kernel = self.tune(*args, **kwargs).kernel
            self._kernels[key] = kernel
        return kernel

    def bind_compile_args(self, out_idx, target, pass_configs, compile_flags) -> None:
        """Called by ``@tilelang.jit`` wrapped around this factory: jit returns the kernel it gets
        back as is, so tuning must compile with jit's own arguments."""
        self._jit_args = CompileArgs(out_idx, target, pass_configs, compile_flags)
        self._kernels.clear()

    @_user_facing
    def tune(self, *args, **kwargs) -> AutotuneResult:
        """The full AutotuneResult for these factory arguments (tuning if needed)."""
        from tilelang.engine.lower import normalize_target

        problem = _problem(self._target, self._configs, self._jit_args, args, kwargs, self._do_not_specialize)
        key = _tuning_key(problem, self._profile, normalize_target(problem.compile_args.target))
        cached = self._tuner_cache.get(key) if key is not None else None
        if cached is not None and not self._force:
            return _for_call(cached, problem)
        result = _tune(problem, self._profile, self._runner, self._force)
        if key is not None:
            self._tuner_cache[key] = result
        return result


class _TunerCache(dict):
    """``AutotunedFactory._tuner_cache``: a dict whose ``clear()`` also forgets the factory's kernels."""

    def __init__(self, on_clear):
        super().__init__()
        self._on_clear = on_clear

    def clear(self) -> None:
        super().clear()
        self._on_clear()


def autotune(func=None, *, configs, warmup=25, rep=100, timeout=100, supply_type=TensorSupplyType.Auto,
             ref_prog=None, supply_prog=None, rtol=0.01, atol=0.01, max_mismatched_ratio=0.01, skip_check=False,
             manual_check_prog=None, cache_input_tensors=False, do_not_specialize=None, early_stop=False,
             early_stop_factor=2.0, force_retune=False, _runner=None):
    """Decorate a kernel factory (usually a ``@tilelang.jit`` one) to tune it over ``configs``.

    ``configs``: a list of keyword dicts, a dict of value lists (their product), or a callable
    taking the factory's arguments and returning either.  Arguments the caller passes are
    fixed, not tuned.  ``warmup``/``rep``: timing budgets in ms per config (as ``do_bench``);
    ``timeout``: seconds allowed to compile one config.  With ``ref_prog`` (and not
    ``skip_check``) each config's outputs must match it on the same inputs, within
    ``atol``/``rtol`` for all but ``max_mismatched_ratio`` of the elements, or
    ``manual_check_prog(outputs, ref_outputs)`` decides.  Inputs come from ``supply_prog(params)``
    or are generated per ``supply_type``, once per run (``cache_input_tensors`` is accepted for
    upstream code; inputs are always shared).  ``do_not_specialize``: argument names left out of the
    tuning key (the winner is reused, recompiled, for other values).  ``early_stop``: configs
    whose short probe is over ``early_stop_factor`` x the best so far are not timed in full.
    ``force_retune`` (or ``TILELANG_AUTOTUNE_FORCE=1``) ignores results stored on disk.
    ``_runner`` (for tests) replaces ``GpuRunner``: an object with its four methods.
    """
    profile = ProfileArgs(warmup, rep, timeout, supply_type, ref_prog, supply_prog, rtol, atol,
                          max_mismatched_ratio, skip_check, manual_check_prog, cache_input_tensors, early_stop,
                          early_stop_factor)

    def wrap(target):
        return AutotunedFactory(target, configs, profile, do_not_specialize, force_retune, _runner)

    if func is not None:
        return wrap(func)
    return wrap
