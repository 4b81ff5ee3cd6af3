"""Tuning results on disk: ``<cache dir>/autotune/<key>.json``.

Contract:
- ``tuning_key(factory, arguments, configs, compile_args, arch)``: ``tilelang.jit.cache.cache_key``
  over the factory's source (its marshalled code when no source can be read) and the values
  its closure captures (for a ``functools.partial``: its function's, plus the bound arguments;
  for a callable object: its class's source and its attributes), the call's bound arguments,
  the config list, the compile arguments, the target arch and ``tilelang.__version__``;
  ``cache_key`` adds the hash of the compiler's own sources and the nvcc in use, so a
  compiler change re-tunes.  Values with no canonical form (dtype objects, enums of other
  libraries...) enter as their type and ``str``, or as their type alone when that text is
  long or names a memory address.
- ``load(key)`` returns the stored record (a dict) or None; it never raises, and a damaged
  file is deleted and reported as a miss.  ``store(key, record)`` writes a temp file and
  ``os.replace``-s it into place, so readers never see half a record; it never raises (a
  warning is emitted instead).  Both obey TILELANG_DISABLE_CACHE like the kernel cache, and
  TILELANG_AUTO_TUNING_DISABLE_CACHE (``reuse_enabled()``; the tuner's in-process memo too).
- ``jsonable(value)``: the JSON form of a config as stored in a record.
- ``force_retune()``: TILELANG_AUTOTUNE_FORCE (a boolean, parsed like every tilelang knob);
  when true, stored results are ignored (and overwritten by the new run).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import marshal
import os
import tempfile
import warnings
from pathlib import Path

from tilelang import knobs
from tilelang.jit import cache

RECORD_FORMAT = 1
FORCE_ENV = "TILELANG_AUTOTUNE_FORCE"
_MAX_TEXT = 200


def force_retune() -> bool:
    return knobs.autotune_force()


def directory() -> Path:
    return cache.cache_dir() / "autotune"


def path_for(key: str) -> Path:
    return directory() / f"{key}.json"


def plain(value):
    """``value`` in a form ``cache.canonical_json`` accepts, stable across processes."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    try:
        cache.canonical_json(value)
        return value
    except TypeError:
        pass
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    text = str(value)
    if len(text) > _MAX_TEXT or " at 0x" in text:
        return {"__type__": kind}
    return {"__type__": kind, "__str__": text}


def jsonable(value):
    """The JSON form of ``value`` (configs as stored in a record)."""
    return json.loads(json.dumps(plain(value), default=str))


def callable_identity(fn) -> dict:
    """What a callback computes, as a tuning key part: its bytecode, names and constants (not its
    source text or line, so ``lambda a, b: a @ b`` is the same callback wherever it is written)
    and its captured values. A callable object counts by its class and attributes."""
    if isinstance(fn, functools.partial):
        return {"partial": callable_identity(fn.func), "args": plain(fn.args), "keywords": plain(fn.keywords)}
    code = getattr(fn, "__code__", None)
    if code is None:
        return _identity(fn)
    return {"code": _bytecode(code), "closure": _closure(fn), "defaults": plain(getattr(fn, "__defaults__", None))}


def _bytecode(code) -> str:
    def part(c):
        consts = [part(k) if hasattr(k, "co_code") else repr(k) for k in c.co_consts]
        return [c.co_code.hex(), list(c.co_names), list(c.co_varnames), consts]

    return hashlib.sha256(json.dumps(part(code)).encode()).hexdigest()


def _identity(factory) -> dict:
    """What the factory computes: its source and captured values (see the module docstring)."""
    if isinstance(factory, functools.partial):
        return {"partial": _identity(factory.func), "args": plain(factory.args), "keywords": plain(factory.keywords)}
    if not inspect.isroutine(factory):  # a callable object: its class, and its attributes
        return {"class": _code(type(factory)), "state": plain(getattr(factory, "__dict__", {}))}
    return {"source": _code(factory), "closure": _closure(factory)}


def _code(obj) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        code = getattr(obj, "__code__", None)
        if code is None:
            return f"<no source: {getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', '?')}>"
        return "marshal:" + hashlib.sha256(marshal.dumps(code)).hexdigest()


def _closure(factory) -> dict:
    code, cells = getattr(factory, "__code__", None), getattr(factory, "__closure__", None)
    if code is None or not cells:
        return {}
    out = {}
    for name, cell in zip(code.co_freevars, cells):
        try:
            out[name] = plain(cell.cell_contents)
        except ValueError:  # an empty cell
            out[name] = None
    return out


def tuning_key(factory, arguments: dict, configs: list, compile_args: dict, arch: str) -> str:
    from tilelang.version import __version__

    return cache.cache_key("autotune", RECORD_FORMAT, __version__, _identity(factory), plain(arguments),
                           plain(configs), plain(compile_args), arch)


def reuse_enabled() -> bool:
    """Whether tuning results may be reused (from disk or this process): the kernel cache is on
    (TILELANG_DISABLE_CACHE, ``tilelang.disable_cache()``) and TILELANG_AUTO_TUNING_DISABLE_CACHE
    is off, both read at call time."""
    return cache.enabled() and not knobs.autotune_cache_disabled()


def load(key: str) -> dict | None:
    if not reuse_enabled():
        return None
    path = path_for(key)
    try:
        record = json.loads(path.read_text())
        if record.get("format") != RECORD_FORMAT or not isinstance(record.get("best_index"), int):
            raise ValueError("not a tuning record")
        return record
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - any damage is a miss, never an error
        try:
            path.unlink()
        except OSError:
            pass
        return None


def store(key: str, record: dict) -> Path | None:
    if not reuse_enabled():
        return None
    final = path_for(key)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".tmp-{key[:16]}-", suffix=".json", dir=final.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"format": RECORD_FORMAT, **record}, f, indent=1, sort_keys=True, default=str)
            os.replace(tmp, final)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return final
    except Exception as e:  # noqa: BLE001 - a read-only or full disk must not break tuning
        warnings.warn(f"tilelang: could not write autotune record {key[:16]}...: {e}", RuntimeWarning)
        return None
