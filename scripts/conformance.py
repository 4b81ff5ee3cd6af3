#!/usr/bin/env python3
"""Run upstream TileLang's own tests and examples, unchanged, against our ``tilelang`` package.

  python scripts/conformance.py cpu    [--upstream DIR] [--only PAT...] [--jobs N] [--timeout S]
                                       [--out DIR] [--all] [--update-expected [--allow-regression]]
                                       [--update-doc]
  python scripts/conformance.py gpu    [--upstream DIR] [--only PAT...] [--jobs N] [--timeout S]
                                       [--example-timeout S] [--out DIR] [--all]
  python scripts/conformance.py mains  [--upstream DIR] [--only PAT...] [--jobs N] [--timeout S]
                                       [--out DIR] [--python-path DIR]... [--python EXE] [--budget S]
                                       [--resume JSON]... [--dry-run [--all]]
  python scripts/conformance.py report RESULTS.json... [--all] [--update-doc] [--update-expected]
  python scripts/conformance.py report-mains OURS.json UPSTREAM.json [--update-doc [--all]]

The CPU tier runs ``pytest --collect-only`` on every upstream test file and imports every example
module, batched per folder in ``--jobs`` worker processes (conformance/tl_conformance_plugin.py),
and compares the result with conformance/expected_cpu.json: exit status 1 when a file that collected
(or a module that imported) before no longer does. The GPU tier runs each unit-test file, and each
example folder's tests, as its own ``python -m pytest -q -p no:cacheprovider`` process with a fresh
TILELANG_CACHE_DIR and compares the counts with upstream's BASELINE.md. Both write
``conformance-<tier>.json`` and ``report.md`` under ``--out``. The mains mode runs every example
module that no test file of its folder covers as a program (``python MODULE.py`` in its folder),
once with our package and once with upstream's (``--python-path``), and ``report-mains`` compares
the two runs module by module (exit 0 counts as correct: the examples check their own results).
Only the standard library and pytest are needed. Exit status: 0 fine, 1 regression (CPU tier,
report-mains), 2 bad usage or no upstream tree.
See docs/conformance.md.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent / "conformance"))
import conformance_report as rep  # noqa: E402
import tl_conformance_plugin as plugin  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "conformance"
PLUGIN = DATA / "tl_conformance_plugin.py"
EXPECTED = DATA / "expected_cpu.json"
EXCLUSIONS = DATA / "exclusions.toml"
DOC = ROOT / "docs" / "conformance.md"
# Where the pinned upstream copy may lie: beside the checkout, inside it, or carried to the GPU
# machine in the git-ignored .gpu/ folder (see docs/conformance.md).
UPSTREAM_CANDIDATES = [ROOT.parent / "shared" / "conformance" / "upstream", ROOT / "shared" / "conformance" / "upstream",
                       ROOT / ".gpu" / "conformance" / "upstream"]
DEFAULT_UPSTREAM = next((p for p in UPSTREAM_CANDIDATES if p.is_dir()), UPSTREAM_CANDIDATES[0])


# ---------------------------------------------------------------- discovery

def _is_package(folder: Path) -> bool:
    """A folder imported as a package of its parent: it has ``__init__.py``, or its modules use
    relative imports (a namespace package, e.g. examples/kda/FLA_KDA)."""
    if (folder / "__init__.py").is_file():
        return True
    relative = re.compile(r"^from \.", re.MULTILINE)
    return any(relative.search(p.read_text(errors="replace")) for p in folder.glob("*.py"))


def _module_specs(folder: Path, upstream: Path) -> list[dict]:
    """Every example module importable from ``folder``: its own files, and packages below it."""
    specs = []
    for path in sorted(folder.glob("*.py")):
        if not path.name.startswith("test_") and path.name != "conftest.py":
            specs.append({"rel": path.relative_to(upstream).as_posix(), "name": path.stem, "path": str(path)})
    for pkg in sorted(p for p in folder.iterdir() if p.is_dir() and _is_package(p)):
        for path in sorted(pkg.rglob("*.py")):
            dotted = path.relative_to(folder).with_suffix("").parts
            name = ".".join(dotted[:-1] if dotted[-1] == "__init__" else dotted)
            specs.append({"rel": path.relative_to(upstream).as_posix(), "name": name, "path": str(path)})
    return specs


def discover(upstream: Path) -> list[dict]:
    """One unit per folder: its ``test_*.py`` files to collect and its example modules to import."""
    units = []
    testing = upstream / "testing" / "python"
    folders = [testing, *sorted(p for p in testing.iterdir() if p.is_dir())] if testing.is_dir() else []
    for folder in folders:
        files = sorted(folder.glob("test_*.py"))
        if files:
            units.append({"id": folder.relative_to(upstream).as_posix(), "cwd": str(folder),
                          "files": [str(f) for f in files], "modules": []})
    examples = upstream / "examples"
    for folder in sorted({p.parent for p in examples.rglob("*.py")} if examples.is_dir() else []):
        if "__pycache__" in folder.parts or any(_is_package(p) for p in [folder, *folder.parents]
                                                if p != examples and examples in p.parents):
            continue
        units.append({"id": folder.relative_to(upstream).as_posix(), "cwd": str(folder),
                      "files": [str(f) for f in sorted(folder.glob("test_*.py"))],
                      "modules": _module_specs(folder, upstream)})
    return units


def local_names(upstream: Path) -> set[str]:
    """Top-level names the upstream tree itself provides (its modules and folders)."""
    names = {"examples", "testing", "conftest"}
    for path in upstream.rglob("*"):
        names.add(path.stem if path.suffix == ".py" else path.name)
    return names


def rel(path: str, upstream: Path) -> str:
    return Path(path).relative_to(upstream).as_posix()


def select(units: list[dict], upstream: Path, only, excl: rep.Exclusions, results: dict) -> list[dict]:
    """Apply ``--only`` (substring of the path) and whole-file exclusions (recorded, not run)."""
    keep = (lambda r: any(p in r for p in only)) if only else (lambda r: True)
    chosen = []
    for unit in units:
        files, modules = [], []
        for f in unit["files"]:
            r = rel(f, upstream)
            if not keep(r):
                continue
            if excl.whole_file(r):
                results["files"][r] = {"status": "excluded", "items": 0, "error": excl.whole_file(r).reason}
            else:
                files.append(f)
        for m in unit["modules"]:
            if not keep(m["rel"]):
                continue
            if excl.whole_file(m["rel"]):
                results["modules"][m["rel"]] = {"status": "excluded", "error": excl.whole_file(m["rel"]).reason}
            else:
                modules.append(m)
        if files or modules:
            chosen.append({**unit, "files": files, "modules": modules})
    return chosen


def child_env(upstream: Path, cache_dir: Path) -> dict:
    env = dict(os.environ)
    # The plugin's folder, then the upstream tree, come first: ``examples.<folder>`` means upstream's.
    env["PYTHONPATH"] = os.pathsep.join([str(DATA), str(upstream), *filter(None, [env.get("PYTHONPATH")])])
    env["TL_CONFORMANCE_ROOT"] = str(upstream)
    env["TILELANG_CACHE_DIR"] = str(cache_dir)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # never write into the (read-only) upstream copy
    env["PYTHONUNBUFFERED"] = "1"
    return env


# ---------------------------------------------------------------- CPU tier

class CpuWorker:
    """One worker process over a list of units, watched through its events file."""

    def __init__(self, units: list[dict], index: int, tmp: Path, upstream: Path, env: dict):
        self.units = {u["id"]: {**u, "files": list(u["files"]), "modules": list(u["modules"])} for u in units}
        self.events = tmp / f"events{index}.jsonl"
        self.log = tmp / f"worker{index}.log"
        spec = tmp / f"spec{index}.json"
        spec.write_text(json.dumps({"root": str(upstream), "units": units}))
        self.upstream = upstream
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, str(PLUGIN), str(spec), str(self.events)],
                                         cwd=upstream, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        self.offset, self.last, self.current, self.unit, self.started = 0, time.time(), None, None, None

    def read(self) -> list[dict]:
        if not self.events.exists():
            return []
        with open(self.events, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        events = [json.loads(line) for line in data[:end].splitlines() if line.strip()]
        if events:
            self.last = time.time()
        return events

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def _apply(worker: CpuWorker, ev: dict, results: dict) -> None:
    """Fold one worker event into the results and the worker's pending work."""
    kind = ev["ev"]
    unit = worker.units.get(worker.unit) if worker.unit else None
    if kind == "unit-start":
        worker.unit = ev["unit"]
    elif kind == "collect-start":
        worker.current, worker.started = ("files", ev["file"]), ev.get("t")
    elif kind == "collect":
        # pytest reports a module's items before the module itself.
        row = results["files"].setdefault(ev["file"], {"items": 0, "nodeids": []})
        row["status"] = {"passed": "collected", "skipped": "skipped"}.get(ev["outcome"], "error")
        if worker.started and ev.get("t"):
            row["seconds"] = round(ev["t"] - worker.started, 2)
        if ev["outcome"] != "passed":
            row.update(error=ev.get("error", ""), detail=ev.get("detail", ""))
        if unit:
            unit["files"] = [f for f in unit["files"] if rel(f, worker.upstream) != ev["file"]]
    elif kind == "item":
        row = results["files"].setdefault(ev["nodeid"].split("::")[0], {"items": 0, "nodeids": []})
        row["items"] += 1
        row["nodeids"].append(ev["nodeid"])
    elif kind in ("collect-abort", "session-finish") and unit:
        error = ev.get("error", "no collection report for this file")
        for f in unit["files"]:
            results["files"][rel(f, worker.upstream)] = {"status": "error", "items": 0, "error": error}
        unit["files"], worker.current = [], None
    elif kind == "module-start":
        worker.current = ("modules", ev["module"])
    elif kind == "module":
        row = {"status": "imported" if ev["outcome"] == "passed" else "error", "duration": ev.get("duration")}
        if ev["outcome"] != "passed":
            row.update(error=ev.get("error", ""), detail=ev.get("detail", ""))
        results["modules"][ev["module"]] = row
        if unit:
            unit["modules"] = [m for m in unit["modules"] if m["rel"] != ev["module"]]
        worker.current = None
    elif kind == "env" and ev.get("tilelang"):
        results["tilelang"] = ev["tilelang"]
    elif kind == "unit-done":
        worker.units.pop(ev["unit"], None)
        worker.unit = worker.current = None


def _salvage(worker: CpuWorker, results: dict, why: str) -> list[dict]:
    """After a crash or a timeout: blame the item in progress, return the work still to do."""
    tail = "\n".join(worker.log.read_text(errors="replace").splitlines()[-15:]) if worker.log.exists() else ""
    blamed = False
    if worker.current:
        section, name = worker.current
        row = results[section].setdefault(name, {"items": 0})
        row.update(status="timeout" if why.startswith("timeout") else "crash", error=why, detail=tail)
        blamed = True
    remaining = []
    for unit in worker.units.values():
        files = [f for f in unit["files"] if rel(f, worker.upstream) not in results["files"]]
        modules = [m for m in unit["modules"] if m["rel"] not in results["modules"]]
        if not blamed and (files or modules):
            # Died outside any one file (pytest start-up, a conftest): blame the whole unit once.
            for f in files:
                results["files"][rel(f, worker.upstream)] = {"status": "crash", "items": 0, "error": why,
                                                             "detail": tail}
            files, blamed = [], True
            if not modules:
                continue
            for m in modules[:1]:
                results["modules"][m["rel"]] = {"status": "crash", "error": why, "detail": tail}
            modules = modules[1:]
        if files or modules:
            remaining.append({**unit, "files": files, "modules": modules})
    return remaining


def _partition(units: list[dict], jobs: int) -> list[list[dict]]:
    """Longest-first greedy split of the units into ``jobs`` chunks of similar weight."""
    chunks: list[list[dict]] = [[] for _ in range(max(1, jobs))]
    weights = [0.0] * len(chunks)
    for unit in sorted(units, key=lambda u: -(len(u["files"]) + 2 * len(u["modules"]))):
        i = weights.index(min(weights))
        chunks[i].append(unit)
        weights[i] += 3 + len(unit["files"]) + 2 * len(unit["modules"])
    return [c for c in chunks if c]


def run_cpu_units(units: list[dict], upstream: Path, jobs: int, timeout: float, results: dict) -> None:
    with tempfile.TemporaryDirectory(prefix="tl-conformance-") as tmp_name:
        tmp = Path(tmp_name)
        env = child_env(upstream, tmp / "cache")
        queue, running, count = _partition(units, jobs), [], 0
        while queue or running:
            while queue and len(running) < jobs:
                running.append(CpuWorker(queue.pop(0), count, tmp, upstream, env))
                count += 1
            time.sleep(0.2)
            for worker in list(running):
                for ev in worker.read():
                    _apply(worker, ev, results)
                code = worker.proc.poll()
                if code is None and time.time() - worker.last <= timeout:
                    continue
                if code is None:
                    worker.kill()
                    why = f"timeout ({timeout:g} s)"
                else:
                    for ev in worker.read():
                        _apply(worker, ev, results)
                    why = f"crash: signal {-code}" if code < 0 else f"crash: exit {code}"
                    if worker.units and code > 0 and worker.log.exists():
                        why += " (" + plugin.first_error_line(worker.log.read_text(errors="replace")) + ")"
                running.remove(worker)
                if worker.units:
                    rest = _salvage(worker, results, why)
                    if rest:
                        queue.append(rest)


def run_cpu(args, upstream: Path) -> dict:
    excl = rep.load_exclusions(Path(args.exclusions))
    results = {"tier": "cpu", "upstream": str(upstream), "python": platform.python_version(),
               "files": {}, "modules": {}}
    start = time.time()
    units = select(discover(upstream), upstream, args.only, excl, results)
    run_cpu_units(units, upstream, args.jobs, args.timeout, results)
    names = local_names(upstream)
    for section in ("files", "modules"):
        for row in results[section].values():
            if "status" not in row:  # items seen, but the process ended before the file's report
                row.update(status="error", error=row.get("error", "no collection report for this file"))
            if row["status"] not in rep.OK_FILE | {"imported", "excluded"}:
                row["kind"] = rep.classify(row.get("error", ""), names)
    results["duration"] = round(time.time() - start, 1)
    return results


# ---------------------------------------------------------------- GPU tier

def gpu_units(upstream: Path, only, excl: rep.Exclusions) -> list[dict]:
    """Each unit-test file alone; each example folder's test files together (as BASELINE.md ran them)."""
    keep = (lambda r: any(p in r for p in only)) if only else (lambda r: True)
    units = []
    for unit in discover(upstream):
        if not unit["files"]:
            continue
        if unit["id"].startswith("examples/"):
            if keep(unit["id"]) and not excl.whole_file(unit["id"] + "/"):
                units.append({"id": unit["id"], "cwd": unit["cwd"], "files": unit["files"], "example": True})
            continue
        for f in unit["files"]:
            r = rel(f, upstream)
            if keep(r):
                units.append({"id": r, "cwd": unit["cwd"], "files": [f], "example": False,
                              "excluded": bool(excl.whole_file(r))})
    return units


def _fold_tests(events: list[dict]) -> tuple[dict, int, str]:
    """Per test: phases and final status (pytest's counting); plus collection errors and the first."""
    tests: dict[str, dict] = {}
    collect_errors, first_collect = 0, ""
    for ev in events:
        if ev["ev"] == "collect" and ev["outcome"] == "failed":
            collect_errors += 1
            first_collect = first_collect or ev.get("error", "")
        if ev["ev"] != "test":
            continue
        row = tests.setdefault(ev["nodeid"], {"phases": {}, "status": "passed", "error": ""})
        outcome = ev["outcome"]
        if ev["when"] == "call":
            outcome = "skipped" if ev.get("xfail") and outcome == "skipped" else outcome
            row["status"] = outcome if row["status"] == "passed" else row["status"]
        elif outcome == "failed":
            row["phases"][ev["when"]] = "error"
            row["status"] = "error" if ev["when"] == "setup" else row["status"]
        elif outcome == "skipped":
            row["status"] = "skipped"
        if outcome != "passed" and not row["error"]:
            row["error"] = ev.get("error", "")
    return tests, collect_errors, first_collect


def _first_reason(tests: dict, excl: rep.Exclusions) -> str:
    for nodeid, row in tests.items():
        if row["status"] in ("failed", "error") and not excl.match(nodeid):
            return f"{nodeid.split('::', 1)[-1]}: {row['error']}"
    skips = [row["error"] for row in tests.values() if row["status"] == "skipped" and row["error"]]
    return f"skipped: {skips[0]}" if skips else ""


def run_gpu_unit(unit: dict, upstream: Path, work: Path, timeout: float, excl: rep.Exclusions) -> dict:
    """One pytest process over the unit's files; its counts, per-test results and one-line reason."""
    slug = unit["id"].replace("/", "__")
    events_path = work / f"{slug}.jsonl"
    events_path.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="tl-cache-") as cache:
        env = child_env(upstream, Path(cache))
        env["TL_CONFORMANCE_EVENTS"] = str(events_path)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tl_conformance_plugin",
               *[Path(f).name for f in unit["files"]]]
        start = time.time()
        proc = subprocess.Popen(cmd, cwd=unit["cwd"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            output, code = proc.communicate(timeout=timeout)[0], proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, code = proc.communicate()[0], None
    text = output.decode(errors="replace")
    events = [json.loads(l) for l in events_path.read_text().splitlines() if l.strip()] if events_path.exists() else []
    tests, collect_errors, first_collect = _fold_tests(events)
    counts = rep.test_counts(tests, collect_errors)
    if code is None:
        reason = f"timeout ({timeout:g} s)"
    elif code < 0:
        reason = f"crash: signal {-code}"
    else:
        reason = first_collect or _first_reason(tests, excl) or (
            "" if code in (0, 1, 5) else plugin.first_error_line(text))
    return {"counts": dataclasses.asdict(counts), "tests": tests, "rc": code, "reason": reason,
            "seconds": round(time.time() - start, 1), "tail": "\n".join(text.splitlines()[-40:]) if code else ""}


def run_gpu(args, upstream: Path) -> dict:
    excl = rep.load_exclusions(Path(args.exclusions))
    units = gpu_units(upstream, args.only, excl)
    work = Path(tempfile.mkdtemp(prefix="tl-conformance-gpu-"))
    results = {"tier": "gpu", "upstream": str(upstream), "python": platform.python_version(), "files": {}}
    names = local_names(upstream)
    baseline = rep.parse_baseline(baseline_path(upstream))
    start = time.time()

    def one(unit):
        if unit.get("excluded"):  # recorded, not run
            return unit["id"], {"counts": dataclasses.asdict(rep.Counts()), "tests": {}, "rc": None,
                                "reason": excl.whole_file(unit["id"]).reason, "seconds": 0, "kind": ""}
        limit = args.example_timeout if unit["example"] else args.timeout
        row = run_gpu_unit(unit, upstream, work, limit, excl)
        row["kind"] = rep.classify(row["reason"], names) if row["reason"] else ""
        verdict, _ = rep.gpu_verdict(unit["id"], row, baseline, excl)
        print(f"{verdict:8s} {unit['id']}  {row['counts']['passed']} passed  {row['seconds']}s  "
              f"{row['reason'][:100]}", flush=True)
        return unit["id"], row

    # the biggest files first (upstream's test count stands in for the time), so that a slow file
    # does not start last and hold the whole run; each finished file is saved at once, so that a
    # run cut short (a device's command limit) keeps what it measured
    def size(unit):
        c = baseline.get(unit["id"])
        return 0 if c is None else c.passed + c.failed + c.errors + c.skipped
    units.sort(key=lambda u: (not u["example"], -size(u)))
    partial = Path(args.out) / "conformance-gpu.partial.json"
    partial.parent.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for done in as_completed([pool.submit(one, unit) for unit in units]):
            key, row = done.result()
            results["files"][key] = row
            partial.write_text(json.dumps(results, indent=1, sort_keys=True))
    shutil.rmtree(work, ignore_errors=True)
    results["duration"] = round(time.time() - start, 1)
    return results


# ---------------------------------------------------------------- example mains

def _is_action(node: ast.stmt) -> bool:
    """A top-level statement that does the module's work (a call, a loop, an assert), not set-up
    such as ``tilelang.set_log_level(...)`` or ``torch.manual_seed(0)``."""
    if isinstance(node, (ast.For, ast.While, ast.With, ast.Assert)):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        func = node.value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return not (name.startswith("set_") or name in ("manual_seed", "seed", "filterwarnings", "basicConfig"))
    return False


def main_entry(path: Path) -> str | None:
    """How ``path`` runs as a program: "script" (an ``if __name__ == "__main__":`` block),
    "top-level" (no such block, but statements at module level that do the work: a call, a loop,
    an assert), "main()" (only a top-level ``def main``: the runner calls it), or None (a helper)."""
    try:
        tree = ast.parse(path.read_text(errors="replace"))
    except SyntaxError:
        return "script"  # let the run say what is wrong with it
    for node in tree.body:
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test) and "__main__" in ast.unparse(node.test):
            return "script"
    if any(_is_action(node) for node in tree.body):
        return "top-level"
    if any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "main" for n in tree.body):
        return "main()"
    return None


_IMPORTERS = {"import_module", "__import__", "run_module", "run_path", "find_spec", "spec_from_file_location"}


def covered_names(test_files) -> set[str]:
    """Module names a folder's test files reach statically: every ``import x`` / ``from x import y``
    (as ``x`` and ``x.y``, so that packages count too), every ``x.main`` attribute, and string
    arguments of importlib/runpy calls (``"x"``, ``"x.py"``)."""
    names: set[str] = set()
    for f in test_files:
        try:
            tree = ast.parse(Path(f).read_text(errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    names.update(".".join(parts[:i + 1]) for i in range(len(parts)))
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Attribute) and node.attr == "main" and isinstance(node.value, ast.Name):
                names.add(node.value.id)
            elif isinstance(node, ast.Call):
                func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if func in _IMPORTERS:
                    for arg in node.args:
                        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                            names.add(Path(arg.value).stem if arg.value.endswith(".py") else arg.value)
    return names


def discover_mains(upstream: Path, only, excl: rep.Exclusions) -> tuple[list[dict], dict[str, str]]:
    """The example modules the ``mains`` mode runs, and every other example module with the reason
    it is left out ("excluded: ...", "covered by test_x.py", "no main")."""
    keep = (lambda r: any(p in r for p in only)) if only else (lambda r: True)
    runs, skipped = [], {}
    for unit in discover(upstream):
        if not unit["id"].startswith("examples"):
            continue
        per_file = {Path(f).name: covered_names([f]) for f in unit["files"]}
        for m in unit["modules"]:
            r = m["rel"]
            if not keep(r) or Path(r).name == "__init__.py":
                continue
            entry = main_entry(Path(m["path"]))
            covering = [name for name, names in per_file.items() if m["name"] in names]
            if excl.whole_file(r):
                skipped[r] = "excluded: " + excl.whole_file(r).reason
            elif covering:
                skipped[r] = "covered by " + ", ".join(covering)
            elif entry is None:
                skipped[r] = "no main"
            else:
                runs.append({"id": r, "cwd": unit["cwd"], "name": m["name"], "path": m["path"],
                             "entry": entry if "." not in m["name"] else "module"})
    return runs, skipped


def mains_command(python: str, mod: dict) -> list[str]:
    if mod["entry"] == "module":  # inside a package of its folder: run by dotted name
        return [python, "-m", mod["name"]]
    if mod["entry"] == "main()":
        return [python, "-c", f"import {mod['name']} as m; m.main()"]
    return [python, Path(mod["path"]).name]


def mains_env(upstream: Path, folder: str, cache_dir: Path, python_path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([folder, str(upstream), *python_path,
                                         *filter(None, [env.get("PYTHONPATH")])])
    env["TILELANG_CACHE_DIR"] = str(cache_dir)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("MPLBACKEND", "Agg")  # plotting examples: no display
    return env


def error_line(code: int | None, text: str, timeout: float) -> str:
    """The one line that says why a run failed: a timeout, a signal, or the traceback's last line."""
    if code is None:
        return f"timeout ({timeout:g} s)"
    if code < 0:
        try:
            return f"crash: {signal.Signals(-code).name}"
        except ValueError:
            return f"crash: signal {-code}"
    if code == 0:
        return ""
    line = plugin.first_error_line(text)
    return line if plugin._EXC_LINE.match(line) else f"exit {code}" + (f": {line}" if line else "")


_LIVE: set[subprocess.Popen] = set()  # the mains now running, each in its own session
_STOPPING = threading.Event()


def _killpg(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _stop_children(signum, _frame):
    """SIGTERM/SIGINT (e.g. a device's command limit): the children run in their own sessions, so
    they would outlive the runner; kill their process groups, then end."""
    _STOPPING.set()
    for proc in list(_LIVE):
        _killpg(proc)
    raise SystemExit(128 + signum)


def run_main(mod: dict, upstream: Path, timeout: float, python: str, python_path) -> dict:
    """Run one example module as a program in its folder; its exit status, time and error line."""
    with tempfile.TemporaryDirectory(prefix="tl-cache-") as cache:
        env = mains_env(upstream, mod["cwd"], Path(cache), python_path)
        start = time.time()
        proc = subprocess.Popen(mains_command(python, mod), cwd=mod["cwd"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        _LIVE.add(proc)
        if _STOPPING.is_set():
            _killpg(proc)
        try:
            output, code = proc.communicate(timeout=timeout)[0], proc.returncode
        except subprocess.TimeoutExpired:
            _killpg(proc)
            output, code = proc.communicate()[0], None
        finally:
            _LIVE.discard(proc)
        seconds = round(time.time() - start, 1)
    text = output.decode(errors="replace")
    status = "ok" if code == 0 else "timeout" if code is None else "crash" if code < 0 else "fail"
    error = error_line(code, text, timeout)
    if code != 0 and _STOPPING.is_set():  # killed by the runner's own end, not a result
        status, error = "stopped", "stopped: the runner was terminated"
    return {"status": status, "rc": code, "seconds": seconds, "entry": mod["entry"], "error": error,
            "tail": "\n".join(text.splitlines()[-40:]) if code else ""}


def probe_tilelang(python: str, upstream: Path, python_path) -> str:
    """Which ``tilelang`` the children import (its version and file), asked of a child process:
    the runner itself never imports it."""
    with tempfile.TemporaryDirectory(prefix="tl-cache-") as cache:
        env = mains_env(upstream, str(upstream), Path(cache), python_path)
        code = "import tilelang; print(getattr(tilelang, '__version__', '?'), tilelang.__file__)"
        try:
            proc = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                                  stdin=subprocess.DEVNULL, cwd=str(upstream))
        except subprocess.TimeoutExpired:
            return "import tilelang: timeout"
    lines = proc.stdout.strip().splitlines()
    return lines[-1] if proc.returncode == 0 and lines else "import tilelang failed: " + plugin.first_error_line(
        proc.stdout + proc.stderr)


def run_mains(args, upstream: Path) -> dict:
    excl = rep.load_exclusions(Path(args.exclusions))
    mods, skipped = discover_mains(upstream, args.only, excl)
    python_path = [str(Path(p).expanduser().resolve()) for p in args.python_path]
    results = {"tier": "mains", "upstream": str(upstream), "python": platform.python_version(),
               "tilelang": probe_tilelang(args.python, upstream, python_path), "python_path": python_path,
               "modules": {}, "skipped": skipped, "timeout": args.timeout}
    print(f"children import tilelang {results['tilelang']}", flush=True)
    for path in args.resume:  # an earlier run's results, cut short: keep them, run the rest
        earlier = json.loads(Path(path).read_text())
        if earlier.get("tilelang") != results["tilelang"]:
            print(f"warning: {path} was measured with tilelang {earlier.get('tilelang')}, this run imports "
                  f"{results['tilelang']}", flush=True)
        results["modules"].update({k: v for k, v in earlier.get("modules", {}).items()
                                   if k not in results["modules"] and v.get("status") != "stopped"})
    mods = [m for m in mods if m["id"] not in results["modules"]]
    if args.resume:
        print(f"{len(results['modules'])} modules kept from {', '.join(args.resume)}; {len(mods)} to run", flush=True)
    names = local_names(upstream)
    start = time.time()
    not_run: list[str] = []

    def one(mod):
        if _STOPPING.is_set() or args.budget and time.time() - start > args.budget:
            return mod["id"], None  # past the budget (or stopped): left for --resume
        row = run_main(mod, upstream, args.timeout, args.python, python_path)
        row["kind"] = rep.classify(row["error"], names) if row["error"] else ""
        print(f"{row['status']:8s} {mod['id']}  {row['seconds']}s  {row['error'][:100]}", flush=True)
        return mod["id"], row

    # the biggest files first (a stand-in for the time), and each result saved at once, so that a
    # run cut short (a device's command limit) keeps what it measured
    mods.sort(key=lambda m: -Path(m["path"]).stat().st_size)
    partial = Path(args.out) / "conformance-mains.partial.json"
    partial.parent.mkdir(parents=True, exist_ok=True)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stop_children)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for done in as_completed([pool.submit(one, mod) for mod in mods]):
            key, row = done.result()
            if row is None:
                not_run.append(key)
                continue
            results["modules"][key] = row
            partial.write_text(json.dumps(results, indent=1, sort_keys=True))
    results["not_run"] = sorted(not_run)
    if not_run:
        print(f"{len(not_run)} modules not started within --budget {args.budget:g} s (run again with --resume)")
    results["duration"] = round(time.time() - start, 1)
    return results


# ---------------------------------------------------------------- reporting and the CLI

def baseline_path(upstream: Path) -> Path:
    return upstream.parent / "BASELINE.md"


def share_line(results: dict, baseline: dict, excl: rep.Exclusions) -> str:
    nodeids = {r: row["nodeids"] if "nodeids" in row else list(row["tests"])
               for r, row in results.get("files", {}).items() if "nodeids" in row or row.get("tests")}
    excluded, total, guesses = excl.share(baseline, nodeids)
    pct = 100.0 * excluded / total if total else 0.0
    guess = f"; {guesses} test patterns in files that do not collect counted as 1" if guesses else ""
    return (f"Exclusions: {len(excl.entries)} entries holding {excluded} of upstream's {total} passes "
            f"({pct:.1f} %, limit 10 %){guess}.")


def update_doc(tier: str, text: str) -> None:
    begin, end = f"<!-- conformance:{tier}:begin -->", f"<!-- conformance:{tier}:end -->"
    doc = DOC.read_text(encoding="utf-8")
    if begin not in doc or end not in doc:
        raise SystemExit(f"{DOC} has no {begin} ... {end} block")
    head, rest = doc.split(begin, 1)
    DOC.write_text(head + begin + "\n" + text.strip() + "\n" + end + rest.split(end, 1)[1], encoding="utf-8")


def doc_block(results: dict, baseline: dict, excl: rep.Exclusions) -> str:
    if results["tier"] == "gpu":
        body = rep.gpu_report(results, baseline, excl, all_rows=False).split("### Per file")[0]
        return body.strip()
    groups = rep.error_groups(results, baseline)
    return "\n".join([
        rep.cpu_report(results, baseline).split("### Test files")[0].strip(), "",
        f"Most common first errors ({len(groups)} distinct):", "", "```",
        rep.format_groups(groups, limit=15), "```", "", share_line(results, baseline, excl)])


def print_cpu(results: dict, baseline: dict, excl: rep.Exclusions, all_rows: bool) -> str:
    """Print the CPU tier's tables and work list; return report.md's text (every row, and where
    each error group's first file failed)."""
    groups = rep.error_groups(results, baseline)
    print(rep.cpu_report(results, baseline, all_rows))
    print(f"\nFirst errors, grouped ({len(groups)} distinct; the work list):")
    print(rep.format_groups(groups, limit=None if all_rows else 40))
    print("\n" + share_line(results, baseline, excl))
    details = []
    for error, _, _, paths in groups:
        row = results["files"].get(paths[0]) or results["modules"].get(paths[0], {})
        details += [f"#### {error[:200]}", "", f"{paths[0]}:", "```", row.get("detail", "").strip()[-2500:], "```", ""]
    return "\n".join([rep.cpu_report(results, baseline, True), "", f"### First errors, grouped ({len(groups)} distinct)",
                      "", "```", rep.format_groups(groups, limit=None), "```", "", share_line(results, baseline, excl),
                      "", "### Where each group's first file failed", "", *details])


def write_outputs(out: Path, results: dict, report: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"conformance-{results['tier']}.json"
    path.write_text(json.dumps(results, indent=1, sort_keys=True))
    (out / "report.md").write_text(report + "\n")
    return path


def cpu_expectations(args, results: dict) -> int:
    """Compare with the expected state (exit status 1 on a regression); record it when asked."""
    path = Path(args.expected)
    expected = json.loads(path.read_text()) if path.is_file() else {}
    regressions = rep.cpu_regressions(results, expected)
    for name, why in regressions:
        print(f"REGRESSION  {name}: {why}")
    if regressions:
        print(f"{len(regressions)} files or modules no longer collect/import (expected: {path})")
    else:
        gained = rep.cpu_gains(results, expected)
        print(f"no regressions against {path} ({len(expected.get('collected', {}))} files, "
              f"{len(expected.get('imported', []))} modules); {gained} newly collect/import"
              + (" (record them with --update-expected)" if gained and not args.update_expected else ""))
    if args.update_expected:
        if regressions and not args.allow_regression:
            print("refusing to record a regression in the expected state (pass --allow-regression)")
            return 1
        path.write_text(json.dumps(rep.updated_expected(results, expected), indent=1) + "\n")
        print(f"wrote {path}")
        return 0
    return 1 if regressions else 0


def merge_results(runs: list[dict]) -> dict:
    """One results object from several runs of one tier (e.g. GPU runs split with --only)."""
    if len({run["tier"] for run in runs}) != 1:
        raise SystemExit("report: the results files are of different tiers")
    merged = dict(runs[0])
    for section in ("files", "modules"):
        merged[section] = {k: v for run in runs for k, v in run.get(section, {}).items()}
    merged["duration"] = sum(run.get("duration", 0) for run in runs)
    return merged


def mains_cli(args, upstream: Path, excl: rep.Exclusions) -> int:
    if args.dry_run:
        mods, skipped = discover_mains(upstream, args.only, excl)
        for mod in mods:
            print(f"{mod['entry']:9s} {mod['id']}")
        if args.all:
            for name, why in sorted(skipped.items()):
                print(f"{'skip':9s} {name}  ({why[:100]})")
        why = [w.split(":")[0] if w.startswith("excluded") else "covered" if w.startswith("covered") else w
               for w in skipped.values()]
        print(f"{len(mods)} modules to run; left out: {why.count('covered')} covered by a test file, "
              f"{why.count('no main')} without a main, {why.count('excluded')} excluded")
        return 0
    results = run_mains(args, upstream)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "conformance-mains.json"
    path.write_text(json.dumps(results, indent=1, sort_keys=True))
    (out / "report-mains.md").write_text(rep.mains_table(results, all_rows=True) + "\n")
    print("\n" + rep.mains_table(results, args.all))
    print(f"\nmains took {results['duration']} s with {args.jobs} jobs; results in {path}")
    return 0


def report_mains(args) -> int:
    """Ours against upstream's package, module by module; exit status 1 when one regresses."""
    if len(args.results) != 2:
        print("report-mains needs OURS.json UPSTREAM.json", file=sys.stderr)
        return 2
    ours, upstream = (json.loads(Path(p).read_text()) for p in args.results)
    print(rep.mains_report(ours, upstream, all_rows=True))
    if args.update_doc:
        update_doc("mains", rep.mains_report(ours, upstream, all_rows=args.all))
    regress = [r for r in rep.mains_rows(ours, upstream, all_rows=False) if r[3] == "REGRESS"]
    return 1 if regress else 0


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tier", choices=["cpu", "gpu", "mains", "report", "report-mains"])
    parser.add_argument("results", nargs="*", help="report: conformance-<tier>.json files of one tier (merged); "
                        "report-mains: OURS.json UPSTREAM.json")
    parser.add_argument("--upstream", default=os.environ.get("TL_CONFORMANCE_UPSTREAM", str(DEFAULT_UPSTREAM)))
    parser.add_argument("--only", nargs="*", default=None, help="substrings of paths to run (folders, files)")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=None, help="seconds per file (CPU: per file or module)")
    parser.add_argument("--example-timeout", type=float, default=400.0, help="GPU: seconds per example folder")
    parser.add_argument("--out", default=os.environ.get("OUT") or os.path.join(tempfile.gettempdir(), "tl-conformance"))
    parser.add_argument("--all", action="store_true", help="print every row, not only the problems")
    parser.add_argument("--dry-run", action="store_true", help="list what would run, and stop")
    parser.add_argument("--expected", default=str(EXPECTED), help="CPU tier: the expected-state file")
    parser.add_argument("--exclusions", default=str(EXCLUSIONS), help="the exclusion list (TOML)")
    parser.add_argument("--update-expected", action="store_true")
    parser.add_argument("--allow-regression", action="store_true")
    parser.add_argument("--update-doc", action="store_true", help="rewrite the tier's block in docs/conformance.md")
    parser.add_argument("--python-path", action="append", default=[], metavar="DIR",
                        help="mains: put DIR on the children's PYTHONPATH (before the inherited one), e.g. "
                             "upstream's installed package; may be given more than once")
    parser.add_argument("--python", default=sys.executable, help="mains: the interpreter that runs the modules")
    parser.add_argument("--resume", action="append", default=[], metavar="JSON",
                        help="mains: keep the modules of an earlier (partial) results file and run only the rest")
    parser.add_argument("--budget", type=float, default=None, metavar="S",
                        help="mains: start no module after S seconds (those left are listed as not_run)")
    args = parser.parse_args(argv)
    if args.jobs is None:
        args.jobs = (os.cpu_count() or 2) if args.tier == "cpu" else 4
    if args.timeout is None:
        args.timeout = {"cpu": 90.0, "mains": 300.0}.get(args.tier, 150.0)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    upstream = Path(args.upstream).resolve()
    baseline = rep.parse_baseline(baseline_path(upstream))
    excl = rep.load_exclusions(Path(args.exclusions))
    if args.tier == "report-mains":
        return report_mains(args)
    if args.tier == "report":
        if not args.results:
            print("report needs a results file", file=sys.stderr)
            return 2
        results = merge_results([json.loads(Path(p).read_text()) for p in args.results])
        code = 0
        if results["tier"] == "mains":
            print(rep.mains_table(results, args.all))
            return 0
        if results["tier"] == "cpu":
            print_cpu(results, baseline, excl, args.all)
            code = cpu_expectations(args, results)
        else:
            print(rep.gpu_report(results, baseline, excl, args.all) + "\n\n" + share_line(results, baseline, excl))
        if args.update_doc:
            update_doc(results["tier"], doc_block(results, baseline, excl))
        return code
    if not (upstream / "testing").is_dir() and not (upstream / "examples").is_dir():
        print(f"no upstream tests tree at {upstream} (pass --upstream)", file=sys.stderr)
        return 2
    out = Path(args.out)
    if args.tier == "mains":
        return mains_cli(args, upstream, excl)
    if args.dry_run:
        for unit in gpu_units(upstream, args.only, excl) if args.tier == "gpu" else discover(upstream):
            print(unit["id"], len(unit["files"]), "test files", len(unit.get("modules", [])), "modules")
        return 0
    if args.tier == "cpu":
        results = run_cpu(args, upstream)
        path = write_outputs(out, results, print_cpu(results, baseline, excl, args.all))
        print(f"\nCPU tier took {results['duration']} s with {args.jobs} workers; results in {path}")
        code = cpu_expectations(args, results)
    else:
        results = run_gpu(args, upstream)
        report = rep.gpu_report(results, baseline, excl, all_rows=True)
        print("\n" + report + "\n\n" + share_line(results, baseline, excl))
        path = write_outputs(out, results, report)
        print(f"\nGPU tier took {results['duration']} s with {args.jobs} jobs; results in {path}")
        code = 0
    if args.update_doc and not args.only:
        update_doc(results["tier"], doc_block(results, baseline, excl))
    return code


if __name__ == "__main__":
    sys.exit(main())
