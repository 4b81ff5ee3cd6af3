"""Autotune configs may carry their own ``pass_configs`` (upstream's per-config compile option):
merged over the run's pass configs, never passed to the factory (issue 17)."""

import io
import sys
from contextlib import redirect_stderr
from pathlib import Path

import pytest

import tilelang
from tilelang.autotuner import AutoTuner, ConfigTypeError
from tilelang.transform.pass_config import PassConfigKey

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "autotune"))
import autotune_kernels as ak  # noqa: E402

FAST = {PassConfigKey.TL_ENABLE_FAST_MATH: True}


@pytest.fixture(autouse=True)
def fake_nvcc(isolated_autotune, monkeypatch):
    from tilelang.jit import nvcc

    monkeypatch.setattr(nvcc, "compile_cubin", lambda source, arch, flags=(), include_dirs=(): b"\x7fELF fake")


def _kernel(block_M=None, block_K=None):
    return ak.gemm_factory(256, 256, 256, block_M=block_M, block_N=64, block_K=block_K, num_stages=2)


def test_per_config_pass_configs_reach_the_compile_of_that_config_only():
    configs = [dict(block_M=64, block_K=32, pass_configs=FAST), dict(block_M=128, block_K=32)]
    runner = ak.FakeRunner(latency=lambda c: 1.0 if "pass_configs" in c else 2.0)
    tuner = AutoTuner.from_kernel(kernel=_kernel, configs=configs).set_compile_args(
        out_idx=[-1], pass_configs={PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL: 7})
    tuner._runner = runner
    with redirect_stderr(io.StringIO()):
        result = tuner.run(warmup=1, rep=3)
    assert result.config == configs[0]
    flags = result.kernel.compile_flags
    assert "--use_fast_math" in flags and "--ptxas-options=--register-usage-level=7" in flags
    by_config = {r.config["block_M"]: r for r in result.results}
    assert by_config[128].latency == 2.0 and by_config[128].error is None


def test_decorator_form_with_jit_pass_configs_and_upstreams_return_kernel_flag():
    configs = [dict(block_M=64, block_K=32), dict(block_M=64, block_K=64, pass_configs=FAST)]
    runner = ak.FakeRunner(latency=lambda c: c["block_K"] / 1e3)   # the config without overrides wins
    matmul = tilelang.autotune(configs=configs, _runner=runner)(
        tilelang.jit(out_idx=[-1], pass_configs={PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})(ak.gemm_factory))
    with redirect_stderr(io.StringIO()):
        kernel = matmul(256, 256, 256, __return_kernel=True)
    assert kernel.config == configs[0] and "--use_fast_math" not in kernel.compile_flags


def test_a_malformed_per_config_pass_configs_is_refused():
    tuner = AutoTuner.from_kernel(kernel=_kernel, configs=[dict(block_M=64, block_K=32, pass_configs=[1])])
    tuner._runner = ak.FakeRunner()
    with pytest.raises(ConfigTypeError, match="pass_configs"):
        tuner.run()


def test_the_timing_backend_reaches_do_bench(monkeypatch):
    from tilelang.autotuner import GpuRunner
    from tilelang.profiler import bench

    tuner = AutoTuner.from_kernel(kernel=_kernel, configs=[dict(block_M=64, block_K=32)])
    assert tuner.set_profile_args(backend="cupti").profile_args.backend == "cupti"
    with pytest.raises(ValueError, match="timing backend"):
        tuner.set_profile_args(backend="nvtx")
    seen = []
    monkeypatch.setattr(bench, "do_bench", lambda fn, warmup, rep, backend="event": seen.append(backend) or 0.5)
    runner = GpuRunner(tuner.profile_args)
    monkeypatch.setattr(runner, "_full_args", lambda kernel: [])
    assert runner.bench(lambda: None, {}, 1, 2) == 0.5 and seen == ["cupti"]
