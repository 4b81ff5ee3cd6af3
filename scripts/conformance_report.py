"""Parent side of the conformance runner: baseline, exclusions, expected state, and the tables.

Pure functions over plain data (no subprocesses, no tilelang import), used by
``scripts/conformance.py`` and by its tests:

- ``parse_baseline``: BASELINE.md's per-file (unit tests) and per-folder (examples) counts.
- ``load_exclusions`` / ``Exclusions``: ``conformance/exclusions.toml``, the tests we deliberately
  do not pass, each with its reason; ``share`` says what fraction of upstream's passes they hold.
- ``classify``: whether an error line is ours, an environment gap (a missing third-party
  package) or a test that needs a GPU.
- ``cpu_report`` / ``gpu_report``: the markdown tables; ``error_groups``: failures grouped by
  their first error line (the work list).
- ``cpu_regressions`` / ``updated_expected``: the CPU tier's expected state, which only improves.
"""

from __future__ import annotations

import re
import tomllib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

OURS = {"tilelang", "tvm", "tvm_ffi"}
OK_FILE = {"collected", "skipped"}
# Messages that mean "this code needs a CUDA device": on a machine without one they are expected.
_NEEDS_GPU = re.compile(
    r"Found no NVIDIA driver|Torch not compiled with CUDA|No CUDA GPUs are available|"
    r"CUDA driver initialization failed|no CUDA-capable device|cudaGetDeviceCount|"
    r"CUDA_ERROR_NO_DEVICE|CUDA_ERROR_NOT_INITIALIZED|requires a CUDA device|no CUDA device",
    re.IGNORECASE)
_MISSING = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '([\w.]+)'")


# ---------------------------------------------------------------- baseline

@dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    note: str = ""


def parse_baseline(path: Path) -> dict[str, Counts]:
    """BASELINE.md's table rows: ``testing/python/...py`` files and ``examples/<folder>`` folders."""
    rows: dict[str, Counts] = {}
    if not path.is_file():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or not cells[0].startswith(("testing/", "examples/")):
            continue
        try:
            numbers = [int(c) for c in cells[1:5]]
        except ValueError:
            continue
        rows[cells[0]] = Counts(*numbers, note=cells[5] if len(cells) > 5 else "")
    return rows


# ---------------------------------------------------------------- exclusions

@dataclass
class Exclusion:
    pattern: str  # "path/test_x.py" (the whole file) or "path/test_x.py::test_name" (and its params)
    reason: str
    kind: str

    def matches(self, nodeid: str) -> bool:
        if self.pattern.endswith("/"):  # a whole folder
            return nodeid.startswith(self.pattern)
        if "::" not in self.pattern:
            return nodeid.split("::")[0] == self.pattern
        return nodeid == self.pattern or nodeid.startswith(self.pattern + "[") or nodeid.startswith(
            self.pattern + "::")


@dataclass
class Exclusions:
    entries: list[Exclusion] = field(default_factory=list)

    def whole_file(self, rel: str) -> Exclusion | None:
        """The entry excluding all of ``rel`` (a file, or a folder given with a trailing slash)."""
        return next((e for e in self.entries if "::" not in e.pattern and e.matches(rel)), None)

    def match(self, nodeid: str) -> Exclusion | None:
        return next((e for e in self.entries if e.matches(nodeid)), None)

    def share(self, baseline: dict[str, Counts], nodeids: dict[str, list[str]]) -> tuple[int, int, int]:
        """(excluded upstream passes, upstream passes in all, patterns whose count is a guess).

        A whole file counts its baseline passes; a test pattern counts the collected items it
        matches (``nodeids``: file -> collected node ids), capped by the file's baseline passes;
        a pattern in a file whose items are unknown (it did not collect) counts 1, as a guess."""
        total = sum(c.passed for c in baseline.values())
        per_file: dict[str, int] = defaultdict(int)
        guesses = 0
        for entry in self.entries:
            rel = entry.pattern.split("::")[0]
            if "::" not in entry.pattern:
                for name in baseline:
                    if entry.matches(name):
                        per_file[name] = 10**9  # capped below by the file's baseline passes
                continue
            elif rel in nodeids:
                per_file[rel] += sum(1 for n in nodeids[rel] if entry.matches(n))
            elif rel in baseline:
                guesses += 1
                per_file[rel] += 1
        excluded = sum(min(n, baseline.get(rel, Counts()).passed) for rel, n in per_file.items())
        return excluded, total, guesses


def load_exclusions(path: Path) -> Exclusions:
    """Read ``[[exclude]]`` tables (``test``, ``reason``, ``kind``) from a TOML file."""
    if not path.is_file():
        return Exclusions()
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    entries = []
    for row in data.get("exclude", []):
        if not row.get("reason"):
            raise ValueError(f"{path}: exclusion {row.get('test')!r} has no reason")
        entries.append(Exclusion(row["test"], row["reason"], row.get("kind", "")))
    return Exclusions(entries)


# ---------------------------------------------------------------- classification

def classify(error: str, local_names: set[str]) -> str:
    """'env' for a missing third-party module, 'gpu' for needing a CUDA device, else 'ours'."""
    missing = _MISSING.search(error or "")
    if missing:
        top = missing.group(1).split(".")[0]
        if top not in OURS and top not in local_names:
            return "env"
    if _NEEDS_GPU.search(error or ""):
        return "gpu"
    return "ours"


def folder_of(rel: str) -> str:
    """``testing/python/<dir>`` or ``examples/<family>`` for a path in the upstream tree."""
    parts = rel.split("::")[0].split("/")
    if parts[0] == "examples":
        return "/".join(parts[:2]) if len(parts) > 2 else "examples"
    return "/".join(parts[:3]) if len(parts) > 3 else "/".join(parts[:2])


def md_table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------- work list

def blocked_passes(rel: str, baseline: dict[str, Counts]) -> int:
    """Upstream passes a file stands in front of: its own (unit tests) or its example folder's."""
    if rel in baseline:
        return baseline[rel].passed
    folder = folder_of(rel)
    name = rel.rsplit("/", 1)[-1]
    return baseline[folder].passed if folder.startswith("examples/") and name.startswith("test_") and \
        folder in baseline else 0


def error_groups(results: dict, baseline: dict[str, Counts] | None = None) -> list[tuple[str, int, int, list[str]]]:
    """Failing files and modules grouped by first error line: (error, count, upstream passes in
    the failing test files, paths), most common first."""
    groups: dict[str, list[str]] = defaultdict(list)
    for section in ("files", "modules"):
        for rel, row in results.get(section, {}).items():
            if row["status"] in OK_FILE | {"imported", "excluded"}:
                continue
            key = re.sub(r" \((?:/|[A-Za-z]:\\)[^)]*\)$", "", row.get("error") or row["status"])
            if row.get("kind", "ours") != "ours":
                key = f"[{row['kind']}] {key}"
            groups[key].append(rel)
    weigh = (lambda r: blocked_passes(r, baseline)) if baseline else (lambda r: 0)
    rows = [(k, len(v), sum(weigh(r) for r in v), sorted(v)) for k, v in groups.items()]
    return sorted(rows, key=lambda g: (-g[1], -g[2], g[0]))


def format_groups(groups, limit: int | None = 40) -> str:
    lines = ["files  passes  first error (passes: upstream's passes in the test files it stops)"]
    for error, count, passes, paths in groups[:limit]:
        shown = ", ".join(p.rsplit("/", 1)[-1] for p in paths[:3]) + (", ..." if count > 3 else "")
        lines.append(f"{count:5d}  {passes:6d}  {error}\n               {shown}")
    if limit is not None and len(groups) > limit:
        lines.append(f"  ... and {len(groups) - limit} more groups (see report.md)")
    return "\n".join(lines)


# ---------------------------------------------------------------- CPU tier tables

def cpu_summary(results: dict, baseline: dict[str, Counts]) -> dict:
    files, modules = results.get("files", {}), results.get("modules", {})
    ok = [r for r, row in files.items() if row["status"] in OK_FILE]
    counted = [r for r, row in files.items() if row["status"] != "excluded"]
    imported = [r for r, row in modules.items() if row["status"] == "imported"]
    kinds = Counter(row.get("kind", "ours") for row in modules.values() if row["status"] not in ("imported", "excluded"))
    unit = [r for r in counted if r.startswith("testing/")]
    reach = sum(baseline[r].passed for r in ok if r in baseline)
    return {
        "test_files": len(counted), "collected": len([r for r in ok if r in counted]),
        "unit_files": len(unit), "unit_collected": len([r for r in ok if r.startswith("testing/")]),
        "example_modules": len([r for r, row in modules.items() if row["status"] != "excluded"]),
        "imported": len(imported), "import_env": kinds.get("env", 0), "import_gpu": kinds.get("gpu", 0),
        "excluded": sum(1 for sec in (files, modules) for row in sec.values() if row["status"] == "excluded"),
        "baseline_passes_reachable": reach,
        "baseline_passes": sum(c.passed for k, c in baseline.items() if k.startswith("testing/")),
    }


def cpu_folder_rows(results: dict, baseline: dict[str, Counts]) -> list[list]:
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0, 0])
    for rel, row in results.get("files", {}).items():
        if row["status"] == "excluded":
            continue
        cell = per[folder_of(rel)]
        cell[0] += 1
        cell[1] += row["status"] in OK_FILE
        base = baseline.get(rel, Counts()).passed
        cell[2] += base if row["status"] in OK_FILE else 0
        cell[3] += base
    for rel, row in results.get("modules", {}).items():
        if row["status"] == "excluded":
            continue
        cell = per[folder_of(rel)]
        cell[4] += 1
        cell[5] += row["status"] == "imported"
    for folder, cell in per.items():  # example tests: BASELINE.md counts whole folders
        if folder.startswith("examples/") and folder in baseline:
            cell[3] = baseline[folder].passed
            cell[2] = cell[3] if cell[0] and cell[0] == cell[1] else 0
    rows = []
    for folder in sorted(per):
        c = per[folder]
        reach = f"{c[2]}/{c[3]}" if c[0] else "-"
        rows.append([folder, f"{c[1]}/{c[0]}", reach, f"{c[5]}/{c[4]}" if c[4] else "-"])
    return rows


def cpu_file_rows(results: dict, baseline: dict[str, Counts], all_rows: bool) -> list[list]:
    rows = []
    for rel, row in sorted(results.get("files", {}).items()):
        if not all_rows and row["status"] in OK_FILE | {"excluded"}:
            continue
        base = baseline.get(rel)
        rows.append([rel, row["status"], row.get("items", 0), base.passed if base else "-",
                     row.get("kind", "") if row["status"] not in OK_FILE else "", row.get("error", "")[:160]])
    return rows


def cpu_module_rows(results: dict, all_rows: bool) -> list[list]:
    return [[rel, row["status"], row.get("kind", ""), row.get("error", "")[:160]]
            for rel, row in sorted(results.get("modules", {}).items())
            if all_rows or row["status"] not in ("imported", "excluded")]


def cpu_report(results: dict, baseline: dict[str, Counts], all_rows: bool = False) -> str:
    s = cpu_summary(results, baseline)
    parts = [
        f"CPU tier: {s['collected']}/{s['test_files']} test files collect "
        f"({s['unit_collected']}/{s['unit_files']} unit-test files, holding {s['baseline_passes_reachable']} "
        f"of upstream's {s['baseline_passes']} unit-test passes); {s['imported']}/{s['example_modules']} example "
        f"modules import ({s['import_env']} need a missing third-party package, {s['import_gpu']} need a GPU at import); "
        f"{s['excluded']} files and modules excluded.",
        "", "### Per folder", "",
        md_table(["folder", "test files collected", "baseline passes in collected files", "example modules imported"],
                 cpu_folder_rows(results, baseline)),
        "", "### Test files" + ("" if all_rows else " that do not collect"), "",
        md_table(["file", "status", "items", "baseline passed", "kind", "first error"],
                 cpu_file_rows(results, baseline, all_rows)),
        "", "### Example modules" + ("" if all_rows else " that do not import"), "",
        md_table(["module", "status", "kind", "first error"], cpu_module_rows(results, all_rows)),
    ]
    return "\n".join(parts)


# ---------------------------------------------------------------- expected state (CPU tier)

def cpu_regressions(results: dict, expected: dict) -> list[tuple[str, str]]:
    """Files that collected (modules that imported) in ``expected`` and no longer do, with the
    error; a missing third-party package is an environment gap, not a regression."""
    out = []
    for section, key, ok in (("files", "collected", OK_FILE), ("modules", "imported", {"imported"})):
        now = results.get(section, {})
        for rel in expected.get(key, {}):
            row = now.get(rel)
            if row is None or row["status"] in ok or row["status"] == "excluded" or row.get("kind") == "env":
                continue
            out.append((rel, f"{row['status']}: {row.get('error', '')}"))
    return out


def cpu_gains(results: dict, expected: dict) -> int:
    """How many files and modules collect or import now that ``expected`` does not list."""
    files = sum(1 for r, row in results.get("files", {}).items()
                if row["status"] in OK_FILE and r not in expected.get("collected", {}))
    imported = set(expected.get("imported", []))
    return files + sum(1 for r, row in results.get("modules", {}).items()
                       if row["status"] == "imported" and r not in imported)


def updated_expected(results: dict, expected: dict) -> dict:
    """The expected state after this run: entries this run did not cover are kept as they were."""
    collected = dict(expected.get("collected", {}))
    imported = set(expected.get("imported", []))
    for rel, row in results.get("files", {}).items():
        if row["status"] in OK_FILE:
            collected[rel] = row.get("items", 0)
        elif row.get("kind") != "env":
            collected.pop(rel, None)
    for rel, row in results.get("modules", {}).items():
        if row["status"] == "imported":
            imported.add(rel)
        elif row.get("kind") != "env":
            imported.discard(rel)
    return {
        "comment": "Written by scripts/conformance.py cpu --update-expected; only ever improves.",
        "collected": dict(sorted(collected.items())),
        "imported": sorted(imported),
    }


# ---------------------------------------------------------------- GPU tier tables

def test_counts(tests: dict[str, dict], collect_errors: int) -> Counts:
    c = Counts(errors=collect_errors)
    for row in tests.values():
        for outcome in row["phases"].values():
            if outcome == "error":
                c.errors += 1
        final = row["status"]
        c.passed += final == "passed"
        c.failed += final == "failed"
        c.skipped += final == "skipped"
    return c


def gpu_verdict(rel: str, row: dict, baseline: dict[str, Counts], excl: Exclusions) -> tuple[str, str]:
    """('ok'|'REGRESS'|'better'|'excluded'|'new', reason) for one file or example folder."""
    if excl.whole_file(rel):
        return "excluded", excl.whole_file(rel).reason
    base = baseline.get(rel)
    ours = row["counts"]
    excused = sum(1 for n, t in row["tests"].items() if t["status"] != "passed" and excl.match(n))
    if base is None:
        return "new", row.get("reason", "")
    if ours["passed"] + excused < base.passed:
        return "REGRESS", row.get("reason") or f"{ours['passed']} passed, upstream {base.passed}"
    return ("better" if ours["passed"] > base.passed else "ok"), ""


def gpu_rows(results: dict, baseline: dict[str, Counts], excl: Exclusions, all_rows: bool) -> list[list]:
    rows = []
    for rel, row in sorted(results.get("files", {}).items()):
        verdict, reason = gpu_verdict(rel, row, baseline, excl)
        if not all_rows and verdict in ("ok", "better"):
            continue
        c, b = row["counts"], baseline.get(rel, Counts())
        kind = row.get("kind", "")
        rows.append([rel, f"{c['passed']}/{c['failed']}/{c['errors']}/{c['skipped']}",
                     f"{b.passed}/{b.failed}/{b.errors}/{b.skipped}", verdict,
                     (f"[{kind}] " if kind and kind != "ours" and verdict == "REGRESS" else "") + reason[:160]])
    return rows


def gpu_summary_rows(results: dict, baseline: dict[str, Counts], excl: Exclusions) -> list[list]:
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for rel, row in results.get("files", {}).items():
        verdict, _ = gpu_verdict(rel, row, baseline, excl)
        cell = per[folder_of(rel) if rel.startswith("testing/") else "examples"]
        cell[0] += 1
        cell[1] += row["counts"]["passed"]
        cell[2] += baseline.get(rel, Counts()).passed
        cell[3] += verdict == "REGRESS"
        cell[4] += verdict == "excluded"
    return [[f, c[0], c[1], c[2], c[3], c[4]] for f, c in sorted(per.items())]


def gpu_report(results: dict, baseline: dict[str, Counts], excl: Exclusions, all_rows: bool = True) -> str:
    summary = gpu_summary_rows(results, baseline, excl)
    ours = sum(r[2] for r in summary)
    base = sum(r[3] for r in summary)
    # per file at most upstream's own count: BASELINE.md has counts, not test names, so this is the
    # closest measure of "upstream's passes that pass with ours" (ours may pass tests upstream fails)
    held = sum(min(row["counts"]["passed"], baseline.get(rel, Counts()).passed)
               for rel, row in results.get("files", {}).items())
    return "\n".join([
        f"GPU tier: {ours} tests passed where upstream passed {base} (same files); counting per file at most "
        f"upstream's own passes: {held} of {base}; "
        f"{sum(r[4] for r in summary)} files regress.", "",
        "### Per folder", "",
        md_table(["folder", "files", "passed", "upstream passed", "regressing files", "excluded files"], summary),
        "", "### Per file (passed/failed/errors/skipped)", "",
        md_table(["file", "ours", "upstream", "verdict", "reason"], gpu_rows(results, baseline, excl, all_rows)),
    ])


# ---------------------------------------------------------------- example mains

def mains_verdict(ours: dict | None, upstream: dict | None) -> str:
    """'ok' (both run), 'REGRESS' (upstream runs, ours not), 'gain' (ours runs, upstream not),
    'both fail', or 'no ours' / 'no upstream' (a module measured on one side only)."""
    if upstream is None:
        return "no upstream"
    if ours is None:
        return "no ours"
    up_ok, ours_ok = upstream.get("status") == "ok", ours.get("status") == "ok"
    return {(True, True): "ok", (True, False): "REGRESS", (False, True): "gain"}.get((up_ok, ours_ok), "both fail")


def _main_cell(row: dict | None) -> str:
    if row is None:
        return "-"
    return "ok" if row.get("status") == "ok" else "fail"


def mains_rows(ours: dict, upstream: dict, all_rows: bool = True) -> list[list]:
    """Per module: ours, upstream's, the verdict, seconds (ours/upstream's) and the error line that
    explains it (ours for a regression, upstream's where both fail)."""
    rows = []
    ours_m, up_m = ours.get("modules", {}), upstream.get("modules", {})
    for rel in sorted(set(ours_m) | set(up_m)):
        o, u = ours_m.get(rel), up_m.get(rel)
        verdict = mains_verdict(o, u)
        if not all_rows and verdict in ("ok", "gain"):
            continue
        why = (o or {}).get("error", "") if verdict in ("REGRESS", "no upstream") else \
            (u or {}).get("error", "") if verdict in ("both fail", "no ours") else ""
        kind = (o or {}).get("kind", "") if verdict == "REGRESS" else ""
        seconds = f"{(o or {}).get('seconds', '-')}/{(u or {}).get('seconds', '-')}"
        rows.append([rel, _main_cell(o), _main_cell(u), verdict, seconds,
                     (f"[{kind}] " if kind and kind != "ours" else "") + why[:160]])
    order = ["REGRESS", "no ours", "both fail", "no upstream", "gain", "ok"]
    return sorted(rows, key=lambda r: order.index(r[3]))  # stable: by path within a verdict


def mains_count_line(ours: dict, upstream: dict) -> str:
    ours_m, up_m = ours.get("modules", {}), upstream.get("modules", {})
    up_ok = [rel for rel, row in up_m.items() if row.get("status") == "ok"]
    held = sum(1 for rel in up_ok if ours_m.get(rel, {}).get("status") == "ok")
    unmeasured = sum(1 for rel in up_ok if rel not in ours_m)
    return (f"{held} of {len(up_ok)} modules upstream runs also run with ours"
            + (f" ({unmeasured} of them not measured with ours)" if unmeasured else "") + ".")


def mains_report(ours: dict, upstream: dict, all_rows: bool = True) -> str:
    counts = Counter(mains_verdict(ours.get("modules", {}).get(rel), upstream.get("modules", {}).get(rel))
                     for rel in set(ours.get("modules", {})) | set(upstream.get("modules", {})))
    summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return "\n".join([
        "Example mains (modules no test covers, each run as a program; ok = exit status 0): "
        + mains_count_line(ours, upstream), "",
        f"Verdicts: {summary or 'none'}. Ours: {ours.get('tilelang', '?')}; upstream: {upstream.get('tilelang', '?')}.",
        "", md_table(["module", "ours", "upstream", "verdict", "seconds (ours/upstream)", "error"],
                     mains_rows(ours, upstream, all_rows)),
    ])


def mains_table(results: dict, all_rows: bool = True) -> str:
    """One run of the mains mode: a count line, then per module its status, seconds and error."""
    mods = results.get("modules", {})
    ok = sum(1 for row in mods.values() if row.get("status") == "ok")
    rows = [[rel, row.get("status", ""), row.get("seconds", ""),
             (f"[{row['kind']}] " if row.get("kind") not in ("", "ours", None) else "") + row.get("error", "")[:160]]
            for rel, row in sorted(mods.items()) if all_rows or row.get("status") != "ok"]
    return "\n".join([f"Example mains: {ok} of {len(mods)} modules exit 0 (tilelang: {results.get('tilelang', '?')}).",
                      "", md_table(["module", "status", "seconds", "error"], rows)])
