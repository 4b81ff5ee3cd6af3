"""Latency of the TileLang language server, measured over real stdio like an editor sees it.

    python benchmarks/bench_lsp.py [--edits 50] [--hovers 200] [--starts 10]

Builds a ~300-line kernel file from the factories of ``examples/`` (their bindings come from the
examples' own ``kernels()`` functions), starts ``tilelang-lsp``, waits for the first diagnostics
(the worker imports tvm once), warms up, then measures:

- start-up: process start to the ``initialize`` response (fresh processes);
- edit -> diagnostics: a ``didChange`` inside one kernel factory (a distinct edit each time, so
  no cached result can answer) until ``publishDiagnostics`` for that version arrives; a single
  edit after a pause, as when a user stops typing;
- typing burst: six keystrokes 40 ms apart; from the last keystroke to its diagnostics (the
  debounce coalesces the burst);
- a line inserted at the top of the file: every line below moves, so every kernel is rebuilt
  (the worst case; run after the other measures);
- hover on a fragment, a shared buffer, ``T.gemm``, ``T.Kernel`` and ``T.use_swizzle``;
  completion after ``T.``;
- TL0501 quick fixes: a second document whose kernel is over the shared-memory budget is
  opened, edited and asked for its code actions (the fewer-stages fix) several times;
- the server process's memory (``/proc/<pid>/status``): resident size after start-up, after the
  first diagnostics, after the hovers and after the quick fixes, and its peak (``VmHWM``) over the
  whole session. The server never imports tvm or torch (the worker does), so it stays small.

Goals (2-core CPU machine): edit -> diagnostics p95 < 150 ms, hover < 50 ms, start-up < 1.5 s,
server peak RSS < 100 MiB. Prints a table and a line per goal; asserts nothing (benchmarks never
fail a build).
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tilelang_lsp.editor_client import LspClient  # noqa: E402

EXAMPLES = ["gemm", "gemm_epilogue", "softmax", "rmsnorm", "row_reduce", "softplus", "vector_add", "layernorm"]
SKIP_FUNCTIONS = {"main", "run"}
RENAMED = ("ref_program", "kernels")
TARGET_LINES = 300


def build_file(limit: int = TARGET_LINES) -> str:
    """The factories, helpers and ``kernels()`` of the examples, concatenated up to ~``limit`` lines."""
    imports = ["import torch", "", "import tilelang", "import tilelang.language as T", ""]
    body = []
    for name in EXAMPLES:
        path = REPO / "examples" / f"{name}.py"
        if not path.exists():
            continue
        body += _pieces(path.read_text(), name)
        if len(imports) + sum(p.count("\n") + 3 for p in body) >= limit:
            break
    return "\n".join(imports) + "\n" + "\n\n\n".join(body) + "\n"


def _pieces(text: str, suffix: str) -> list:
    tree = ast.parse(text)
    lines = text.split("\n")
    out = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.FunctionDef) or stmt.name in SKIP_FUNCTIONS:
            continue
        first = min([stmt.lineno] + [d.lineno for d in stmt.decorator_list])
        piece = "\n".join(lines[first - 1: stmt.end_lineno])
        for old in RENAMED:
            piece = piece.replace(f"def {old}(", f"def {old}_{suffix}(")
        out.append(piece)
    return out


def percentile(values, q) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def memory_mib(client: LspClient) -> dict:
    """The server process's resident (``VmRSS``) and peak resident (``VmHWM``) size, MiB."""
    out = {}
    try:
        for line in Path(f"/proc/{client.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return out


BUDGET_KERNEL = REPO / "tests" / "lsp" / "fixtures" / "smem_budget.py"


def measure_fixes(client: LspClient, folder: Path, n: int) -> list:
    """Open an over-budget kernel (TL0501) and ask for its quick fix after each of ``n`` edits."""
    path = folder / "over_budget.py"
    text = BUDGET_KERNEL.read_text()
    path.write_text(text)
    s = Session(client, path, text)
    client.wait_diagnostics(s.uri, 1, 300)
    out = []
    for i in range(n):
        time.sleep(0.2)
        s.change(text + f"\n# edit {i}\n")
        diags = client.diagnostics[s.uri][1]
        sent = time.perf_counter()
        actions = client.request("textDocument/codeAction", {
            "textDocument": {"uri": s.uri}, "range": {"start": {"line": 0, "character": 0},
                                                      "end": {"line": 0, "character": 0}},
            "context": {"diagnostics": diags}})
        out.append(time.perf_counter() - sent)
        if not any("num_stages" in a["title"] for a in actions or []):
            print("warning: no TL0501 quick fix offered")
    return out


def start(folder: Path) -> LspClient:
    env = {"PYTHONPATH": str(REPO), "TILELANG_CACHE_DIR": str(folder / "cache")}
    return LspClient([sys.executable, "-m", "tilelang_lsp.server"], cwd=str(REPO), env=env)


def measure_startup(folder: Path, runs: int) -> list:
    out = []
    for _ in range(runs):
        client = start(folder)
        client.initialize(str(folder))
        out.append(time.perf_counter() - client.started)
        client.shutdown()
    return out


class Session:
    def __init__(self, client: LspClient, path: Path, text: str):
        self.client, self.uri, self.text, self.version = client, path.as_uri(), text, 1
        client.open(self.uri, text)

    def change(self, text: str) -> float:
        self.version += 1
        self.text = text
        sent = time.perf_counter()
        self.client.change(self.uri, self.version, text)
        self.client.wait_diagnostics(self.uri, self.version, 120)
        return time.perf_counter() - sent

    def position(self, needle: str, offset: int) -> tuple:
        start = self.text.index(needle)
        line = self.text.count("\n", 0, start)
        return line, start - (self.text.rfind("\n", 0, start) + 1) + offset

    def timed(self, method: str, needle: str, offset: int) -> float:
        line, ch = self.position(needle, offset)
        sent = time.perf_counter()
        self.client.at(method, self.uri, line, ch)
        return time.perf_counter() - sent


def edit_inside_factory(text: str, i: int) -> str:
    """A distinct edit inside ``matmul``: the comment at the end of its ``T.clear`` line changes."""
    marker = "T.clear(C_local)"
    head, _, tail = text.partition(marker)
    rest = tail.split("\n", 1)
    return f"{head}{marker}  # edit {i}\n{rest[1] if len(rest) > 1 else ''}"


def measure_edits(s: Session, n: int, pause: float) -> list:
    out = []
    for i in range(n):
        time.sleep(pause)  # a user pausing between edits: each edit is checked on its own
        out.append(s.change(edit_inside_factory(s.text, i)))
    return out


def measure_bursts(s: Session, n: int) -> list:
    out = []
    for i in range(n):
        time.sleep(0.3)
        for k in range(6):
            s.version += 1
            s.text = edit_inside_factory(s.text, f"b{i}-{k}")
            sent = time.perf_counter()
            s.client.change(s.uri, s.version, s.text)
            if k < 5:
                time.sleep(0.04)
        s.client.wait_diagnostics(s.uri, s.version, 120)
        out.append(time.perf_counter() - sent)
    return out


def measure_top_edits(s: Session, n: int) -> list:
    out = []
    for i in range(n):
        time.sleep(0.3)
        out.append(s.change(f"# top edit {i}\n" + s.text))   # every line below moves
    return out


def row(name: str, values: list, unit: float = 1e3, goal: str = "") -> str:
    if not values:
        return f"{name:<44} {'-':>8}"
    return (f"{name:<44} {len(values):>5} {statistics.median(values) * unit:>9.1f} {percentile(values, 95) * unit:>9.1f} "
            f"{max(values) * unit:>9.1f}  {goal}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--edits", type=int, default=50)
    parser.add_argument("--hovers", type=int, default=200)
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--pause", type=float, default=0.3, help="seconds between measured edits")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="tilelang-bench-lsp-"))
    text = build_file()
    path = folder / "kernels_300.py"
    path.write_text(text)
    print(f"file: {path} ({text.count(chr(10))} lines, {sum(1 for _ in ast.walk(ast.parse(text)) if isinstance(_, ast.FunctionDef))} functions); "
          f"{os.cpu_count()} CPUs")
    startup = measure_startup(folder, args.starts)
    client = start(folder)
    client.initialize(str(folder))
    memory = {"after start-up": memory_mib(client)}
    opened = time.perf_counter()
    s = Session(client, path, text)
    first = client.wait_diagnostics(s.uri, 1, 300)
    cold = time.perf_counter() - opened
    print(f"first diagnostics (worker cold start, tvm import, every kernel built): {cold:.2f} s, "
          f"{len(first)} diagnostics")
    memory["after the first diagnostics"] = memory_mib(client)
    measure_edits(s, 5, 0.2)                               # warm-up
    edits = measure_edits(s, args.edits, args.pause)
    bursts = measure_bursts(s, max(args.edits // 5, 5))
    needles = {"fragment": ("C_local = ", 2), "shared buffer": ("A_shared = ", 2), "T.gemm": ("T.gemm(", 3),
               "T.Kernel": ("T.Kernel(", 3), "T.use_swizzle": ("T.use_swizzle(", 3)}
    hovers = {what: [] for what in needles}
    for _ in range(args.hovers // len(needles)):
        for what, (needle, offset) in needles.items():
            hovers[what].append(s.timed("textDocument/hover", needle, offset))
    memory["after the hovers"] = memory_mib(client)
    completions = [s.timed("textDocument/completion", "T.gemm(", 2) for _ in range(args.hovers // 2)]
    fixes = measure_fixes(client, folder, max(args.edits // 10, 5))
    memory["after the TL0501 quick fixes"] = memory_mib(client)
    tops = measure_top_edits(s, max(args.edits // 10, 5))
    memory["at the end"] = memory_mib(client)
    client.shutdown()
    print()
    print(f"{'measure (ms)':<44} {'n':>5} {'p50':>9} {'p95':>9} {'max':>9}  goal")
    print(row("start-up (process start -> initialize reply)", startup, goal="< 1500"))
    print(row("edit -> diagnostics (one kernel rebuilt)", edits, goal="p95 < 150"))
    print(row("typing burst: last keystroke -> diagnostics", bursts))
    print(row("line inserted at the top (all rebuilt)", tops))
    for what, values in hovers.items():
        print(row(f"hover on {what}", values, goal="< 50"))
    print(row("completion after T.", completions))
    print(row("TL0501 quick fix (codeAction)", fixes))
    print()
    for when, mem in memory.items():
        print(f"server RSS {when:<32} {mem.get('VmRSS', 0):>7.1f} MiB")
    peak = memory["at the end"].get("VmHWM", 0)
    print(f"server peak RSS over the session (VmHWM)  {peak:>7.1f} MiB   goal < 100")
    p95 = percentile(edits, 95) * 1e3
    print(f"edit -> diagnostics p95                   {p95:>7.1f} ms    goal < 150"
          f"  ({'met' if p95 < 150 else 'missed'})")


if __name__ == "__main__":
    main()
