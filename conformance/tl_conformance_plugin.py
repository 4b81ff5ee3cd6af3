"""Runs inside the tested process: records pytest results as JSON lines; also the CPU tier's worker.

``scripts/conformance.py`` (the parent side) uses this file in two ways:

- as a pytest plugin (``-p tl_conformance_plugin``, with this folder on ``PYTHONPATH``): when
  ``TL_CONFORMANCE_EVENTS`` names a file, every collected file, collected item and test phase is
  appended to it as one JSON object per line and flushed at once, so a crash or a kill loses
  nothing already recorded. ``TL_CONFORMANCE_ROOT`` (the upstream tree) makes paths relative to it.
- as a script, ``python tl_conformance_plugin.py SPEC.json EVENTS.jsonl``: the CPU tier's worker.
  For each unit of SPEC (a folder) it runs ``pytest --collect-only`` on the unit's test files in
  this process, then imports each of the unit's example modules, recording one event per file and
  per module, and forgets the folder's modules before the next unit so that same-named modules of
  different folders cannot shadow each other. A ``*-start`` event precedes each file and module so
  that the parent can name the one that hung or crashed the process.

Only the standard library and pytest are used (the GPU machine has no package index).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
import time
import traceback

_EVENTS = None
_ITEMS: dict[str, str] = {}

# The last line of a Python traceback names the exception: "pkg.mod.SomeError: message".
_EXC_LINE = re.compile(r"^(?:E\s+)?([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failed|Skipped)\b.*)$")


def emit(event: dict) -> None:
    """Append one event to the events file named by TL_CONFORMANCE_EVENTS (if any)."""
    global _EVENTS
    path = os.environ.get("TL_CONFORMANCE_EVENTS")
    if not path:
        return
    if _EVENTS is None or _EVENTS.name != path:
        _EVENTS = open(path, "a", encoding="utf-8")
    event.setdefault("t", round(time.time(), 3))
    _EVENTS.write(json.dumps(event) + "\n")
    _EVENTS.flush()


def relpath(path) -> str:
    """``path`` relative to the upstream tree (TL_CONFORMANCE_ROOT), with forward slashes."""
    root = os.environ.get("TL_CONFORMANCE_ROOT")
    text = os.path.abspath(str(path))
    if root:
        rel = os.path.relpath(text, root)
        if not rel.startswith(".."):
            text = rel
    return text.replace(os.sep, "/")


def first_error_line(text: str) -> str:
    """The exception line of a traceback or pytest report text: its last ``Type: message`` line
    (the final exception of a chain), else its last ``E`` line, else its last non-empty line."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        match = _EXC_LINE.match(ln.strip()) if ln.startswith("E ") or not ln.startswith(" ") else None
        if match and not ln.strip().startswith("During handling"):
            return match.group(1).strip()[:300]
    e_lines = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
    if e_lines:
        return e_lines[-1][:300]
    return lines[-1].strip()[:300] if lines else ""


def describe(longrepr) -> str:
    """One line for a pytest ``longrepr``: the crash message, a skip reason, or the error line."""
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, lineno, reason)
        return str(longrepr[2]).splitlines()[0][:300] if str(longrepr[2]) else ""
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", ""):
        message = crash.message.strip()
        if message.startswith("assert "):  # a bare assert: pytest gives the rewritten expression
            return ("AssertionError: " + message.splitlines()[0])[:300]
        match = _EXC_LINE.match(message.splitlines()[0])
        return (match.group(1) if match else first_error_line(message))[:300]
    return first_error_line(str(longrepr))


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.splitlines()[-lines:])


# ---------------------------------------------------------------- pytest hooks (both tiers)

def pytest_sessionstart(session) -> None:
    _ITEMS.clear()


def pytest_collectstart(collector) -> None:
    if type(collector).__name__ == "Module":
        emit({"ev": "collect-start", "file": relpath(collector.path)})


def pytest_collectreport(report) -> None:
    path = report.nodeid.split("::")[0]
    if "::" in report.nodeid or not path.endswith(".py"):
        return
    event = {"ev": "collect", "file": relpath(os.path.join(str(_rootdir()), path)), "outcome": report.outcome}
    if report.outcome != "passed":
        event["error"] = describe(report.longrepr)
        event["detail"] = _tail(str(report.longrepr))
    emit(event)


def pytest_itemcollected(item) -> None:
    nodeid = relpath(item.path) + "::" + item.nodeid.split("::", 1)[-1]
    _ITEMS[item.nodeid] = nodeid
    emit({"ev": "item", "nodeid": nodeid})


def pytest_runtest_logreport(report) -> None:
    event = {"ev": "test", "nodeid": _ITEMS.get(report.nodeid, report.nodeid), "when": report.when,
             "outcome": report.outcome, "duration": round(report.duration, 3)}
    if hasattr(report, "wasxfail"):
        event["xfail"] = True
    if report.outcome != "passed":
        event["error"] = describe(report.longrepr)
        if report.outcome == "failed":
            event["detail"] = _tail(str(report.longrepr))
    emit(event)


def pytest_sessionfinish(session, exitstatus) -> None:
    emit({"ev": "session-finish", "exitstatus": int(exitstatus)})


_ROOTDIR = [None]


def pytest_configure(config) -> None:
    _ROOTDIR[0] = config.rootpath


def _rootdir():
    return _ROOTDIR[0] or os.getcwd()


# ---------------------------------------------------------------- the CPU tier's worker

def _collect(files: list[str]) -> None:
    import pytest

    argv = ["--collect-only", "-q", "-p", "no:cacheprovider", *files]
    try:
        pytest.main(argv, plugins=[sys.modules[__name__]])
    except BaseException as err:  # noqa: BLE001 - record and go on to the unit's modules
        emit({"ev": "collect-abort", "error": f"{type(err).__name__}: {err}"[:300]})


def _import(module: dict) -> None:
    emit({"ev": "module-start", "module": module["rel"]})
    start = time.time()
    sys.argv = [module["path"]]
    try:
        importlib.import_module(module["name"])
        event = {"ev": "module", "module": module["rel"], "outcome": "passed"}
    except BaseException as err:  # noqa: BLE001 - SystemExit and friends are results too
        text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
        event = {"ev": "module", "module": module["rel"], "outcome": "failed",
                 "error": first_error_line(text) or type(err).__name__, "detail": _tail(text)}
    event["duration"] = round(time.time() - start, 3)
    emit(event)


def _forget_upstream_modules(root: str, base_path: list[str]) -> None:
    """Drop every module loaded from the upstream tree, so the next folder imports its own."""
    root = os.path.abspath(root) + os.sep
    # Decide first, delete after: a namespace package's __path__ is recomputed from its parent's
    # entry in sys.modules, so deleting ``examples`` before reading ``examples.gemm_sp.__path__``
    # would leave the child behind (and break the next ``from examples.gemm_sp import ...``).
    drop = []
    for name, mod in list(sys.modules.items()):
        try:  # some extension modules (torch's) have exotic __file__ / __path__ objects
            file = str(getattr(mod, "__file__", None) or "")
            paths = [str(p) for p in list(getattr(mod, "__path__", None) or [])]
        except Exception:  # noqa: BLE001 - not a module of the upstream tree
            continue
        if file.startswith(root) or any(p.startswith(root) for p in paths):
            drop.append(name)
    prefixes = tuple(name + "." for name in drop)
    for name in list(sys.modules):
        if name in drop or name.startswith(prefixes):
            del sys.modules[name]
    sys.path[:] = base_path
    importlib.invalidate_caches()


def run_worker(spec_path: str, events_path: str) -> int:
    """Run every unit of the spec, one event per file and module (see the module docstring)."""
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    os.environ["TL_CONFORMANCE_EVENTS"] = events_path
    os.environ["TL_CONFORMANCE_ROOT"] = spec["root"]
    base_path = [p for p in sys.path[1:]]
    for unit in spec["units"]:
        emit({"ev": "unit-start", "unit": unit["id"]})
        os.chdir(unit["cwd"])
        sys.path[:] = [unit["cwd"], *base_path]
        if unit["files"]:
            _collect(unit["files"])
            os.chdir(unit["cwd"])
            sys.path[:] = [unit["cwd"], *base_path]
        for module in unit["modules"]:
            _import(module)
        _forget_upstream_modules(spec["root"], base_path)
        emit({"ev": "unit-done", "unit": unit["id"]})
    tilelang = sys.modules.get("tilelang")
    emit({"ev": "env", "tilelang": getattr(tilelang, "__file__", None)})
    return 0


if __name__ == "__main__":
    sys.exit(run_worker(sys.argv[1], sys.argv[2]))
