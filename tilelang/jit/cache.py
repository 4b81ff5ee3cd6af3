"""On-disk cache of compiled kernels (KernelArtifact + cubin).

Contract:
- Root: TILELANG_CACHE_DIR (default ~/.cache/tilelang).  TILELANG_DISABLE_CACHE=1
  makes ``load`` always miss and ``store`` do nothing.
- ``cache_key(*parts)``: sha256 hex over a canonical JSON of ``parts`` (dicts
  with sorted keys; tuples/sets as lists; bytes as hex; dataclasses as dicts)
  plus ``compiler_version()`` and the nvcc in use.  Objects without a
  canonical form raise TypeError: convert IR to text before passing it.
  Stable across processes: nothing depends on id(), hash randomisation or
  dict insertion order.
- ``compiler_version()``: sha256 over every ``tilelang/**/*.py`` and every
  ``src/**`` header (.h/.hpp/.cuh), by relative path and content, computed
  once per process.
- Entry layout: ``<root>/<key[:2]>/<key>/`` holding ``artifact.json`` (with the
  cubin's sha256), ``kernel.cubin`` and ``kernel.cu`` (for humans); an artifact of
  several kernels keeps each part's cubin as ``part<i>.cubin`` (its sha256 in the
  JSON's ``part_cubin_sha256``).  An entry
  is written in a temp dir beside it and renamed into place, so readers never
  see half an entry; if two processes race, the first rename wins.
- ``load(key)`` returns a KernelArtifact or None and never raises: any broken
  entry (bad JSON, missing or mismatching cubin) is deleted and reported as a
  miss.  ``store`` never raises either (a warning is emitted instead): a cache
  that cannot be written must not break compilation.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
from importlib import metadata
from pathlib import Path

from tilelang import knobs
from tilelang.artifact import KernelArtifact

_JSON, _CUBIN, _SOURCE = "artifact.json", "kernel.cubin", "kernel.cu"
_TMP_PREFIX = ".tmp-"
_STALE_TMP_SECONDS = 3600


_SWITCH: list = [None]   # tilelang.enable_cache() / disable_cache() in this process; None: the knob


def enabled() -> bool:
    if _SWITCH[0] is not None:
        return _SWITCH[0]
    return not knobs.disable_cache()


def set_enabled(on: bool | None) -> None:
    """Turn the disk cache on or off for this process (None: back to TILELANG_DISABLE_CACHE)."""
    _SWITCH[0] = on


def cache_dir() -> Path:
    return knobs.cache_dir()


# ---------------------------------------------------------------- keys
def _canonical(obj):
    """Reduce ``obj`` to JSON types with a single, order-independent form."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return repr(obj)  # repr round-trips exactly; avoids json's nan handling
    if isinstance(obj, enum.Enum):
        return _canonical(obj.value)
    if isinstance(obj, (bytes, bytearray)):
        return {"__bytes__": bytes(obj).hex()}
    if isinstance(obj, Path):
        return str(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"__dataclass__": type(obj).__name__,
                **{f.name: _canonical(getattr(obj, f.name)) for f in dataclasses.fields(obj)}}
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, (str, int)):
                raise TypeError(f"cache_key: dict key {k!r} must be str or int")
            out[f"{type(k).__name__}:{k}"] = _canonical(v)
        return out
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        items = [_canonical(v) for v in obj]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    raise TypeError(f"cache_key: cannot canonicalise {type(obj).__name__} {obj!r}; "
                    "pass a str (e.g. the IR's text), number, bytes, list, tuple, dict or dataclass")


def canonical_json(*parts) -> str:
    return json.dumps(_canonical(list(parts)), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True)


def _dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


@functools.lru_cache(maxsize=1)
def compiler_version() -> str:
    """sha256 of tilelang's Python sources and src/ headers, plus the apache-tvm version."""
    h = hashlib.sha256()
    roots = [("tilelang", knobs.package_dir(), ("*.py",)),
             ("src", knobs.src_dir(), ("*.h", "*.hpp", "*.cuh"))]
    for label, root, patterns in roots:
        files = sorted({p for pat in patterns for p in root.rglob(pat)
                        if "__pycache__" not in p.parts and p.is_file()})
        for path in files:
            rel = path.relative_to(root).as_posix()
            h.update(f"{label}/{rel}\0".encode())
            h.update(hashlib.sha256(path.read_bytes()).digest())
    h.update(f"apache-tvm={_dist_version('apache-tvm')}".encode())
    return h.hexdigest()


def cache_key(*parts) -> str:
    """sha256 hex of the canonical JSON of ``parts``, compiler_version() and the nvcc identity."""
    from tilelang.jit.nvcc import toolchain_fingerprint  # late: keeps import light

    payload = canonical_json(list(parts), compiler_version(), toolchain_fingerprint())
    return hashlib.sha256(payload.encode()).hexdigest()


# ---------------------------------------------------------------- entries
def entry_dir(key: str) -> Path:
    if len(key) < 3 or not all(c in "0123456789abcdef" for c in key):
        raise ValueError(f"cache key {key!r} is not a lowercase hex digest")
    return cache_dir() / key[:2] / key


def load(key: str) -> KernelArtifact | None:
    """The cached artifact for ``key`` (with cubin), or None on a miss or a broken entry."""
    if not enabled():
        return None
    try:
        path = entry_dir(key)
    except ValueError:
        return None
    if not path.is_dir():
        return None
    try:
        return _read_entry(path)
    except Exception:  # noqa: BLE001 - any damage at all is a miss, never an error
        _discard(path)
        return None


def _read_cubin(file: Path, expected: str | None) -> bytes | None:
    if expected is None:
        return None
    cubin = file.read_bytes()
    if hashlib.sha256(cubin).hexdigest() != expected:
        raise ValueError(f"{file.name}: hash mismatch")
    return cubin


def _read_entry(path: Path) -> KernelArtifact:
    data = json.loads((path / _JSON).read_text())
    cubin = _read_cubin(path / _CUBIN, data.pop("cubin_sha256"))
    part_shas = data.pop("part_cubin_sha256", None) or []
    artifact = KernelArtifact.from_dict(data, cubin=cubin)
    if len(part_shas) != len(artifact.parts):
        raise ValueError("part cubins do not match the parts")
    for i, (part, sha) in enumerate(zip(artifact.parts, part_shas)):
        part.cubin = _read_cubin(path / f"part{i}.cubin", sha)
    return artifact


def store(key: str, artifact: KernelArtifact) -> Path | None:
    """Write ``artifact`` under ``key`` atomically; return the entry dir (None when disabled/failed)."""
    if not enabled():
        return None
    try:
        final = entry_dir(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        _sweep_stale_temps(final.parent)
        tmp = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{key[:16]}-", dir=final.parent))
        try:
            _write_entry(tmp, artifact)
            os.rename(tmp, final)  # atomic; fails if another writer got there first
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not final.is_dir():
                raise
        return final
    except Exception as e:  # noqa: BLE001 - a read-only or full disk must not break compiling
        warnings.warn(f"tilelang: could not write kernel cache entry {key[:16]}...: {e}", RuntimeWarning)
        return None


def _write_entry(tmp: Path, artifact: KernelArtifact) -> None:
    data = artifact.to_dict()
    data["cubin_sha256"] = None
    if artifact.cubin is not None:
        (tmp / _CUBIN).write_bytes(artifact.cubin)
        data["cubin_sha256"] = hashlib.sha256(artifact.cubin).hexdigest()
    if artifact.parts:
        data["part_cubin_sha256"] = []
        for i, part in enumerate(artifact.parts):
            if part.cubin is not None:
                (tmp / f"part{i}.cubin").write_bytes(part.cubin)
            data["part_cubin_sha256"].append(
                None if part.cubin is None else hashlib.sha256(part.cubin).hexdigest())
    (tmp / _SOURCE).write_text(artifact.source)
    # the JSON goes last: an entry with a JSON is complete by construction
    (tmp / _JSON).write_text(json.dumps(data, indent=1, sort_keys=True))


def write_entry(path: Path, artifact: KernelArtifact) -> None:
    """Write ``artifact`` as an entry into the directory ``path`` (created; an entry already there
    is replaced), outside the cache (``AutotuneResult.save_to_disk``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{path.name}-", dir=path.parent))
    try:
        _write_entry(tmp, artifact)
        if path.exists():
            shutil.rmtree(path)
        os.rename(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def read_entry(path: Path) -> KernelArtifact:
    """The artifact ``write_entry`` (or ``store``) wrote into ``path``; raises on a missing or
    damaged entry."""
    return _read_entry(Path(path))


def _discard(path: Path) -> None:
    """Remove a broken entry; rename first so no reader sees it half-deleted."""
    trash = path.parent / f"{_TMP_PREFIX}trash-{path.name[:16]}-{os.getpid()}-{time.monotonic_ns()}"
    try:
        os.rename(path, trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def _sweep_stale_temps(shard: Path) -> None:
    """Delete temp dirs left by writers that died more than an hour ago."""
    now = time.time()
    for p in shard.glob(f"{_TMP_PREFIX}*"):
        try:
            if now - p.stat().st_mtime > _STALE_TMP_SECONDS:
                shutil.rmtree(p, ignore_errors=True)
        except OSError:
            pass


def clear() -> None:
    """Delete every cache entry (and stray temp dirs) under the cache root, and the stored
    autotuning results (``autotune/``).

    Only the two-hex-digit shard directories this module creates and ``autotune`` are removed,
    so pointing TILELANG_CACHE_DIR at a shared directory cannot wipe it."""
    root = cache_dir()
    if not root.is_dir():
        return
    for child in root.iterdir():
        is_shard = len(child.name) == 2 and all(c in "0123456789abcdef" for c in child.name)
        if (is_shard or child.name == "autotune") and child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
