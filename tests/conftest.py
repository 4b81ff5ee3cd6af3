"""Fixtures shared across test directories."""

import pytest


@pytest.fixture
def isolated_autotune(tmp_path, monkeypatch):
    """A private kernel / autotune cache, no cache or force knobs from the environment, and an
    empty in-process tuning memo before and after the test."""
    from tilelang.autotuner import tuner

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("TILELANG_DISABLE_CACHE", "TILELANG_AUTOTUNE_FORCE"):
        monkeypatch.delenv(name, raising=False)
    tuner._MEMO.clear()
    yield
    tuner._MEMO.clear()
