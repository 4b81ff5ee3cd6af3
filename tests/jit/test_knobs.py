"""Environment knobs are read at call time and typed."""

from pathlib import Path

import pytest

from tilelang import knobs


def test_defaults(monkeypatch):
    for name in knobs.KNOBS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    assert knobs.cache_dir() == Path("~/.cache/tilelang").expanduser()
    assert knobs.disable_cache() is False
    assert knobs.nvcc_path() is None and knobs.cuda_home() is None
    assert knobs.src_dir() == Path(knobs.__file__).resolve().parent.parent / "src"
    assert knobs.use_nvrtc() is knobs.dump_ir() is knobs.frontend_debug() is knobs.keep_temps() is False
    assert knobs.dump_ir_dir() is None


def test_values_are_read_at_call_time(monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    assert knobs.cache_dir() == tmp_path
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "b"))
    assert knobs.cache_dir() == tmp_path / "b"
    for raw, value in [("1", True), ("TRUE", True), ("on", True), ("0", False), ("no", False), ("", False)]:
        monkeypatch.setenv("TILELANG_DISABLE_CACHE", raw)
        assert knobs.disable_cache() is value
    monkeypatch.setenv("TILELANG_SRC_DIR", "~/x")
    assert knobs.src_dir() == Path("~/x").expanduser()
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("CUDA_PATH", "/opt/cuda")
    assert knobs.cuda_home() == Path("/opt/cuda")


def test_bad_boolean_names_the_variable(monkeypatch):
    monkeypatch.setenv("TILELANG_KEEP_TEMPS", "maybe")
    with pytest.raises(ValueError, match="TILELANG_KEEP_TEMPS='maybe' is not a boolean"):
        knobs.keep_temps()


def test_dump_ir_accepts_a_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_DUMP_IR", str(tmp_path))
    assert knobs.dump_ir() is True and knobs.dump_ir_dir() == tmp_path
    monkeypatch.setenv("TILELANG_DUMP_IR", "1")
    assert knobs.dump_ir() is True and knobs.dump_ir_dir() is None


def test_describe_lists_every_knob():
    text = knobs.describe()
    for name in knobs.KNOBS:
        assert name in text
