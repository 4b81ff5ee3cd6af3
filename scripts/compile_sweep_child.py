"""One example module of a compile sweep (scripts/compile_sweep.py runs this in a fresh process).

  python scripts/compile_sweep_child.py MODULE.py OUT.json MODE [MAX]

Works with whichever ``tilelang`` is importable (ours, or upstream's with its site folder first on
PYTHONPATH), on a machine without a GPU. Before the module is imported, ``tilelang.jit`` and
``tilelang.autotune`` are replaced by recorders and torch's ``device="cuda"`` tensor factories make
CPU tensors (``torch.cuda`` helpers the examples call answer as an H200 would), so the module's
``main()`` runs up to its first kernel launch. Each call of a kernel factory then also compiles
variants of that call, each to a cubin, and records ``ok`` or the error:

- ``configs``: the ``@autotune`` configs (up to MAX, spread over the list) and, for factories with
  tile parameters (block_M, block_N, block_K, num_stages, threads, ...), up to MAX combinations of
  the values users tune them over;
- ``sizes``: the call with its problem sizes (M, N, K, seq_len, ...) made odd (1024 -> 875) or 8
  larger, one at a time and all together; an eager factory's tensors remade with every dimension
  of 64 or more changed the same way;
- ``dtypes``: the call with float16 and bfloat16 parameters swapped.

A variant that compiles and then fails to launch (no GPU here) counts as compiled. Results go to
OUT.json as a list of {kind, factory, variant, args, ok, error, traceback, seconds}.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import json
import os
import random
import runpy
import sys
import time
import traceback

TILE_KNOBS = {"block_M": [32, 64, 128, 256], "block_N": [32, 64, 128, 256], "block_K": [32, 64, 128],
              "num_stages": [0, 1, 2, 3, 4], "threads": [128, 256], "thread_num": [128, 256],
              "block_H": [16, 32, 64]}
SIZE_NAMES = {"M", "N", "K", "m", "n", "k", "seq_len", "seqlen", "seq_q", "seq_kv", "seqlen_q", "seqlen_kv",
              "seq_len_kv", "kv_seqlen", "seqlen_k", "seq_k", "Q_CTX", "KV_CTX", "N_CTX"}
DTYPE_NAMES = {"dtype", "in_dtype", "out_dtype", "input_dtype", "output_dtype", "a_dtype", "b_dtype", "c_dtype",
               "q_dtype", "kv_dtype", "o_dtype"}
# a compiled kernel that could not launch on this machine (ours' message, then upstream's)
LAUNCH_ERRORS = ("no CUDA device", "NoCudaError", "Failed to get device properties", "NVIDIA driver",
                 "allocator anchor has the wrong device type", "Torch not compiled with CUDA", "CUDA is not available")


def _cuda_to_cpu() -> None:
    """torch's CUDA entry points the examples use before their first launch, answered on the CPU."""
    import torch

    def on_cuda(device) -> bool:
        return device is not None and str(device).startswith("cuda")

    def cpu_factory(make):
        @functools.wraps(make)
        def wrapper(*args, **kwargs):
            if on_cuda(kwargs.get("device")):
                kwargs["device"] = "cpu"
            return make(*args, **kwargs)
        return wrapper

    for name in ("randn", "rand", "zeros", "ones", "empty", "full", "arange", "tensor", "randint", "randn_like",
                 "rand_like", "zeros_like", "ones_like", "empty_like", "full_like", "randint_like", "linspace",
                 "eye", "randperm", "empty_strided", "as_tensor", "normal", "multinomial"):
        if hasattr(torch, name):
            setattr(torch, name, cpu_factory(getattr(torch, name)))
    to = torch.Tensor.to

    def to_cpu(self, *args, **kwargs):
        args = tuple("cpu" if on_cuda(a) and not isinstance(a, torch.dtype) else a for a in args)
        if on_cuda(kwargs.get("device")):
            kwargs["device"] = "cpu"
        return to(self, *args, **kwargs)

    torch.Tensor.to = to_cpu
    torch.Tensor.cuda = lambda self, *a, **k: self
    answers = {"synchronize": None, "get_device_capability": (9, 0), "current_device": 0,
               "get_device_name": "NVIDIA H200", "manual_seed": None, "manual_seed_all": None,
               "set_device": None, "empty_cache": None}
    for name, value in answers.items():
        setattr(torch.cuda, name, lambda *a, _v=value, **k: _v)


def _first_line(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    lines = [ln for ln in text.splitlines() if ln.strip()]
    picked = next((ln for ln in lines if "error" in ln.lower() and len(ln) > 20), lines[0] if lines else text)
    return picked[:400]


def _spread(items: list, most: int) -> list:
    """(index, item) for at most ``most`` items spread evenly over ``items``."""
    if len(items) <= most:
        return list(enumerate(items))
    step = (len(items) - 1) / (most - 1)
    return [(i, items[i]) for i in sorted({round(j * step) for j in range(most)})]


def _expand(configs, args, kwargs) -> list[dict]:
    if callable(configs):
        try:
            configs = configs(*args, **kwargs)
        except TypeError:
            configs = configs()
    if isinstance(configs, dict):
        keys = list(configs)
        return [dict(zip(keys, v)) for v in itertools.product(*(configs[k] for k in keys))]
    return [dict(c) for c in configs or []]


class Sweep:
    """Records what each variant of each factory call compiles to (one list per process)."""

    def __init__(self, mode: str, most: int, out: str):
        self.mode, self.most, self.out = mode, most, out
        self.records: list[dict] = []
        self.seen: set = set()

    def save(self) -> None:
        with open(self.out, "w") as f:
            json.dump(self.records, f, indent=1)

    def compile(self, kind: str, factory: str, variant: str, build) -> None:
        import tilelang

        t0 = time.time()
        rec = {"kind": kind, "factory": factory, "variant": variant}
        try:
            kernel = build()
            if not hasattr(kernel, "get_kernel_source"):     # a factory returning a prim_func
                kernel = tilelang.compile(kernel)
            kernel.get_kernel_source()
            if hasattr(kernel, "ensure_cubin"):              # ours builds its cubin at first launch
                kernel.ensure_cubin()
            rec["ok"] = True
        except Exception as e:  # noqa: BLE001 - every failure is a result here
            text = _first_line(e)
            rec["ok"] = any(t in text for t in LAUNCH_ERRORS)
            if not rec["ok"]:
                rec.update(error=text, traceback=traceback.format_exc()[-4000:])
        rec["seconds"] = round(time.time() - t0, 1)
        self.records.append(rec)
        self.save()
        print(("OK  " if rec["ok"] else "ERR ") + f"{factory} {variant} {rec.get('error', '')}", flush=True)


def _describe(kw: dict) -> str:
    def text(v):
        shape = getattr(v, "shape", None)
        return f"tensor{list(shape)}" if shape is not None and not isinstance(v, (int, float, str)) else v
    return ", ".join(f"{k}={text(v)}" for k, v in kw.items()
                     if isinstance(v, (int, float, str)) or "dtype" in k or hasattr(v, "shape"))


class Recorder:
    """Stands for a ``@tilelang.jit`` factory (``tuned`` None) or an ``@autotune`` one."""

    def __init__(self, sweep: Sweep, inner, raw, name: str, tuned=None):
        self.__dict__.update(_sweep=sweep, _inner=inner, _raw=raw, _name=name, _tuned=tuned)
        functools.update_wrapper(self, raw)

    def __getattr__(self, attr):
        return getattr(self.__dict__["_inner"], attr)

    def _compiler(self):
        """The real jit factory (beneath an autotune recorder: the jit recorder's)."""
        inner = self._inner
        return inner.__dict__["_inner"] if isinstance(inner, Recorder) else inner

    def __call__(self, *args, **kwargs):
        sweep = self._sweep
        try:
            bound = inspect.signature(self._raw).bind_partial(*args, **kwargs).arguments
        except TypeError:
            return self._inner(*args, **kwargs)
        if sweep.mode == "configs":
            self._configs(dict(bound), args, kwargs)
        elif self._tuned is None:
            variants = _sizes(bound) if sweep.mode == "sizes" else _dtypes(bound)
            key = (self._name, sweep.mode)
            if key not in sweep.seen:
                sweep.seen.add(key)
                for label, kw in variants:
                    sweep.compile(sweep.mode[:-1], self._name, f"{label}: {_describe(kw)}",
                                  lambda kw=kw: self._compiler()(**kw))
        if self._tuned is not None:
            first = next(iter(_expand(self._tuned, args, kwargs)), {})
            if not set(first) <= set(bound):
                kwargs = {**first, **kwargs}   # a call left to the tuner: its first config
        return self._inner(*args, **kwargs)

    def _configs(self, bound: dict, args, kwargs) -> None:
        sweep = self._sweep
        if self._tuned is not None:
            configs, kind = _expand(self._tuned, args, kwargs), "autotune"
        else:
            names = [p for p in inspect.signature(self._raw).parameters if p in TILE_KNOBS]
            product = [dict(zip(names, v)) for v in itertools.product(*(TILE_KNOBS[n] for n in names))]
            configs, kind = random.Random(self._name).sample(product, min(sweep.most, len(product))), "knob"
        tuned = set().union(*map(set, configs)) if configs else set()
        fixed = {k: v for k, v in bound.items() if k not in tuned}
        key = (kind, self._name, repr(sorted((k, repr(v)) for k, v in fixed.items())))
        if not configs or key in sweep.seen:
            return
        sweep.seen.add(key)
        for index, config in _spread(configs, sweep.most):
            sweep.compile(kind, self._name, f"#{index}/{len(configs)}: {_describe(config)}",
                          lambda c=config: self._compiler()(**fixed, **c))


def _odd(v: int) -> int:
    return v - v // 7 - 3          # 1024 -> 875: a multiple of no tile


def _sizes(bound: dict) -> list:
    tensors = _tensor_sizes(bound)
    if tensors:
        return tensors
    names = [k for k, v in bound.items()
             if k in SIZE_NAMES and isinstance(v, int) and not isinstance(v, bool) and v >= 64]
    if not names:
        return []
    odd = {n: _odd(bound[n]) for n in names}
    out = [("all odd", {**bound, **odd})] if len(names) > 1 else []
    for n in names:
        out += [(f"{n} odd", {**bound, n: odd[n]}), (f"{n} + 8", {**bound, n: bound[n] + 8})]
    return out


def _tensor_sizes(bound: dict) -> list:
    """An eager factory's call (tensors in, sizes read off them): every tensor remade with each of
    its dimensions of 64 or more changed by one function of the size (odd, or 8 larger), so
    dimensions equal across tensors stay equal (A's K and B's K)."""
    import torch

    if not any(isinstance(v, torch.Tensor) for v in bound.values()):
        return []

    def remade(change):
        def one(v):
            if not isinstance(v, torch.Tensor):
                return v
            shape = [change(d) if d >= 64 else d for d in v.shape]
            return torch.zeros(shape, dtype=v.dtype)
        return {k: one(v) for k, v in bound.items()}

    return [("tensor sizes odd", remade(_odd)), ("tensor sizes + 8", remade(lambda d: d + 8))]


def _dtypes(bound: dict) -> list:
    import tilelang.language as T

    swap = {"float16": "bfloat16", "bfloat16": "float16"}
    kw = {k: (swap[str(v)] if isinstance(v, str) else getattr(T, swap[str(v)]))
          if k in DTYPE_NAMES and str(v) in swap else v for k, v in bound.items()}
    return [("float16 <-> bfloat16", kw)] if kw != bound else []


def main(argv: list[str]) -> int:
    module, out, mode = argv[:3]
    most = int(argv[3]) if len(argv) > 3 else 6
    sweep = Sweep(mode, most, out)
    sweep.save()
    _cuda_to_cpu()
    import tilelang
    import tilelang.autotuner as autotuner

    real_jit = tilelang.jit

    def jit(func=None, **options):
        def wrap(fn):
            return Recorder(sweep, real_jit(**options)(fn), fn, fn.__name__)
        return wrap(func) if func is not None else wrap

    def autotune(func=None, *, configs=None, **_):
        def wrap(fn):
            raw = fn.__dict__["_raw"] if isinstance(fn, Recorder) else fn
            return Recorder(sweep, fn, raw, raw.__name__, tuned=configs)
        return wrap(func) if func is not None else wrap

    tilelang.jit, tilelang.autotune, autotuner.autotune = jit, autotune, autotune
    folder = os.path.dirname(os.path.abspath(module))
    sys.path.insert(0, folder)
    os.chdir(folder)
    sys.argv = [module]
    try:
        namespace = runpy.run_path(module, run_name="compile_sweep")
        if callable(namespace.get("main")):
            namespace["main"]()
    except BaseException as e:  # noqa: BLE001 - the module stops at its first launch, or earlier
        print("main stopped:", _first_line(e), flush=True)
    sweep.save()
    print(f"variants {len(sweep.records)} failed {sum(not r['ok'] for r in sweep.records)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
