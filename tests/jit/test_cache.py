"""Disk cache: round trip, atomic writes, damaged entries, stable keys."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilelang.jit import cache
from tilelang.artifact import KernelArtifact, ParamSpec

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def cache_root(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(root))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    return root


def artifact(cubin=b"\x7fELF fake cubin"):
    return KernelArtifact(
        name="k", source='extern "C" __global__ void k(float* x) {}',
        params=[ParamSpec("x", "tensor", "float32", ["N"])], kernel_args=["x"],
        grid=["N", "1", "1"], block=[32, 1, 1], dynamic_smem=0, arch="sm_90a",
        symbols={"N": [0, 0]}, out_idx=[], cubin=cubin, compile_flags=["-DX"])


KEY = cache.cache_key("unit-test", 1)


def test_round_trip(cache_root):
    assert cache.load(KEY) is None
    path = cache.store(KEY, artifact())
    assert path == cache_root / KEY[:2] / KEY
    assert sorted(p.name for p in path.iterdir()) == ["artifact.json", "kernel.cu", "kernel.cubin"]
    back = cache.load(KEY)
    assert back == artifact()
    assert (path / "kernel.cu").read_text() == artifact().source


def test_round_trip_without_cubin():
    cache.store(KEY, artifact(cubin=None))
    assert cache.load(KEY) == artifact(cubin=None)


def test_disabled(monkeypatch, cache_root):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    assert cache.store(KEY, artifact()) is None
    assert not cache_root.exists()
    assert cache.load(KEY) is None


def test_partial_temp_dir_is_ignored(cache_root):
    shard = cache_root / KEY[:2]
    tmp = shard / f".tmp-{KEY[:16]}-crashed"
    tmp.mkdir(parents=True)
    (tmp / "kernel.cubin").write_bytes(b"half")  # a writer died before renaming
    assert cache.load(KEY) is None
    cache.store(KEY, artifact())
    assert cache.load(KEY) == artifact()


def test_stale_temp_dirs_are_swept(cache_root):
    shard = cache_root / KEY[:2]
    old = shard / ".tmp-old"
    old.mkdir(parents=True)
    os.utime(old, (0, 0))
    cache.store(KEY, artifact())
    assert not old.exists()


@pytest.mark.parametrize("damage", ["bad_json", "no_json", "no_cubin", "wrong_cubin", "bad_field"])
def test_damaged_entry_is_a_miss_and_removed(damage, cache_root):
    path = cache.store(KEY, artifact())
    if damage == "bad_json":
        (path / "artifact.json").write_text("{not json")
    elif damage == "no_json":
        (path / "artifact.json").unlink()
    elif damage == "no_cubin":
        (path / "kernel.cubin").unlink()
    elif damage == "wrong_cubin":
        (path / "kernel.cubin").write_bytes(b"\x7fELF other bytes")
    else:
        data = json.loads((path / "artifact.json").read_text())
        data["params"][0]["nonsense"] = 1
        (path / "artifact.json").write_text(json.dumps(data))
    assert cache.load(KEY) is None
    assert not path.exists()
    assert not list((cache_root / KEY[:2]).iterdir())  # no trash left behind
    cache.store(KEY, artifact())  # rebuilt entry works again
    assert cache.load(KEY) == artifact()


def test_second_store_of_same_key_keeps_first(cache_root):
    cache.store(KEY, artifact())
    other = artifact(cubin=b"\x7fELF second")
    assert cache.store(KEY, other) == cache_root / KEY[:2] / KEY
    assert cache.load(KEY).cubin == artifact().cubin
    assert [p.name for p in (cache_root / KEY[:2]).iterdir()] == [KEY]


def test_store_failure_warns_instead_of_raising(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(blocker))
    with pytest.warns(RuntimeWarning, match="could not write kernel cache entry"):
        assert cache.store(KEY, artifact()) is None
    assert cache.load(KEY) is None


def test_clear_only_removes_shards(cache_root):
    cache.store(KEY, artifact())
    (cache_root / "README").write_text("keep me")
    (cache_root / "mine").mkdir()
    (cache_root / "autotune").mkdir()                       # stored autotuning results go too
    (cache_root / "autotune" / "k.json").write_text("{}")
    cache.clear()
    assert sorted(p.name for p in cache_root.iterdir()) == ["README", "mine"]
    assert cache.load(KEY) is None


def test_bad_key_is_a_miss():
    assert cache.load("../../etc") is None


# ---------------------------------------------------------------- keys
def test_key_ignores_dict_order_and_distinguishes_types():
    assert cache.cache_key({"a": 1, "b": [1, 2]}) == cache.cache_key({"b": [1, 2], "a": 1})
    assert cache.cache_key({"a": 1}) != cache.cache_key({"a": "1"})
    assert cache.cache_key({1: "x"}) != cache.cache_key({"1": "x"})
    assert cache.cache_key(True) != cache.cache_key(1)
    assert cache.cache_key((1, 2)) == cache.cache_key([1, 2])
    assert cache.cache_key({3, 1, 2}) == cache.cache_key({2, 3, 1})
    assert cache.cache_key(b"\x00") != cache.cache_key("00")


def test_key_changes_with_arch_flags_and_pass_configs():
    base = dict(src="T.prim_func ...", arch="sm_90a", flags=["-O3"], pass_configs={"tl.disable_tma": False})
    key = cache.cache_key(base)
    assert cache.cache_key({**base, "arch": "sm_80"}) != key
    assert cache.cache_key({**base, "flags": ["-O3", "--use_fast_math"]}) != key
    assert cache.cache_key({**base, "pass_configs": {"tl.disable_tma": True}}) != key
    assert cache.cache_key({**base, "pass_configs": {}}) != key
    assert cache.cache_key(dict(base)) == key


def test_key_rejects_objects_without_canonical_form():
    with pytest.raises(TypeError, match="cannot canonicalise object"):
        cache.cache_key(object())


# The package __init__ files (the compiler, tvm) are bypassed so the two subprocesses stay fast:
# only the cache module and what it imports are needed to compute a key.
KEY_SCRIPT = ("import sys, types\n"
              "for name in ('tilelang', 'tilelang.jit'):\n"
              "    mod = types.ModuleType(name); mod.__path__ = [name.replace('.', '/')]; sys.modules[name] = mod\n"
              "from tilelang.jit.cache import cache_key, compiler_version; "
              "print(cache_key({'b': [1, 2.5, None], 'a': {'x': (1, 2)}}, 'sm_90a', {3, 1}, b'\\x01'), "
              "compiler_version())")


def test_key_stable_across_processes():
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        proc = subprocess.run([sys.executable, "-c", KEY_SCRIPT], capture_output=True, text=True,
                              env=env, cwd=REPO, check=True)
        outs.append(proc.stdout.split())
    cache.compiler_version.cache_clear()  # recompute: sources may have been edited since import
    here = [cache.cache_key({"a": {"x": (1, 2)}, "b": [1, 2.5, None]}, "sm_90a", {1, 3}, b"\x01"),
            cache.compiler_version()]
    assert outs[0] == outs[1] == here


def test_compiler_version_covers_headers(monkeypatch, tmp_path):
    src = tmp_path / "src"
    (src / "tl").mkdir(parents=True)
    header = src / "tl" / "tl.h"
    header.write_text("// v1\n")
    monkeypatch.setenv("TILELANG_SRC_DIR", str(src))
    try:
        cache.compiler_version.cache_clear()
        v1 = cache.compiler_version()
        header.write_text("// v2\n")
        cache.compiler_version.cache_clear()
        v2 = cache.compiler_version()
    finally:
        cache.compiler_version.cache_clear()
    assert v1 != v2
