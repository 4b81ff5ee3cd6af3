"""Upstream's host-side API as its users' scripts call it (session 60's probe): the tuner record on
every kernel, ``pass_configs`` / ``execution_backend`` / ``host_source``, ``do_bench``'s keywords
and its wall-clock backend (no GPU needed), the profiler's upstream names and argument order,
``torch_assert_close``'s return value and keywords, the testing gates' keywords, ``tilelang.lower``
of an IRModule, the lazily imported submodules. CPU only."""

import sys
import time
from pathlib import Path

import pytest
import torch
import tvm

import tilelang
import tilelang.testing
from tilelang.profiler import Profiler, do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "jit"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "frontend"))
from test_profiler import CpuAxpy, reference  # noqa: E402
from test_user_kernel_forms_s60 import _bound_loop  # noqa: E402


def test_kernel_attributes_upstream_scripts_read():
    kernel = tilelang.compile(_bound_loop(128), target="sm_90a", pass_configs={"tl.disable_warp_specialized": True})
    assert kernel.config is None and kernel.latency is None and kernel.ref_latency is None
    assert kernel.update_tuner_result(0.5, {"a": 1}, 0.7) is kernel
    assert kernel.get_tuner_result() == {"latency": 0.5, "config": {"a": 1}, "ref_latency": 0.7}
    assert kernel.pass_configs == {"tl.disable_warp_specialized": True} and kernel.execution_backend == "auto"
    assert "launch" in kernel.host_source.lower() and kernel.adapter is kernel
    # (upstream fills these for HIP only; here from ptxas)
    assert kernel.n_regs > 0 and kernel.n_spills == 0 and kernel.n_max_threads == 128
    assert kernel.resource_usage[kernel.name].registers == kernel.n_regs


def test_do_bench_wall_clock_and_upstream_keywords():
    ms = do_bench(lambda: time.sleep(0.002), warmup=1, rep=20, backend="wall")
    assert 1.5 < ms < 50
    assert len(do_bench(lambda: None, backend="wall", device="cpu", quantiles=[0.5, 0.9], _n_repeat=5)) == 2
    # the 5-run estimate comes back at once past the baseline (upstream's early stop)
    assert do_bench(lambda: time.sleep(0.002), backend="wall", early_stop_baseline=0.1, rep=10_000) > 1.5
    assert do_bench(lambda: None, 1, 1, 2, 3, None, True, "wall", "min") >= 0    # upstream's positional order
    with pytest.raises(ValueError, match="use backend='wall'"):
        do_bench(lambda: None, device="cpu")


def test_profiler_names_and_argument_order():
    prof = Profiler(CpuAxpy())
    assert prof.params is prof.kernel.params and prof.result_idx == [2] and prof.adapter is prof.kernel
    assert prof.supply_type == tilelang.TensorSupplyType.Auto
    inputs = prof._get_inputs(dynamic_symbolic_constraints={"N": 3, "alpha": 2.0})
    assert len(inputs) == 4 and inputs[0].shape == (3, 4)
    prof.assert_allclose(reference, inputs, 1e-2, 1e-2)              # (ref, input_tensors, atol, rtol)
    prof.assert_allclose(reference, input_tensors=inputs, atol=1e-2)
    with pytest.raises(AssertionError):
        Profiler(CpuAxpy(wrong=True)).assert_allclose(reference, inputs)
    seen = []
    prof.manual_assert_close(reference, inputs, lambda got, ref: seen.append(torch.equal(got[0], ref[0])))
    assert seen == [True]
    assert prof.with_default_adapter(CpuAxpy()) is prof


def test_torch_assert_close_returns_true_and_takes_upstream_keywords():
    a = torch.ones(4, 4)
    assert tilelang.testing.torch_assert_close(a, a.clone(), check_layout=True, check_stride=True) is True
    with pytest.raises(AssertionError, match="strides"):
        tilelang.torch_assert_close(a, a.t().contiguous().t(), check_stride=True)


def test_testing_gates_take_upstream_keywords():
    for gate in (tilelang.testing.requires_cuda(), tilelang.testing.requires_cuda(support_required=True),
                 tilelang.testing.requires_cuda_compute_version_ge(major_version=9, minor_version=0)):
        def test():
            pass

        assert gate(test) is test and test.pytestmark[-1].name == "skipif"


def test_lower_takes_an_irmodule_and_upstream_keyword():
    f = _bound_loop(128)
    src = tilelang.lower(f, "sm_90a").source
    assert tilelang.lower(tvm.IRModule({"main": f}), "sm_90a").source == src
    assert tilelang.lower(func_or_mod=f, target="sm_90a").source == src


def test_submodules_reachable_after_import_tilelang():
    assert tilelang.carver.__name__ == "tilelang.carver" and tilelang.cuda.__name__ == "tilelang.cuda"
    with pytest.raises(AttributeError):
        tilelang.no_such_thing  # noqa: B018
