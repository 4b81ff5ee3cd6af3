"""Upstream's performance-regression harness, as its example ``regression_*.py`` scripts call it.

    def regression_gemm():
        tilelang.testing.process_func(example_gemm.run_regression_perf, M=1024)

    if __name__ == "__main__":
        tilelang.testing.regression()

Contract:
- ``process_func(func, name=None, **kwargs)`` calls ``func(**kwargs)``, which returns a latency
  (any positive unit: only ratios between runs matter), and records it under ``name`` (default:
  the function's module, a leading ``regression_`` dropped). A result <= 0 is retried up to five
  times, then dropped with a RuntimeWarning.
- ``regression(prefixes=("regression_",), verbose=True)`` runs every callable of the calling
  module whose name starts with a prefix, in name order (``TL_PERF_REGRESSION_ONLY``: a comma
  list or JSON list of glob / substring filters), then prints one ``name: latency`` line per
  result, or one ``__TILELANG_PERF_RESULTS_JSON__=[...]`` line when
  ``TL_PERF_REGRESSION_FORMAT=json``.
"""

from __future__ import annotations

import fnmatch
import inspect
import json
import os
import time
import warnings
from dataclasses import dataclass

RESULTS_JSON_PREFIX = "__TILELANG_PERF_RESULTS_JSON__="
_MAX_RETRIES = 5


@dataclass(frozen=True)
class PerfResult:
    name: str
    latency: float
    case: str | None = None


_RESULTS: list[PerfResult] = []
_CASE: list[str | None] = [None]


def _strip(name: str) -> str:
    return name[len("regression_"):] if name.startswith("regression_") else name


def process_func(func, name: str | None = None, /, **kwargs) -> None:
    """Run one perf function and record its latency (see the module docstring)."""
    label = _strip(getattr(func, "__module__", "<unknown>") if name is None else name)
    latency = float(func(**kwargs))
    for _ in range(_MAX_RETRIES):
        if latency > 0:
            break
        latency = float(func(**kwargs))
    if latency <= 0:
        warnings.warn(f"{label} measured a latency of {latency} <= 0; the result is dropped", RuntimeWarning,
                      stacklevel=2)
        return
    _RESULTS.append(PerfResult(label, latency, _CASE[0]))


def _filters() -> list[str]:
    text = os.environ.get("TL_PERF_REGRESSION_ONLY", "").strip()
    if not text:
        return []
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        parsed = text.split(",")
    parsed = [parsed] if isinstance(parsed, str) else parsed
    return [str(p).strip().lower() for p in parsed if str(p).strip()] if isinstance(parsed, list) else []


def _selected(name: str, filters: list[str]) -> bool:
    names = (name.lower(), _strip(name).lower())
    return not filters or any(fnmatch.fnmatch(n, f) or f in n for f in filters for n in names)


def _emit() -> None:
    if os.environ.get("TL_PERF_REGRESSION_FORMAT", "text").strip().lower() == "json":
        items = [{"name": r.name, "latency": r.latency, **({"case": r.case} if r.case else {})} for r in _RESULTS]
        print(RESULTS_JSON_PREFIX + json.dumps(items, separators=(",", ":")))
        return
    for r in _RESULTS:
        print(f"{r.name}: {r.latency}")


def regression(prefixes=("regression_",), verbose: bool = True) -> None:
    """Run the caller's ``regression_*`` functions and print their results."""
    caller = inspect.currentframe().f_back.f_globals
    filters = _filters()
    cases = sorted((k, v) for k, v in caller.items()
                   if callable(v) and any(k.startswith(p) for p in prefixes) and _selected(k, filters))
    _RESULTS.clear()
    for index, (name, fn) in enumerate(cases, 1):
        _CASE[0] = _strip(name)
        if verbose:
            print(f"  [{index}/{len(cases)}] {_CASE[0]}", end="", flush=True)
        start = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fn()
        finally:
            _CASE[0] = None
        if verbose:
            print(f" ({time.perf_counter() - start:.2f}s)", flush=True)
    _emit()


__all__ = ["PerfResult", "process_func", "regression"]
