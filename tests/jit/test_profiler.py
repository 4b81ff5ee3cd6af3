"""Profiler input generation and comparison, with a CPU stand-in for a kernel."""

import pytest
import torch

from tilelang.artifact import ParamSpec
from tilelang.profiler import Profiler, do_bench


class CpuAxpy:
    """Looks like a JITKernel (params, out_idx, __call__) but computes on the CPU."""

    def __init__(self, out_idx=(2,), wrong=False):
        self.params = [ParamSpec("x", "tensor", "float16", ["N", 4]),
                       ParamSpec("y", "tensor", "float16", ["N", 4]),
                       ParamSpec("out", "tensor", "float32", ["N", 4]),
                       ParamSpec("alpha", "scalar", "float32", []),
                       ParamSpec("idx", "tensor", "int32", [8], [2])]
        self.out_idx = list(out_idx)
        self.wrong = wrong
        self.seen = []

    def __call__(self, *args):
        self.seen.append(args)
        if len(args) == 4:
            x, y, alpha, idx = args
            out = torch.empty(x.shape, dtype=torch.float32)
        else:
            x, y, out, alpha, idx = args
        out.copy_(alpha * x.float() + y.float() + (1 if self.wrong else 0))
        return out if self.out_idx else None


def reference(x, y, alpha, idx):
    return alpha * x.float() + y.float()


def test_make_args_follows_param_specs():
    prof = Profiler(CpuAxpy())
    args = prof.make_args({"N": 3, "alpha": 2.0})
    x, y, alpha, idx = args
    assert x.shape == (3, 4) and x.dtype == torch.float16 and alpha == 2.0
    assert idx.dtype == torch.int32 and idx.stride() == (2,) and int(idx.min()) >= -8 and int(idx.max()) < 8
    full = prof.make_args({"N": 3, "alpha": 2.0}, with_outputs=True)
    assert len(full) == 5 and full[2].shape == (3, 4) and full[2].dtype == torch.float32


def test_missing_symbol_or_scalar_is_named():
    prof = Profiler(CpuAxpy())
    with pytest.raises(ValueError, match=r"needs values for \['N'\]"):
        prof.make_args({"alpha": 1.0})
    with pytest.raises(ValueError, match="scalar parameter 'alpha' needs a value"):
        prof.make_args({"N": 2})


def test_assert_allclose_passes_and_fails():
    Profiler(CpuAxpy()).assert_allclose(reference, symbols={"N": 5, "alpha": 0.5})
    with pytest.raises(AssertionError, match="output .out.: 20 of 20 elements \\(100.00%\\) differ from the reference"):
        Profiler(CpuAxpy(wrong=True)).assert_allclose(reference, symbols={"N": 5, "alpha": 0.5})


def test_assert_allclose_max_mismatched_ratio():
    def ref_one_off(x, y, alpha, idx):
        out = alpha * x.float() + y.float()
        out[0, 0] += 1          # 1 of 40 elements (2.5 %) disagrees
        return out

    prof = Profiler(CpuAxpy())
    prof.assert_allclose(ref_one_off, symbols={"N": 10, "alpha": 0.5}, max_mismatched_ratio=0.05)
    with pytest.raises(AssertionError, match=r"1 of 40 elements \(2.50%\) differ .*2.50% > max_mismatched_ratio 0.01"):
        prof.assert_allclose(ref_one_off, symbols={"N": 10, "alpha": 0.5}, max_mismatched_ratio=0.01)
    with pytest.raises(AssertionError, match=r"2.50% > max_mismatched_ratio 0.01"):   # upstream's default
        prof.assert_allclose(ref_one_off, symbols={"N": 10, "alpha": 0.5})
    with pytest.raises(AssertionError, match="differs from the reference"):
        prof.assert_allclose(ref_one_off, symbols={"N": 10, "alpha": 0.5}, max_mismatched_ratio=0)


def test_assert_allclose_in_place_kernel():
    kernel = CpuAxpy(out_idx=())

    def ref(x, y, out, alpha, idx):
        return alpha * x.float() + y.float()

    Profiler(kernel).assert_allclose(ref, symbols={"N": 2, "alpha": 1.0}, outputs=[2])


def test_reference_gets_clones():
    kernel = CpuAxpy()
    seen = {}

    def ref(x, y, alpha, idx):
        seen["x"] = x
        return alpha * x.float() + y.float()

    Profiler(kernel).assert_allclose(ref, symbols={"N": 2, "alpha": 1.0})
    assert seen["x"] is not kernel.seen[0][0] and torch.equal(seen["x"], kernel.seen[0][0])


def test_tensor_supply_override():
    prof = Profiler(CpuAxpy(), tensor_supply=lambda shape, dtype, device: torch.ones(shape, dtype=dtype))
    x, y, alpha, idx = prof.make_args({"N": 1, "alpha": 1.0})
    assert torch.all(x == 1) and torch.all(idx == 1)


def test_do_bench_without_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="^no CUDA device"):
        do_bench(lambda: None)


def test_tensor_supply_types_upstream_names():
    import torch

    import tilelang
    from tilelang.profiler import _supply_for

    assert tilelang.TensorSupplyType.Normal.name == "Normal"
    zeros = _supply_for(tilelang.TensorSupplyType.Zero)((2, 3), torch.float16, "cpu")
    assert zeros.dtype == torch.float16 and not zeros.any()
    ones = _supply_for(tilelang.TensorSupplyType.One)((4,), torch.float32, "cpu")
    assert ones.sum().item() == 4
    ints = _supply_for(tilelang.TensorSupplyType.Integer)((64,), torch.float32, "cpu")
    assert (ints == ints.round()).all()
