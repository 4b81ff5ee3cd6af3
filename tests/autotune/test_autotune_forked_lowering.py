"""The autotuner lowers configs in forked processes (``build.compile_all``, ``lower_process``).

nvcc is a stub here (a fake cubin), so only the lowering runs; the machine is made to look like
it has 4 CPUs, so configs are forked even where the tests run on one.
"""

import functools
import io
import os
import signal
import sys
import time
from contextlib import redirect_stderr

import pytest

import tilelang
from tilelang.autotuner import build, lower_process
from tilelang.jit import nvcc

sys.path.insert(0, os.path.dirname(__file__))

import autotune_kernels as ak  # noqa: E402

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked lowering is Linux-only")

SIX = [dict(block_M=bm, block_N=64, block_K=bk, num_stages=2, threads=128) for bm in (64, 128) for bk in (32, 64)] + [
    dict(block_M=32, block_N=64, block_K=32, num_stages=2, threads=128),
    dict(block_M=64, block_N=64, block_K=24, num_stages=2)]   # T.gemm refuses block_K=24: TL0101


@pytest.fixture(autouse=True)
def four_cpus(isolated_autotune, monkeypatch):
    monkeypatch.setattr(nvcc, "compile_cubin", lambda source, arch, flags=(), include_dirs=(): b"\x7fELF fake")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setenv("TILELANG_AUTO_TUNING_CPU_COUNTS", "3")
    monkeypatch.delenv("TILELANG_AUTOTUNE_LOWER_PROCS", raising=False)


@pytest.fixture
def forks(monkeypatch):
    """Every LoweringChild forked during the test."""
    children = []
    real = lower_process.LoweringChild.fork.__func__

    def counting(cls, *args):
        children.append(real(cls, *args))
        return children[-1]

    monkeypatch.setattr(lower_process.LoweringChild, "fork", classmethod(counting))
    return children


def _tune(monkeypatch, procs: str, configs=SIX):
    """Tune ak.matmul with TILELANG_AUTOTUNE_LOWER_PROCS=procs: (the table, {index: CUDA source})."""
    monkeypatch.setenv("TILELANG_AUTOTUNE_LOWER_PROCS", procs)
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")  # every run lowers every config afresh
    built, real = {}, build.compile_all

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        built.update({i: o.kernel.get_kernel_source() for i, o in out.items() if isinstance(o, build.Built)})
        return out

    monkeypatch.setattr(build, "compile_all", spy)
    with redirect_stderr(io.StringIO()):
        result = tilelang.autotune(configs=configs, _runner=ak.FakeRunner())(ak.matmul).tune(256, 256, 256)
    return [(r.config, r.error) for r in result.results], built


def _reaped(children, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if all(c.reaped for c in children):
            return True
        time.sleep(0.05)
    return False


def test_forked_lowering_builds_the_same_kernels_as_lowering_in_process(monkeypatch, forks):
    table, sources = _tune(monkeypatch, "0")
    assert len(forks) == len(SIX)
    serial_table, serial_sources = _tune(monkeypatch, "1")
    assert len(forks) == len(SIX)  # the serial run forked nothing
    assert table == serial_table and sources == serial_sources and len(sources) == len(SIX) - 1
    assert table[-1][1].startswith("compile: error[TL0101]") and "\n" not in table[-1][1]
    assert _reaped(forks)


def test_a_failing_factory_or_lowering_gives_the_serial_reason(monkeypatch, forks):
    def factory(M, block_M=64, block_K=32):
        if block_M == 48:
            raise ValueError("block_M=48 is not a tile\nsecond line")
        return ak.gemm_factory(M, 256, 256, block_M=block_M, block_N=64, block_K=block_K, num_stages=2)

    configs = [dict(block_M=64), dict(block_M=48), dict(block_M=128), dict(block_M=64, block_K=24)]
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")  # the second run tunes again
    reasons = {}
    for procs in ("0", "1"):
        monkeypatch.setenv("TILELANG_AUTOTUNE_LOWER_PROCS", procs)
        with redirect_stderr(io.StringIO()):
            result = tilelang.autotune(configs=configs, _runner=ak.FakeRunner())(factory).tune(256)
        reasons[procs] = [r.error for r in result.results]
    assert reasons["0"] == reasons["1"]
    assert reasons["0"][1] == "compile: ValueError: block_M=48 is not a tile"
    assert reasons["0"][3].startswith("compile: error[TL0101]")
    assert len(forks) == 3  # the factory that raised never reached a fork


def _thunks(block_ms):
    return [functools.partial(ak.gemm_factory, 256, 256, 256, block_M=bm, block_N=64, num_stages=2) for bm in block_ms]


def _compile(thunks, timeout=60.0):
    return build.compile_all(thunks, {"out_idx": [2], "target": "sm_90a"}, timeout, 3, lambda outcome: None)


def test_a_crashed_or_hung_child_fails_only_its_config(monkeypatch, forks):
    crash, hang, real = [], [], build.lower_cached
    thunks = _thunks([64, 32, 128, 16])

    def marked(thunk, into):
        def make():
            func = thunk()
            # Keep the PrimFunc itself, not its id: once the parent drops a lowered
            # func, a later one may reuse its id and be taken for it. The child
            # inherits the object, so identity holds across the fork.
            into.append(func)
            return func
        return make

    def lower_cached(func, compile_args):
        if any(func is f for f in crash):
            os.kill(os.getpid(), signal.SIGSEGV)
        if any(func is f for f in hang):
            time.sleep(60)
        return real(func, compile_args)

    monkeypatch.setattr(build, "lower_cached", lower_cached)
    thunks[1], thunks[3] = marked(thunks[1], crash), marked(thunks[3], hang)
    t0 = time.monotonic()
    out = _compile(thunks, timeout=3)
    assert time.monotonic() - t0 < 20
    assert out[1].reason == "the lowering process died (SIGSEGV)"
    assert out[3].reason == "timed out after 3 s (in lowering)"
    assert isinstance(out[0], build.Built) and isinstance(out[2], build.Built)  # the lock was never lost
    assert _reaped(forks)  # the hung child was killed and reaped: no zombie


def test_a_child_failure_naming_cuda_is_lowered_again_in_the_parent(monkeypatch, forks):
    parent, real = os.getpid(), build.lower_cached

    def lower_cached(func, compile_args):
        if os.getpid() != parent:
            raise RuntimeError("Cannot re-initialize CUDA in forked subprocess")
        return real(func, compile_args)

    monkeypatch.setattr(build, "lower_cached", lower_cached)
    out = _compile(_thunks([64, 128, 32, 64]))
    assert len(forks) == 4 and all(isinstance(o, build.Built) for o in out.values())


def test_warnings_of_a_forked_lowering_reach_the_parent(monkeypatch, forks):
    real = build.lower_cached

    def lower_cached(func, compile_args):
        import warnings

        warnings.warn_explicit(UserWarning(f"from {os.getpid()}"), UserWarning, "kernel.py", 7)
        return real(func, compile_args)

    monkeypatch.setattr(build, "lower_cached", lower_cached)
    with pytest.warns(UserWarning) as caught:
        _compile(_thunks([64, 128, 32, 64]))
    relayed = [w for w in caught if str(w.message).startswith("from ")]
    assert {(w.filename, w.lineno) for w in relayed} == {("kernel.py", 7)}
    pids = {str(w.message).split()[-1] for w in relayed}
    assert len(pids) == 4 and str(os.getpid()) not in pids


def test_lowering_processes_env_and_limits(monkeypatch):
    assert build.lowering_processes(workers=8, configs=20) == 4  # the usable CPUs
    assert build.lowering_processes(workers=2, configs=20) == 2
    assert build.lowering_processes(workers=8, configs=3) == 1  # too few configs to fork
    monkeypatch.setenv("TILELANG_AUTOTUNE_LOWER_PROCS", "1")
    assert build.lowering_processes(workers=8, configs=20) == 1
    monkeypatch.setenv("TILELANG_AUTOTUNE_LOWER_PROCS", "3")
    assert build.lowering_processes(workers=8, configs=20) == 3
    monkeypatch.setenv("TILELANG_AUTOTUNE_LOWER_PROCS", "many")
    with pytest.raises(ValueError, match="TILELANG_AUTOTUNE_LOWER_PROCS"):
        build.lowering_processes(workers=8, configs=20)
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.delenv("TILELANG_AUTOTUNE_LOWER_PROCS")
    assert build.lowering_processes(workers=8, configs=20) == 1


def test_the_env_var_forces_lowering_in_process(monkeypatch, forks):
    monkeypatch.setenv("TILELANG_AUTOTUNE_LOWER_PROCS", "1")
    out = _compile(_thunks([64, 128, 32, 64]))
    assert not forks and all(isinstance(o, build.Built) for o in out.values())
