"""``tilelang.env`` (upstream's environment object over our knobs) and upstream's pass config keys:
accepted, and where they mean something to our compiler, obeyed (issue 17)."""

import os
import warnings

import pytest

import tilelang
from tilelang import knobs
from tilelang.env import EnvVar, env, resolve_pass_profile_threshold_ms
from tilelang.transform.pass_config import ALIASES, PassConfigKey, normalize, nvcc_flags

# Every key upstream TileLang (a35008a) defines in tilelang/transform/pass_config.py, by value.
UPSTREAM_KEYS = """tl.Simplify tl.disable_buffer_init_check tl.disable_data_race_check tl.disable_prelower_semantic_check
tl.disable_warp_specialized tl.enable_fast_math tl.ptxas_register_usage_level tl.device_compile_flags
tl.emit_line_directives tl.config_index_bitwidth tl.enable_reducer_plan_verbose tl.layout_cost_model
tl.reducer_force_baseline tl.disable_tma_lower tl.disable_safe_memory_legalize tl.disable_vectorize_256
tl.enable_async_copy tl.enable_lower_ldgstg tl.enable_lower_ldgstg_predicated tl.enable_vectorize_planner_verbose
tl.disable_wgmma tl.debug_merge_shared_memory_allocations tl.enable_aggressive_shared_memory_merge
tl.disable_shared_memory_reuse tl.disable_shuffle_elect tl.disable_loop_unswitching
tl.loop_unswitching_allow_non_trivial_else tl.if_stmt_binding_inline_replayable_binds
tl.disable_thread_storage_sync tl.force_let_inline tl.ast_print_enable tl.layout_visualization_enable
tl.layout_visualization_formats tl.storage_rewrite_detect_inplace tir.enable_equiv_terms_in_cse_tir
tirx.disable_cse_tir tirx.Simplify tirx.disable_storage_rewrite tirx.disable_vectorize tirx.use_async_copy
tirx.enable_debug tirx.merge_static_smem tirx.add_lower_pass tirx.noalias cuda.kernels_output_dir
tl.disable_out_of_bound_warning tl.enable_dump_ir tl.dump_ir_path tl.pass_profile
tl.pass_profile_threshold_ms""".split()


def _desc(name) -> EnvVar:
    return type(tilelang.env).__dict__[name]


def test_tilelang_env_is_the_environment_object_and_reads_live(monkeypatch):
    assert tilelang.env is env and isinstance(_desc("TILELANG_CACHE_DIR"), EnvVar)
    monkeypatch.delenv("TILELANG_PRINT_ON_COMPILATION", raising=False)
    assert env.TILELANG_PRINT_ON_COMPILATION == "1" and knobs.print_on_compilation()
    monkeypatch.setenv("TILELANG_PRINT_ON_COMPILATION", "0")
    assert env.TILELANG_PRINT_ON_COMPILATION == "0" and not knobs.print_on_compilation()


def test_forcing_an_env_var_redirects_the_compilers_own_reader(monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "from_environ"))
    try:
        env.TILELANG_CACHE_DIR = str(tmp_path / "forced")
        assert _desc("TILELANG_CACHE_DIR")._forced_value == str(tmp_path / "forced")
        assert knobs.cache_dir() == tmp_path / "forced"               # the kernel cache obeys
        assert tilelang.cache.cache_dir() == tmp_path / "forced"
        assert env.TILELANG_TMP_DIR == os.path.join(str(tmp_path / "forced"), "tmp")
        assert os.environ["TILELANG_CACHE_DIR"] == str(tmp_path / "from_environ")   # untouched
    finally:
        _desc("TILELANG_CACHE_DIR")._forced_value = None
    assert knobs.cache_dir() == tmp_path / "from_environ"


def test_pass_profile_threshold_is_validated(monkeypatch):
    for text, value in (("", 0.0), (" 2.5 ", 2.5), ("0", 0.0)):
        monkeypatch.setenv("TILELANG_PASS_PROFILE_THRESHOLD_MS", text)
        assert env.get_pass_profile_threshold_ms() == value
    for bad in ("-1", "nan", "inf", "x"):
        monkeypatch.setenv("TILELANG_PASS_PROFILE_THRESHOLD_MS", bad)
        with pytest.raises(ValueError, match="finite non-negative"):
            env.get_pass_profile_threshold_ms()
    key = PassConfigKey.TL_PASS_PROFILE_THRESHOLD_MS
    assert resolve_pass_profile_threshold_ms({key: 0}, key, lambda: 10.0) == 0.0
    assert resolve_pass_profile_threshold_ms({}, key, lambda: 10.0) == 10.0


def test_compile_timeout_knob(monkeypatch):
    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "0")
    assert knobs.compile_timeout_seconds() is None
    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "1.5")
    assert knobs.compile_timeout_seconds() == 1.5 and env.get_compile_timeout_seconds() == 1.5
    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "-2")
    with pytest.raises(ValueError, match="TILELANG_COMPILE_TIMEOUT_SECONDS"):
        knobs.compile_timeout_seconds()


def test_every_upstream_pass_config_key_is_accepted_without_a_warning():
    # (tl.disable_tma_lower is accepted with upstream's DeprecationWarning, checked below)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = normalize({k: 1 if k == "tl.ptxas_register_usage_level" else False for k in UPSTREAM_KEYS
                         if k != "tl.disable_tma_lower"})
    assert out["tl.disable_safe_memory_access"] is False                  # upstream's spelling, our key
    assert "tir.disable_vectorize" in out and ALIASES["tir.noalias"] == "tirx.noalias"
    for name in ("TL_DISABLE_FAST_MATH", "TL_ENABLE_PTXAS_VERBOSE_OUTPUT", "TL_DISABLE_THREAD_STORAGE_SYNC",
                 "TL_PTXAS_REGISTER_USAGE_LEVEL", "TL_STORAGE_REWRITE_DETECT_INPLACE", "TL_DEVICE_COMPILE_FLAGS"):
        assert isinstance(getattr(tilelang.PassConfigKey, name), PassConfigKey)
    from tilelang.transform import PassConfigKey as from_transform

    assert from_transform is PassConfigKey


def test_pass_configs_that_steer_nvcc_become_flags():
    assert nvcc_flags({PassConfigKey.TL_ENABLE_FAST_MATH: True}) == ["--use_fast_math"]
    assert nvcc_flags({PassConfigKey.TL_ENABLE_FAST_MATH: True, PassConfigKey.TL_DISABLE_FAST_MATH: True}) == []
    assert nvcc_flags({PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL: 10}) == [
        "--ptxas-options=--register-usage-level=10"]
    assert nvcc_flags({"tl.device_compile_flags": "-DFOO=1 --extra-device-vectorization"}) == [
        "-DFOO=1", "--extra-device-vectorization"]
    assert nvcc_flags({"tl.enable_ptxas_verbose_output": True}) == ["--ptxas-options=--verbose"]
    for bad in (11, -1, "high", True):
        with pytest.raises(ValueError, match="register_usage_level"):
            normalize({"tl.ptxas_register_usage_level": bad})
    assert normalize({"tl.enable_async_copy": False})["tl.disable_async_copy"] is True
    assert normalize({"tirx.use_async_copy": False})["tl.disable_async_copy"] is True


def test_register_usage_level_reaches_a_real_nvcc_compile():
    import sys
    from pathlib import Path

    from tilelang.jit import nvcc

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import softplus

    func = softplus.softplus.get_prim_func(128, 128)
    art = tilelang.lower(func, "sm_90a", pass_configs={PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL: 10,
                                                       PassConfigKey.TL_DEVICE_COMPILE_FLAGS: ["-DTL_TEST=1"]})
    assert art.compile_flags == ["--ptxas-options=--register-usage-level=10", "-DTL_TEST=1"]
    assert nvcc.compile_cubin(art.source, art.arch, art.compile_flags)[:4] == b"\x7fELF"


def test_autotune_compile_threads_knob(monkeypatch):
    from tilelang.autotuner import tuner

    monkeypatch.setenv("TILELANG_AUTO_TUNING_CPU_COUNTS", "3")
    assert tuner._cpu_count() == 3
    monkeypatch.setenv("TILELANG_AUTO_TUNING_CPU_COUNTS", "-1")
    assert tuner._cpu_count() >= 1
    monkeypatch.setenv("TILELANG_AUTO_TUNING_CPU_COUNTS", "many")
    with pytest.raises(ValueError, match="TILELANG_AUTO_TUNING_CPU_COUNTS"):
        tuner._cpu_count()


def test_disable_tma_lower_is_deprecated_as_upstream_says():
    with pytest.warns(DeprecationWarning, match=r"tl.disable_tma_lower.*v0.1.10.*disable_tma=True"):
        out = normalize({PassConfigKey.TL_DISABLE_TMA_LOWER: True})
    assert out == {"tl.disable_tma_lower": True}


def test_pass_configs_from_the_environment_apply_under_the_kernels_own(monkeypatch):
    """TILELANG_PASS_CONFIGS: pass configs for every kernel the process builds (how one turns a key
    on for code one cannot edit, e.g. upstream's examples); a kernel's own pass_configs win, the
    result is part of the cache key, and a malformed value is an error naming the variable."""
    import tilelang.language as T
    from tilelang.jit import lower_for_compile, with_context_configs

    monkeypatch.setenv("TILELANG_PASS_CONFIGS", '{"tl.disable_tma_lower": true, "tl.disable_wgmma": true}')
    merged = with_context_configs({"tl.disable_wgmma": False})
    assert merged["tl.disable_tma_lower"] is True and merged["tl.disable_wgmma"] is False
    assert env.TILELANG_PASS_CONFIGS.startswith("{")

    @T.prim_func
    def add(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(256):
                B[i] = A[i] + 1.0

    key_on, _ = lower_for_compile(add, target="cuda -arch=sm_90a")
    monkeypatch.delenv("TILELANG_PASS_CONFIGS")
    key_off, _ = lower_for_compile(add, target="cuda -arch=sm_90a")
    assert key_on != key_off
    for bad, message in (("{not json", "must be a JSON object, e.g."), ("[1, 2]", "must be a JSON object of pass configs, got list")):
        monkeypatch.setenv("TILELANG_PASS_CONFIGS", bad)
        with pytest.raises(ValueError, match=f"TILELANG_PASS_CONFIGS {message}"):
            knobs.pass_configs()


def test_a_jit_factory_builds_again_when_the_environments_pass_configs_change(monkeypatch, tmp_path):
    """The in-memory kernels of a @tilelang.jit factory are keyed by TILELANG_PASS_CONFIGS too (as
    the disk cache is): a process that changes it gets kernels built under the new configs."""
    import tilelang.language as T

    @tilelang.jit
    def scale(n):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=128) as _:
                for i in T.Parallel(n):
                    A[i] = A[i] * 2.0
        return main

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TILELANG_PASS_CONFIGS", raising=False)
    plain = scale(256)
    monkeypatch.setenv("TILELANG_PASS_CONFIGS", '{"tl.disable_kept_binds": true}')
    other = scale(256)
    assert other is not plain and other is scale(256)
    monkeypatch.delenv("TILELANG_PASS_CONFIGS")
    assert scale(256) is plain
