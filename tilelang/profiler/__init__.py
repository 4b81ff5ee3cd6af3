"""Profiler: run, time and check a JITKernel on generated inputs.

Contract:
- ``Profiler(kernel, tensor_supply=None, tensor_supply_type=None)``; inputs are
  generated from the kernel's ParamSpecs with upstream's default
  ``TensorSupplyType.Auto``: uniform in [-1, 1) for float16/bfloat16/float32,
  small integers otherwise (float8 from int8 values, bools 0/1).  Symbolic
  dims and scalar parameters take their values from the ``symbols`` dict
  (e.g. ``{"M": 1024, "alpha": 0.5}``); a missing one is a ValueError naming
  it.  ``tensor_supply(shape, torch_dtype, device) -> Tensor`` replaces the
  random generator.
- ``make_args(symbols, with_outputs)``: the argument list (outputs included and
  allocated empty when ``with_outputs``; otherwise only inputs when the kernel
  has out_idx).
- ``run_once(symbols=None)``: one call on fresh inputs; returns its result.
- ``do_bench(func=None, warmup=25, rep=100, n_warmup=0, n_repeat=0, input_tensors=None,
  backend="event", quantiles=None, return_mode="median", ...)`` (upstream's order; ``symbols=``):
  ms per call of ``func`` (default: the kernel with all arguments preallocated,
  so no allocation is timed).
- ``assert_allclose(reference_program, input_tensors=None, atol=1e-2, rtol=1e-2,
  max_mismatched_ratio=0.01, *, symbols=None, outputs=None)``: runs the kernel and
  ``reference_program`` on the same inputs (generated, or ``input_tensors``; the reference gets
  clones) and compares each output; with no
  out_idx the kernel writes in place and ``outputs`` (default: the last tensor
  param) says which params to compare against the reference's return values;
  up to ``max_mismatched_ratio`` of the elements may lie outside the tolerance
  (upstream's rule; 0 or None: every element must match).
- Upstream's other names: ``adapter`` (the kernel), ``with_default_adapter``, ``params``,
  ``result_idx``, ``supply_type``, ``_get_inputs``, ``assert_consistent(repeat)`` (same outputs
  on every run), ``manual_assert_close(ref, input_tensors, manual_check_prog)``.
"""

from __future__ import annotations

from tilelang.profiler.bench import _torch, do_bench
# compare_output lives with the tensor helpers (torch_assert_close shares it); the autotuner imports it here.
from tilelang.utils.tensor import TensorSupplyType, compare_output, get_tensor_supply  # noqa: F401

__all__ = ["Profiler", "TensorSupplyType", "do_bench"]


def _supply_for(kind):
    """The generator for ``tensor_supply_type`` (None: upstream's default, ``Auto``)."""
    return get_tensor_supply(TensorSupplyType.Auto if kind is None else kind)


class Profiler:
    def __init__(self, kernel, tensor_supply=None, tensor_supply_type=None):
        if isinstance(tensor_supply, TensorSupplyType):   # upstream's get_profiler(TensorSupplyType.X)
            tensor_supply, tensor_supply_type = None, tensor_supply
        self.kernel = kernel
        self.tensor_supply_type = TensorSupplyType.Auto if tensor_supply_type is None else tensor_supply_type
        self.tensor_supply = tensor_supply or _supply_for(tensor_supply_type)

    @property
    def func(self):
        """The kernel being profiled (upstream's ``profiler.func``: ``do_bench(profiler.func)``)."""
        return self.kernel

    # upstream's names for what the profiler works on
    adapter = func

    def with_default_adapter(self, adapter) -> "Profiler":
        """Profile ``adapter`` (a kernel) from now on (upstream's method)."""
        self.kernel = adapter
        return self

    @property
    def params(self) -> list:
        return self.kernel.params

    @property
    def result_idx(self) -> list[int]:
        return self.kernel.out_idx

    @property
    def supply_type(self):
        return self.tensor_supply_type

    def _get_inputs(self, with_output=False, dynamic_symbolic_constraints=None) -> list:
        """Generated arguments: the inputs (with ``with_output``, every parameter)."""
        return self.make_args(dynamic_symbolic_constraints, with_outputs=with_output)

    def assert_consistent(self, repeat: int = 10) -> None:
        """Run the kernel ``repeat`` more times on the same inputs and require the same outputs
        each time (a race shows as a difference)."""
        torch = _torch()
        args = self.make_args()
        first = [t.clone() for t in kernel_outputs(self.kernel, args, self.kernel(*args))[1]]
        for _ in range(repeat):
            names, got = kernel_outputs(self.kernel, args, self.kernel(*args))
            for name, a, b in zip(names, got, first):
                if not torch.equal(a, b):
                    raise AssertionError(f"output {name!r} differs between two runs on the same inputs")

    def manual_assert_close(self, reference_program, input_tensors=None, manual_check_prog=None) -> None:
        """Run the kernel and ``reference_program`` on the same inputs, then
        ``manual_check_prog(kernel_outputs, reference_outputs)`` (upstream's method)."""
        if manual_check_prog is None:
            raise ValueError("manual_assert_close needs manual_check_prog(outputs, reference_outputs)")
        _, got, expected = self._run_both(reference_program, input_tensors)
        manual_check_prog(got, expected)

    def _run_both(self, reference_program, input_tensors=None, symbols=None, outputs=None):
        """(output names, the kernel's outputs, the reference's) on the same inputs: generated, or
        ``input_tensors``; the reference gets clones."""
        torch = _torch()
        args = list(input_tensors) if input_tensors is not None else self.make_args(symbols)
        ref_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        names, got = kernel_outputs(self.kernel, args, self.kernel(*args), outputs)
        expected = reference_program(*ref_args)
        expected = [expected] if isinstance(expected, torch.Tensor) else list(expected or [])
        return names, got, expected

    def __call__(self, *args):
        return self.kernel(*args)

    # ------------------------------------------------------------ inputs
    def _resolve(self, entries, symbols: dict, what: str) -> list[int]:
        missing = [e for e in entries if isinstance(e, str) and e not in symbols]
        if missing:
            raise ValueError(f"{what} needs values for {missing}: pass symbols={{{', '.join(repr(m) + ': ...' for m in missing)}}}")
        return [e if isinstance(e, int) else int(symbols[e]) for e in entries]

    def _make_param(self, i: int, symbols: dict, device, empty: bool):
        from tilelang.jit.adapter_args import torch_dtype

        torch = _torch()
        p = self.kernel.params[i]
        if p.kind == "scalar":
            if p.name not in symbols:
                raise ValueError(f"scalar parameter {p.name!r} needs a value: pass symbols={{{p.name!r}: ...}}")
            return symbols[p.name]
        shape = self._resolve(p.shape, symbols, f"parameter {p.name!r} shape {p.shape}")
        dtype = torch_dtype(p.dtype)
        if p.strides is None:
            return (torch.empty(shape, dtype=dtype, device=device) if empty
                    else self.tensor_supply(shape, dtype, device))
        strides = self._resolve(p.strides, symbols, f"parameter {p.name!r} strides {p.strides}")
        t = torch.empty_strided(shape, strides, dtype=dtype, device=device)
        if not empty:
            t.copy_(self.tensor_supply(shape, dtype, device))
        return t

    def make_args(self, symbols=None, with_outputs: bool = False, device=None) -> list:
        """Arguments for one call: all params if ``with_outputs`` or no out_idx, else inputs only."""
        torch = _torch()
        symbols = dict(symbols or {})
        if device is None:
            device = torch.cuda.current_device() if torch.cuda.is_available() else "cpu"
        outs = set(self.kernel.out_idx)
        args = []
        for i in range(len(self.kernel.params)):
            if i in outs and not with_outputs:
                continue
            args.append(self._make_param(i, symbols, device, empty=i in outs))
        return args

    # ------------------------------------------------------------ running
    def run_once(self, symbols=None):
        return self.kernel(*self.make_args(symbols))

    def do_bench(self, func=None, warmup: float = 25, rep: float = 100, n_warmup: int = 0, n_repeat: int = 0,
                 input_tensors=None, backend: str = "event", quantiles=None, return_mode: str = "median",
                 dynamic_symbolic_constraints=None, device=None, early_stop_baseline=None, *, fn=None,
                 symbols=None, **kwargs):
        """Milliseconds per call of the kernel (all arguments preallocated), or of ``func`` called
        with the kernel's generated inputs (upstream style: ``profiler.do_bench(ref_program)``),
        upstream's parameters in upstream's order. ``input_tensors`` are the inputs to use instead
        of generated ones; ``dynamic_symbolic_constraints`` (or ``symbols``) give the symbols'
        values; the rest go to ``tilelang.profiler.do_bench``."""
        fn = fn if fn is not None else func
        kwargs.update(backend=backend, quantiles=quantiles, device=device, early_stop_baseline=early_stop_baseline)
        if n_warmup:
            kwargs["_n_warmup"] = n_warmup
        if n_repeat:
            kwargs["_n_repeat"] = n_repeat
        if fn is self.kernel:    # do_bench(profiler.func): the kernel itself, on preallocated arguments
            fn = None
        symbols = {**(dynamic_symbolic_constraints or {}), **(symbols or {})}
        target = self.kernel if fn is None else fn
        if input_tensors is not None:
            args = list(input_tensors)
        elif fn is None:
            args = self.make_args(symbols, with_outputs=True)
        else:
            args = self.make_args(symbols)

        def call():
            target(*args)

        return do_bench(call, warmup=warmup, rep=rep, return_mode=return_mode, **kwargs)

    def assert_allclose(self, reference_program, input_tensors=None, atol: float = 1e-2, rtol: float = 1e-2,
                        max_mismatched_ratio=0.01, *, symbols=None, outputs=None) -> None:
        names, got, expected = self._run_both(reference_program, input_tensors, symbols, outputs)
        if len(expected) != len(got):
            raise AssertionError(f"reference returned {len(expected)} tensors, the kernel has {len(got)} "
                                 f"outputs ({names})")
        for name, g, e in zip(names, got, expected):
            compare_output(name, g, e, atol, rtol, max_mismatched_ratio)


def kernel_outputs(kernel, args, result, outputs=None) -> tuple[list, list]:
    """(names, tensors) of a kernel call's outputs: its ``out_idx`` results, else the parameters
    ``outputs`` names, else the last tensor parameter (written in place)."""
    params = kernel.params
    if kernel.out_idx and outputs is None:
        got = [] if result is None else list(result) if isinstance(result, (list, tuple)) else [result]
        return [params[i].name for i in kernel.out_idx], got
    if outputs is None:
        tensors = [i for i, p in enumerate(params) if p.kind == "tensor"]
        outputs = tensors[-1:]
    return [params[i].name for i in outputs], [args[i] for i in outputs]
