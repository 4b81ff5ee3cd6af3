"""With the cache off (TILELANG_DISABLE_CACHE=1, tilelang.disable_cache() or
TILELANG_AUTO_TUNING_DISABLE_CACHE=1, read at call time) AutoTuner.run reuses no result, from disk
or from this process: upstream's example_gemm_autotune_early_stop times a second tuning run."""

import io
import sys
from contextlib import redirect_stderr
from pathlib import Path

import pytest

from tilelang.autotuner import AutoTuner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import autotune_kernels as ak  # noqa: E402

CONFIGS = [dict(block_M=64, block_K=32), dict(block_M=128, block_K=32)]


@pytest.fixture(autouse=True)
def fake_nvcc(isolated_autotune, monkeypatch):
    from tilelang.jit import nvcc

    monkeypatch.setattr(nvcc, "compile_cubin", lambda source, arch, flags=(), include_dirs=(): b"\x7fELF fake")


def _kernel(block_M=None, block_K=None):
    return ak.gemm_factory(256, 256, 256, block_M=block_M, block_N=64, block_K=block_K, num_stages=2)


def _run(kernel_parameters=None, **kw):
    runner = ak.FakeRunner()
    tuner = AutoTuner.from_kernel(kernel=_kernel, configs=CONFIGS).set_compile_args(out_idx=[-1])
    if kernel_parameters is not None:
        assert tuner.set_kernel_parameters(*kernel_parameters) is tuner
    tuner._runner = runner
    with redirect_stderr(io.StringIO()):
        result = tuner.run(warmup=1, rep=3, **kw)
    return result, runner


def test_cache_on_reuses_the_first_run():
    first, r1 = _run()
    second, r2 = _run(early_stop=True)
    assert len(r1.benched) == 2 and r2.benched == [] and second.config == first.config


@pytest.mark.parametrize("var", ["TILELANG_DISABLE_CACHE", "TILELANG_AUTO_TUNING_DISABLE_CACHE"])
def test_cache_off_tunes_again(monkeypatch, var):
    monkeypatch.setenv(var, "1")
    first, _ = _run()
    second, runner = _run(early_stop=True, early_stop_factor=1.2)
    assert second.config == first.config == CONFIGS[1]
    # tuned again, with early stopping: the second config's short probe, then its full timing
    assert runner.benched == [CONFIGS[0], CONFIGS[1], CONFIGS[1]]
    assert not second.from_cache


def test_kernel_parameters_key_the_stored_result():
    """Upstream's set_kernel_parameters: the arguments a tuner's closure was built with enter the
    key, so another set tunes again and the same set reuses; cache_dir is where results live."""
    from tilelang.autotuner import store

    assert AutoTuner.from_kernel(kernel=_kernel, configs=CONFIGS).cache_dir == store.directory()
    _, r1 = _run(kernel_parameters=(((256, 256, 256), ()), {"M": 256}))
    _, r2 = _run(kernel_parameters=(((512, 256, 256), ()), {"M": 512}))
    _, r3 = _run(kernel_parameters=(((512, 256, 256), ()), {"M": 512}))
    assert len(r1.benched) == 2 and len(r2.benched) == 2 and r3.benched == []
    assert sorted(p.name for p in store.directory().glob("*.json"))   # stored there
