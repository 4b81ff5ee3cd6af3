"""``AutotuneResult.save_to_disk`` / ``AutotuneResult.load_from_disk`` (upstream's API, its
autotuning guide's "Recording and Reusing Best Configs"): a winner kept in a directory of the
user's comes back with its config, latencies and compiled kernel, without compiling again."""

import sys
from pathlib import Path

import tilelang
from tilelang.autotuner.param import AutotuneResult, CompileArgs

sys.path.insert(0, str(Path(__file__).resolve().parent))
import autotune_kernels as ak  # noqa: E402

CONFIG = dict(block_M=64, block_N=64, block_K=32, num_stages=2, threads=128)


def test_a_saved_winner_loads_with_its_kernel(tmp_path, monkeypatch):
    kernel = tilelang.compile(ak.gemm_factory(128, 128, 128, **CONFIG), out_idx=[-1], target="sm_90a")
    # upstream's record is built with keywords, its PrimFunc among them
    result = AutotuneResult(config=CONFIG, latency=0.0123, ref_latency=0.02, kernel=kernel, func=kernel.prim_func)
    assert result.libcode == kernel.get_kernel_source()
    where = tmp_path / "best" / "gemm_128"
    result.save_to_disk(where)
    result.save_to_disk(where)          # (again: replaces the entry)

    def no_compile(*a, **k):
        raise AssertionError("loading a saved result compiled the kernel again")

    monkeypatch.setattr(tilelang, "compile", no_compile)
    loaded = AutotuneResult.load_from_disk(where, CompileArgs())
    assert loaded.config == CONFIG and loaded.latency == 0.0123 and loaded.ref_latency == 0.02
    assert loaded.from_cache
    assert loaded.kernel.get_kernel_source() == kernel.get_kernel_source()
    assert loaded.kernel.artifact.out_idx == kernel.artifact.out_idx
    assert AutotuneResult.load_from_disk(tmp_path / "nothing", CompileArgs()) is None
