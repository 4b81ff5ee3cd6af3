"""Running compiled configs on the GPU: inputs, the correctness check, timing.

A runner is what the tuning loop asks to measure a kernel; tests replace ``GpuRunner`` with a
fake one (same four methods) so the whole loop runs on a machine without a GPU.

Contract (``GpuRunner(profile)``, ``profile`` a ``ProfileArgs``):
- ``require()``: raises ``AutotuneError`` (a plain message, no traceback from torch) when
  torch or a CUDA device is missing.
- Inputs are made once per run for each distinct kernel signature (all the configs of a
  factory usually share one) and reused by every config and by the reference: from
  ``set_autotune_inputs(...)`` when active, else ``supply_prog(input_params)``, else the
  generator of ``tilelang.utils.tensor.get_tensor_supply(supply_type)`` (for ``Auto``: uniform
  in [-1, 1) for 16- and 32-bit floats, small integers otherwise).  Outputs are
  allocated once by a first call, so no allocation is timed (a kernel without ``out_idx`` is
  timed on the shared inputs themselves, which it may overwrite).  A kernel whose inputs
  cannot be generated (symbolic dims, scalar params) is an ``AutotuneError`` asking for
  ``supply_prog`` or ``set_autotune_inputs``.
- ``check(kernel, config)``: nothing without ``ref_prog`` or with ``skip_check``.  Otherwise
  it runs the kernel on clones of the inputs and ``ref_prog`` on other clones (the reference
  once per signature) and compares each output as ``Profiler.assert_allclose`` does (outputs
  are the ``out_idx`` results, else the last tensor parameter), except that up to
  ``max_mismatched_ratio`` of the elements may lie outside ``atol + rtol * |ref|``;
  ``manual_check_prog(outputs, ref_outputs)`` replaces the comparison when given.  A mismatch
  raises AssertionError with a one-line message.
- ``bench(kernel, config, warmup, rep) -> ms``: ``tilelang.profiler.do_bench`` (with the profile's
  timing ``backend``) of one call with every argument preallocated.  ``ref_latency(warmup, rep)``: the same for ``ref_prog`` on the
  first inputs made (None without ``ref_prog``).
"""

from __future__ import annotations

from tilelang.autotuner.capture import get_autotune_inputs
from tilelang.profiler import compare_output, kernel_outputs


class AutotuneError(RuntimeError):
    """Tuning cannot run or produced nothing usable; the message says why."""


class AutotuneInputError(AutotuneError, ValueError):
    """Tuning cannot make the kernel's inputs (e.g. a scalar parameter): a ValueError, as upstream's."""


class GpuRunner:
    """Checks and times kernels on torch's current CUDA device."""

    def __init__(self, profile):
        self.profile = profile
        self._inputs: dict = {}  # signature -> input list
        self._outputs: dict = {}  # (signature, kernel id) -> full argument list
        self._refs: dict = {}  # signature -> reference outputs
        self._first = None

    def require(self) -> None:
        try:
            import torch
        except ImportError as e:
            raise AutotuneError(f"tuning needs torch with a CUDA GPU, and torch failed to import: {e}") from None
        if not torch.cuda.is_available():
            raise AutotuneError("tuning needs a CUDA GPU, and torch.cuda.is_available() is False on this machine "
                                "(no device, or no driver). Tuning results stored by an earlier run are used "
                                "without a GPU, and calls that fix every tuned argument compile without tuning.")

    # ------------------------------------------------------------ inputs
    def inputs(self, kernel) -> list:
        sig = _signature(kernel)
        if sig not in self._inputs:
            self._inputs[sig] = self._make_inputs(kernel)
            if self._first is None:
                self._first = sig
        return self._inputs[sig]

    def _make_inputs(self, kernel) -> list:
        from tilelang.profiler import Profiler

        captured = get_autotune_inputs()
        if captured is not None:
            return list(captured)
        outs = set(kernel.out_idx)
        if self.profile.supply_prog is not None:
            return list(self.profile.supply_prog([p for i, p in enumerate(kernel.params) if i not in outs]))
        try:
            return Profiler(kernel, tensor_supply_type=self.profile.supply_type).make_args()
        except ValueError as e:
            raise AutotuneInputError(f"cannot make inputs for {kernel.name}: {e}. Give autotune(supply_prog=...) or "
                                "run inside `with tilelang.autotuner.set_autotune_inputs(a, b, ...)`") from None

    def _full_args(self, kernel) -> list:
        key = (_signature(kernel), id(kernel))
        if key not in self._outputs:
            inputs = self.inputs(kernel)
            if not kernel.out_idx:
                self._outputs[key] = list(inputs)
            else:
                result = kernel(*inputs)
                outs = dict(zip(kernel.out_idx, _as_list(result)))
                it = iter(inputs)
                self._outputs[key] = [outs[i] if i in outs else next(it) for i in range(len(kernel.params))]
        return self._outputs[key]

    # ------------------------------------------------------------ checking
    def check(self, kernel, config) -> None:
        profile = self.profile
        if profile.ref_prog is None or profile.skip_check:
            return
        sig = _signature(kernel)
        inputs = self.inputs(kernel)
        args = _clones(inputs)
        names, got = kernel_outputs(kernel, args, kernel(*args))
        if sig not in self._refs:
            self._refs[sig] = _as_list(profile.ref_prog(*_clones(inputs)))
        expected = self._refs[sig]
        if profile.manual_check_prog is not None:
            profile.manual_check_prog(got, expected)
            return
        if len(expected) != len(got):
            raise AssertionError(f"ref_prog returned {len(expected)} tensors, the kernel has {len(got)} outputs "
                                 f"({', '.join(names)})")
        for name, g, e in zip(names, got, expected):
            compare(name, g, e, profile.atol, profile.rtol, profile.max_mismatched_ratio)

    # ------------------------------------------------------------ timing
    def bench(self, kernel, config, warmup: float, rep: float) -> float:
        from tilelang.profiler.bench import do_bench

        args = self._full_args(kernel)
        return do_bench(lambda: kernel(*args), warmup=warmup, rep=rep, backend=self.profile.backend)

    def ref_latency(self, warmup: float, rep: float) -> float | None:
        from tilelang.profiler.bench import do_bench

        ref = self.profile.ref_prog
        if ref is None or self._first is None:
            return None
        inputs = self._inputs[self._first]
        return do_bench(lambda: ref(*inputs), warmup=warmup, rep=rep, backend=self.profile.backend)


def _signature(kernel) -> tuple:
    return (tuple((p.name, p.kind, p.dtype, tuple(map(str, p.shape)), None if p.strides is None
                   else tuple(map(str, p.strides))) for p in kernel.params), tuple(kernel.out_idx))


def _as_list(result) -> list:
    if result is None:
        return []
    if isinstance(result, (list, tuple)):
        return list(result)
    return [result]


def _clones(values: list) -> list:
    return [v.clone() if hasattr(v, "clone") else v for v in values]


def compare(name: str, got, expected, atol: float, rtol: float, max_mismatched_ratio: float) -> None:
    """AssertionError unless at most ``max_mismatched_ratio`` of the elements differ beyond tolerance."""
    compare_output(name, got, expected, atol, rtol, max_mismatched_ratio, against="ref_prog")
