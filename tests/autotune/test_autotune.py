"""@tilelang.autotune and AutoTuner on a machine without a GPU: a fake runner stands in for the timer.

One real tuning run (nvcc included) of a small gemm config list feeds the tests of the whole
flow: parallel compiles, skipped configs, the winner, progress output, the record on disk, and
a fresh process that reuses it.  The other tests replace nvcc with a stub returning a fake
cubin, so they only pay for lowering.
"""

import functools
import io
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import traceback
from contextlib import redirect_stderr
from pathlib import Path
from types import SimpleNamespace

import pytest

import tilelang
from tilelang import autotuner
from tilelang.autotuner import AutotuneError, AutoTuner, GpuRunner, ProfileArgs, store, tuner
from tilelang.autotuner.progress import Progress
from tilelang.autotuner.runner import compare
from tilelang.jit import nvcc
from tilelang.artifact import ParamSpec

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

import autotune_kernels as ak  # noqa: E402

WINNER = dict(block_M=128, block_N=64, block_K=32, num_stages=2, threads=128)
CHECK_FAILS = dict(block_M=128, block_N=64, block_K=64, num_stages=2, threads=128)


@pytest.fixture(autouse=True)
def isolated(isolated_autotune):
    yield


@pytest.fixture
def fake_nvcc(monkeypatch):
    """nvcc replaced by a stub; ``calls`` counts compiles."""
    calls = []

    def compile_cubin(source, arch, flags=(), include_dirs=()):
        calls.append(arch)
        return b"\x7fELF fake cubin"

    monkeypatch.setattr(nvcc, "compile_cubin", compile_cubin)
    return calls


# ------------------------------------------------------------------ one real run, shared
@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """Tune ak.matmul over ak.CONFIGS with real nvcc and a fake timer; record what happened."""
    cache_dir = tmp_path_factory.mktemp("tuned") / "cache"
    runner = ak.FakeRunner(bad=[CHECK_FAILS])
    active, peak = [0], [0]
    lock = threading.Lock()
    real = nvcc.compile_cubin

    def counting(*args, **kwargs):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            return real(*args, **kwargs)
        finally:
            with lock:
                active[0] -= 1

    err = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TILELANG_CACHE_DIR", str(cache_dir))
        mp.delenv("TILELANG_DISABLE_CACHE", raising=False)
        mp.delenv("TILELANG_AUTOTUNE_FORCE", raising=False)
        mp.setattr(nvcc, "compile_cubin", counting)
        tuner._MEMO.clear()
        decorated = tilelang.autotune(configs=ak.CONFIGS, warmup=10, rep=10, ref_prog=lambda a, b: a @ b,
                                      _runner=runner)(ak.matmul)
        t0 = time.monotonic()
        with redirect_stderr(err):
            kernel = decorated(256, 256, 256)
        seconds = time.monotonic() - t0
    return SimpleNamespace(kernel=kernel, result=kernel.autotune_result, runner=runner, stderr=err.getvalue(),
                           peak=peak[0], cache_dir=cache_dir, seconds=seconds)


def test_the_fastest_passing_config_wins(tuned):
    assert tuned.kernel.config == WINNER
    assert tuned.kernel.latency == pytest.approx(1 / 128 + 32 / 1e4)
    assert tuned.kernel.out_idx == [2]  # compiled with @tilelang.jit's out_idx
    assert isinstance(tuned.kernel, tilelang.JITKernel)
    result = tuned.result
    assert result.config == WINNER and result.kernel is tuned.kernel and not result.from_cache
    assert result.ref_latency == 0.5 and "block_M=128" in result.table()


def test_failing_configs_are_skipped_with_a_one_line_reason(tuned):
    rows = {tuple(sorted(r.config.items())): r for r in tuned.result.results}
    assert len(rows) == len(ak.CONFIGS)
    broken = rows[tuple(sorted(ak.CONFIGS[-1].items()))]
    assert broken.latency is None and broken.error.startswith("compile: error[TL0101]")
    assert "\n" not in broken.error
    wrong = rows[tuple(sorted(CHECK_FAILS.items()))]
    assert wrong.latency is None and wrong.error.startswith("check: ") and "differ from ref_prog" in wrong.error
    timed = [r for r in tuned.result.results if r.latency is not None]
    assert len(timed) == 3 and all(r.compile_s > 0 for r in timed)
    assert CHECK_FAILS not in tuned.runner.benched  # a config failing the check is never timed


def test_configs_compile_in_parallel(tuned):
    assert tuned.peak == min(2, tuner._cpu_count())
    assert tuned.seconds < 60


def test_progress_goes_to_stderr_as_plain_lines_when_not_a_terminal(tuned):
    lines = tuned.stderr.splitlines()
    assert "\r" not in tuned.stderr and "\x1b" not in tuned.stderr
    assert lines[0] == f"autotune gemm_factory: compiling 5 configs, {min(5, tuner._cpu_count())} at a time"
    assert sum(l.startswith("autotune gemm_factory: compile [") for l in lines) == 5
    assert sum(l.startswith("autotune gemm_factory: bench [") for l in lines) == 4
    assert any("skip {block_M=64, block_N=64, block_K=24" in l and "error[TL0101]" in l for l in lines)
    assert lines[-1].startswith("autotune gemm_factory: best {block_M=128, block_N=64, block_K=32")
    assert "3 of 5 configs timed, 2 skipped" in lines[-1]


def test_the_result_is_stored_on_disk(tuned):
    records = list((tuned.cache_dir / "autotune").glob("*.json"))
    assert len(records) == 1 and records[0].stem == tuned.result.key
    record = json.loads(records[0].read_text())
    assert record["best_config"] == WINNER and record["best_index"] == ak.CONFIGS.index(WINNER)
    assert record["name"] == "gemm_factory" and len(record["results"]) == 5
    assert not list((tuned.cache_dir / "autotune").glob(".tmp-*"))


FRESH = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {here!r})
    import tilelang
    from tilelang.jit import nvcc
    import autotune_kernels as ak

    def no_nvcc(*args, **kwargs):
        raise AssertionError("nvcc ran although the kernel cache holds the winner")

    nvcc.compile_cubin = no_nvcc
    # the same check as when it was tuned (the key includes the profile's callbacks, by their code)
    matmul = tilelang.autotune(configs=ak.CONFIGS, warmup=10, rep=10, ref_prog=lambda a, b: a @ b,
                               _runner=ak.NoRunner())(ak.matmul)
    kernel = matmul(256, 256, 256)
    print(json.dumps({{"config": kernel.config, "latency": kernel.latency, "cached": kernel.autotune_result.from_cache,
                      "rows": len(kernel.autotune_result.results)}}))
""")


def test_a_fresh_process_reuses_the_stored_winner_without_tuning(tuned):
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tuned.cache_dir))
    env.pop("TILELANG_AUTOTUNE_FORCE", None)
    proc = subprocess.run([sys.executable, "-c", FRESH.format(here=str(HERE))], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"config": WINNER, "latency": pytest.approx(tuned.kernel.latency), "cached": True, "rows": 5}
    assert "stored best {block_M=128" in proc.stderr and "TILELANG_AUTOTUNE_FORCE=1 re-tunes" in proc.stderr


def test_the_winner_is_a_kernel_cache_hit_for_tilelang_compile(tuned, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tuned.cache_dir))
    monkeypatch.setattr(nvcc, "compile_cubin", lambda *a, **k: pytest.fail("the kernel cache missed"))
    kernel = tilelang.compile(ak.gemm_factory(256, 256, 256, **WINNER), out_idx=[-1])
    assert kernel.artifact.cubin == tuned.kernel.artifact.cubin


def test_force_env_retunes_and_overwrites(tuned, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tuned.cache_dir))
    monkeypatch.setenv("TILELANG_AUTOTUNE_FORCE", "1")
    runner = ak.FakeRunner(latency=lambda c: c["block_K"] / 1e3)  # now block_M=64, block_K=32 is fastest
    matmul = tilelang.autotune(configs=ak.CONFIGS, _runner=runner)(ak.matmul)
    with redirect_stderr(io.StringIO()):
        kernel = matmul(256, 256, 256)
    assert runner.benched and kernel.config == dict(WINNER, block_M=64)
    record = json.loads(store.path_for(kernel.autotune_result.key).read_text())
    assert record["best_config"] == kernel.config


# ------------------------------------------------------------------ config handling (no compile)
def test_unknown_config_key_names_the_key_and_the_parameters(fake_nvcc):
    matmul = tilelang.autotune(configs=[dict(block_M=64), dict(blockN=64)])(ak.matmul)
    with pytest.raises(ValueError) as info:
        matmul(256, 256, 256)
    message = str(info.value)
    assert "'blockN'" in message and "config #1" in message
    assert "gemm_factory(M, N, K, block_M, block_N, block_K, num_stages, threads, dtype, accum_dtype)" in message
    assert not fake_nvcc
    assert [f.filename for f in traceback.extract_tb(info.value.__traceback__)] == [__file__]  # no tilelang frames


def test_empty_or_malformed_configs_are_errors(fake_nvcc):
    with pytest.raises(ValueError, match="config list is empty"):
        tilelang.autotune(configs=[])(ak.matmul)(256, 256, 256)
    with pytest.raises(TypeError, match="must be dicts"):
        tilelang.autotune(configs=[("block_M", 64)])(ak.matmul)(256, 256, 256)
    with pytest.raises(TypeError, match="cannot be used: missing a required argument: 'K'"):
        tilelang.autotune(configs=[dict(block_M=64)])(ak.matmul)(256, 256)
    with pytest.raises(ValueError, match="do_not_specialize names \\['m'\\]"):
        tilelang.autotune(configs=[dict(block_M=64)], do_not_specialize=["m"])(ak.matmul)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the message shown without a GPU")
def test_without_a_gpu_tuning_says_so_before_compiling(fake_nvcc):
    matmul = tilelang.autotune(configs=ak.CONFIGS[:2])(ak.matmul)
    with pytest.raises(AutotuneError, match="tuning needs a CUDA GPU") as info:
        matmul(256, 256, 256)
    assert [f.filename for f in traceback.extract_tb(info.value.__traceback__)] == [__file__]
    assert info.value.__cause__ is None and info.value.__context__ is None
    assert not fake_nvcc


def test_when_every_config_fails_the_error_lists_each_reason(fake_nvcc):
    def factory(M, block=1):
        raise ValueError(f"block {block} is not supported\nsecond line")

    tuned = tilelang.autotune(configs=[dict(block=1), dict(block=2)], _runner=ak.FakeRunner())(factory)
    with redirect_stderr(io.StringIO()), pytest.raises(AutotuneError) as info:
        tuned(8)
    assert str(info.value) == ("autotune factory: all 2 configs failed:\n"
                               "  {block=1}: compile: ValueError: block 1 is not supported\n"
                               "  {block=2}: compile: ValueError: block 2 is not supported")


def test_runtime_failures_are_skipped_too(fake_nvcc):
    crash = dict(block_M=64, block_N=64, block_K=32, num_stages=2, threads=128)
    runner = ak.FakeRunner(crash=[crash])
    matmul = tilelang.autotune(configs=ak.CONFIGS[:2], _runner=runner)(ak.matmul)
    with redirect_stderr(io.StringIO()):
        result = matmul.tune(256, 256, 256)
    assert result.config == ak.CONFIGS[1]
    assert result.results[0].error == "run: RuntimeError: CUDA error: an illegal memory access was encountered"


# ------------------------------------------------------------------ how configs meet the call
def test_callable_configs_get_the_factory_arguments(fake_nvcc):
    seen = []

    def configs(M, N, K, **kwargs):
        seen.append((M, N, K, kwargs))
        return [dict(block_M=bm, block_K=32) for bm in (64, 128) if bm <= M]

    runner = ak.FakeRunner()
    matmul = tilelang.autotune(configs=configs, _runner=runner)(ak.matmul)
    with redirect_stderr(io.StringIO()):
        small = matmul(64, 256, 256, dtype="float16")
    assert seen == [(64, 256, 256, {"dtype": "float16"})]
    assert runner.benched == [dict(block_M=64, block_K=32)] and small.config == dict(block_M=64, block_K=32)


def test_arguments_given_by_the_caller_are_fixed_not_tuned(fake_nvcc):
    runner = ak.FakeRunner()
    matmul = tilelang.autotune(configs=ak.CONFIGS[:4], _runner=runner)(ak.matmul)
    with redirect_stderr(io.StringIO()):
        kernel = matmul(256, 256, 256, block_K=64)
    assert runner.benched == [dict(block_M=64, block_N=64, num_stages=2, threads=128),
                              dict(block_M=128, block_N=64, num_stages=2, threads=128)]
    assert kernel.config == dict(block_M=128, block_N=64, num_stages=2, threads=128)
    assert 'A_shared = T.alloc_buffer((128, 64), "float16"' in kernel.prim_func.script()  # block_K=64 kept


def test_keyword_arguments_named_in_do_not_specialize_are_tuned_over(fake_nvcc):
    # TileOPs passes its default config by keyword, names it in do_not_specialize and reads the
    # winner from kernel.config: upstream tunes those (its run is keyed without them)
    runner = ak.FakeRunner()
    matmul = tilelang.autotune(configs=[dict(block_M=64), dict(block_M=128)], do_not_specialize=["block_M"],
                               _runner=runner)(ak.matmul)
    with redirect_stderr(io.StringIO()):
        kernel = matmul(256, 256, 256, block_M=64, block_K=64)
    assert runner.benched == [dict(block_M=64), dict(block_M=128)]
    assert kernel.config == dict(block_M=128)
    assert 'A_shared = T.alloc_buffer((128, 64), "float16"' in kernel.prim_func.script()  # block_K=64 kept


def test_fixing_every_tuned_argument_compiles_without_tuning(fake_nvcc):
    matmul = tilelang.autotune(configs=[dict(block_M=64), dict(block_M=128)], _runner=ak.NoRunner())(ak.matmul)
    kernel = matmul(256, 256, 256, block_M=64)
    assert kernel.config == {} and kernel.latency is None and kernel.out_idx == [2]


def test_a_dict_of_lists_is_the_product_of_its_values(fake_nvcc):
    runner = ak.FakeRunner()
    matmul = tilelang.autotune(configs={"block_M": [64, 128], "block_K": [32, 64], "threads": 128},
                               _runner=runner)(ak.matmul)
    with redirect_stderr(io.StringIO()):
        matmul(256, 256, 256)
    assert runner.benched == [dict(block_M=m, block_K=k, threads=128) for m in (64, 128) for k in (32, 64)]


# ------------------------------------------------------------------ decorator forms and the builder
def test_autotune_inside_jit_compiles_with_jits_arguments(fake_nvcc):
    runner = ak.FakeRunner()

    @tilelang.jit(out_idx=[-1], target="sm_80")
    @tilelang.autotune(configs=ak.CONFIGS[:2], _runner=runner)
    def matmul(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128):
        return ak.gemm_factory(M, N, K, block_M, block_N, block_K, num_stages, threads)

    with redirect_stderr(io.StringIO()):
        kernel = matmul(256, 256, 256)
    assert kernel.out_idx == [2] and kernel.artifact.arch == "sm_80"
    assert kernel.config == ak.CONFIGS[0] and len(runner.benched) == 2
    assert matmul(256, 256, 256) is kernel  # memoised: no second run
    assert len(runner.benched) == 2


def test_autotune_of_a_plain_factory_and_in_process_memo(fake_nvcc):
    runner = ak.FakeRunner()
    matmul = tilelang.autotune(configs=ak.CONFIGS[:2], _runner=runner)(ak.gemm_factory)
    with redirect_stderr(io.StringIO()):
        first = matmul(256, 256, 256)
        again = tilelang.autotune(configs=ak.CONFIGS[:2], _runner=runner)(ak.gemm_factory)(256, 256, 256)
        other = matmul(512, 256, 256)
    assert first.out_idx == [] and again is first  # the second wrapper hits the process-wide memo
    assert len(runner.benched) == 4 and other is not first


def test_do_not_specialize_reuses_the_winner_for_other_values(fake_nvcc):
    runner = ak.FakeRunner()
    matmul = tilelang.autotune(configs=ak.CONFIGS[:2], do_not_specialize=["M"], _runner=runner)(ak.matmul)
    with redirect_stderr(io.StringIO()):
        k256 = matmul(256, 256, 256)
        k512 = matmul(512, 256, 256)
    assert len(runner.benched) == 2 and k512.config == k256.config
    assert k512.params[0].shape == [512, 256]


def test_autotuner_builder_api(fake_nvcc):
    def kernel(block_M=None, block_K=None):
        return ak.gemm_factory(256, 256, 256, block_M=block_M, block_N=64, block_K=block_K, num_stages=2)

    configs = [dict(block_M=m, block_K=k) for m in (64, 128) for k in (32, 64)]
    tuner_ = (AutoTuner.from_kernel(kernel=kernel, configs=configs)
              .set_compile_args(out_idx=[-1], target="auto")
              .set_profile_args(ref_prog=lambda a, b: a @ b, skip_check=False))
    tuner_._runner = ak.FakeRunner(bad=[dict(block_M=128, block_K=32)])
    with redirect_stderr(io.StringIO()):
        result = tuner_.run(warmup=3, rep=20)
    assert result.config == dict(block_M=128, block_K=64) and result.ref_latency == 0.5
    assert result.latency == pytest.approx(1 / 128 + 64 / 1e4) and result.kernel.out_idx == [2]
    assert result.func is result.kernel.prim_func and "extern \"C\"" in result.libcode


def test_early_stop_skips_the_full_timing_of_slow_configs(fake_nvcc):
    runner = ak.FakeRunner(latency=lambda c: {64: 1.0, 128: 5.0}[c["block_M"]])
    matmul = tilelang.autotune(configs=[dict(block_M=64), dict(block_M=128)], early_stop=True,
                               _runner=runner)(ak.matmul)
    with redirect_stderr(io.StringIO()):
        result = matmul.tune(256, 256, 256)
    assert result.config == dict(block_M=64)
    assert runner.benched == [dict(block_M=64), dict(block_M=128)]  # the probe only
    assert result.results[1].early_stopped and result.results[1].error is None


# ------------------------------------------------------------------ timeouts, records, display
def test_a_config_over_the_compile_timeout_is_skipped(monkeypatch):
    local = threading.local()

    def factory(M, block_M=64):
        local.slow = block_M == 128
        return ak.gemm_factory(M, 256, 256, block_M=block_M, block_N=64, num_stages=2)

    def slow_nvcc(source, arch, flags=(), include_dirs=()):
        if getattr(local, "slow", False):
            time.sleep(3)
            raise RuntimeError("too slow")  # so the abandoned thread stores nothing once it wakes up
        return b"\x7fELF fake cubin"

    monkeypatch.setattr(nvcc, "compile_cubin", slow_nvcc)
    tuned = tilelang.autotune(configs=[dict(block_M=128), dict(block_M=64)], timeout=1,
                              _runner=ak.FakeRunner())(factory)
    t0 = time.monotonic()
    with redirect_stderr(io.StringIO()):
        result = tuned.tune(256)
    assert time.monotonic() - t0 < 2.5
    assert result.config == dict(block_M=64)
    assert result.results[0].error == "compile: timed out after 1 s (in nvcc)"


def test_a_hung_lowering_fails_the_configs_waiting_for_it_instead_of_deadlocking(fake_nvcc):
    def factory(M, block_M=64):
        if block_M == 16:
            time.sleep(1.5)  # stands for a pass that never ends: it holds the lowering lock
        return ak.gemm_factory(M, 256, 256, block_M=block_M, block_N=64, num_stages=2)

    tuned = tilelang.autotune(configs=[dict(block_M=16), dict(block_M=64), dict(block_M=128)], timeout=0.5,
                              _runner=ak.FakeRunner())(factory)
    t0 = time.monotonic()
    with redirect_stderr(io.StringIO()), pytest.raises(AutotuneError) as info:
        tuned(256)
    assert time.monotonic() - t0 < 1.4
    assert str(info.value).splitlines()[1:] == [
        "  {block_M=16}: compile: timed out after 0.5 s (in lowering)",
        "  {block_M=64}: compile: not compiled: the lowering of another config hung",
        "  {block_M=128}: compile: not compiled: the lowering of another config hung"]
    with tilelang.autotuner.build.LOWER_LOCK:  # the hung lowering ends and lets go of the lock
        pass


def test_a_damaged_record_is_a_miss_and_is_replaced(fake_nvcc):
    runner = ak.FakeRunner()
    matmul = tilelang.autotune(configs=ak.CONFIGS[:2], _runner=runner)(ak.matmul)
    with redirect_stderr(io.StringIO()):
        key = matmul.tune(256, 256, 256).key
    store.path_for(key).write_text("{not json")
    tuner._MEMO.clear()
    with redirect_stderr(io.StringIO()):
        again = tilelang.autotune(configs=ak.CONFIGS[:2], _runner=runner)(ak.matmul).tune(256, 256, 256)
    assert len(runner.benched) == 4 and not again.from_cache
    assert json.loads(store.path_for(key).read_text())["best_index"] == 0


def test_the_key_follows_source_arguments_configs_and_arch():
    base = dict(factory=ak.gemm_factory, arguments={"M": 256}, configs=[{"block_M": 64}],
                compile_args={"out_idx": [-1]}, arch="sm_90a")
    key = store.tuning_key(**base)
    assert key == store.tuning_key(**base)
    with_partial = {**base, "factory": functools.partial(ak.gemm_factory, 256)}
    assert store.tuning_key(**with_partial) != store.tuning_key(**{**with_partial,
                                                                   "factory": functools.partial(ak.gemm_factory, 512)})
    def other(M, block_M=64):
        return M

    for change in ({"factory": other}, {"factory": functools.partial(ak.gemm_factory, 128)}, {"arguments": {"M": 512}}, {"configs": [{"block_M": 128}]}, {"arch": "sm_80"},
                   {"compile_args": {"out_idx": [-2]}}):
        assert store.tuning_key(**{**base, **change}) != key, change


def test_progress_redraws_one_line_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    stream = Tty()
    progress = Progress("matmul", stream)
    progress.start("compile", 4)
    progress.advance("ok")
    progress.advance("skip {block_M=48}: reason", keep=True)
    progress.close()
    text = stream.getvalue()
    assert "\r\x1b[2K" in text and "[##########----------] 2/4" in text
    assert "autotune matmul: skip {block_M=48}: reason\n" in text
    assert text.count("\n") == 1  # only the kept line; the bar never scrolls


def test_set_autotune_inputs_nests():
    assert autotuner.get_autotune_inputs() is None
    with autotuner.set_autotune_inputs([1, 2]):
        with autotuner.set_autotune_inputs(3, 4):
            assert autotuner.get_autotune_inputs() == [3, 4]
        assert autotuner.get_autotune_inputs() == [1, 2]
    assert autotuner.get_autotune_inputs() is None


# ------------------------------------------------------------------ the GPU runner's check, on CPU tensors
class CpuAdd:
    """Looks like a JITKernel with out_idx=[1] (y = x + 1) but runs on the CPU."""

    params = [ParamSpec("x", "tensor", "float32", [64]), ParamSpec("y", "tensor", "float32", [64])]
    out_idx = [1]
    name = "add"

    def __init__(self, offset=0.0):
        self.offset = offset

    def __call__(self, x, y=None):  # inputs only, or every parameter (as a JITKernel takes them)
        out = x + 1 + self.offset
        if y is None:
            return out
        y.copy_(out)
        return y


def test_gpu_runner_check_allows_a_small_mismatched_ratio():
    torch = pytest.importorskip("torch")

    ref = torch.zeros(1000)
    got = ref.clone()
    got[:5] = 1.0
    compare("C", got, ref, atol=1e-2, rtol=1e-2, max_mismatched_ratio=0.01)
    got[:20] = 1.0
    with pytest.raises(AssertionError, match=r"output 'C': 20 of 1000 elements \(2.00%\) differ"):
        compare("C", got, ref, atol=1e-2, rtol=1e-2, max_mismatched_ratio=0.01)
    with pytest.raises(AssertionError, match="shape"):
        compare("C", got[:10], ref, atol=1e-2, rtol=1e-2, max_mismatched_ratio=0.01)


def test_gpu_runner_checks_a_kernel_against_ref_prog_on_shared_inputs():
    torch = pytest.importorskip("torch")
    runner = GpuRunner(ProfileArgs(ref_prog=lambda x: x + 1))
    runner.check(CpuAdd(), {})
    inputs = runner.inputs(CpuAdd())
    assert inputs is runner.inputs(CpuAdd()) and float(inputs[0].abs().sum()) > 0  # made once, random
    with pytest.raises(AssertionError, match="64 of 64 elements"):
        runner.check(CpuAdd(offset=1.0), {})
    with autotuner.set_autotune_inputs(torch.ones(64)):
        assert torch.equal(GpuRunner(ProfileArgs()).inputs(CpuAdd())[0], torch.ones(64))


def test_gpu_runner_times_with_every_argument_preallocated(monkeypatch):
    pytest.importorskip("torch")
    from tilelang.profiler import bench

    timed = []

    def fake_do_bench(fn, warmup, rep, backend="event"):
        fn()
        timed.append((warmup, rep, backend))
        return 0.25

    monkeypatch.setattr(bench, "do_bench", fake_do_bench)
    kernel = CpuAdd()
    runner = GpuRunner(ProfileArgs(ref_prog=lambda x: x + 1))
    assert runner.bench(kernel, {}, 5, 10) == 0.25 and timed == [(5, 10, "event")]
    x, y = runner._full_args(kernel)
    assert x is runner.inputs(kernel)[0] and y.shape == x.shape  # the output, allocated once
    assert runner.ref_latency(1, 2) == 0.25 and timed[-1] == (1, 2, "event")


def test_tuning_key_follows_what_decides_correctness():
    from tilelang.autotuner.tuner import ProfileArgs, _profile_key
    from tilelang.autotuner.store import callable_identity

    base = _profile_key(ProfileArgs())
    assert base != _profile_key(ProfileArgs(skip_check=True)) != _profile_key(ProfileArgs(cache_input_tensors=True))
    assert callable_identity(lambda a, b: a @ b) == callable_identity(lambda a, b: a @ b)   # by code, not by line
    assert callable_identity(lambda a, b: a @ b) != callable_identity(lambda a, b: a + b)
    scale = 2.0
    assert callable_identity(lambda a: a * scale)["closure"] == {"scale": 2.0}
