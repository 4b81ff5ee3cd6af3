#!/usr/bin/env python3
"""Cold compile time of upstream's example kernels (the cases of bench_upstream.py), ours against
upstream's wheel, on any machine with nvcc (no GPU needed):

    python benchmarks/bench_compile.py --upstream-python /tmp/up312/bin/python \
        --upstream-path /tmp/up-site [--only SUBSTR,...] [--rounds 2] [--json OUT]

Each side builds every case in a child process of its own with an empty compiler cache
(``TILELANG_CACHE_DIR`` in a fresh temporary folder): the time from the example's kernel factory
call to a cubin in hand (ours defers nvcc for some kernels to the first launch; the child runs it
then, ``ensure_cubin``), the example module already imported. A first kernel is built and left out
of the table so that neither side's one-time start-up (imports, nvcc's first run) lands on a case.
Rounds alternate which side runs first; the table keeps each case's fastest round. Without a GPU,
upstream's target detection is answered with sm_90a, and ours reads ``TILELANG_TARGET_ARCH`` (set
to sm_90a when unset). Ours is the ``tilelang`` this interpreter imports.

Prints one row per case (seconds, ours and upstream's, and upstream / ours: above 1 means ours
compiles faster) and the geometric mean; ``--json`` keeps every round's figures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

WARM_UP = "elementwise_add"     # built first in every child, not in the table


def child(names: list[str], examples: Path, out: Path) -> int:
    """Build the named cases in this process and write {case: seconds or error} to ``out``."""
    from _common import one_line
    from _upstream_cases import CASES, load

    import tilelang
    try:    # upstream's package: no GPU here, so name the target its detection would find
        import tilelang.backend.target as up_target
        import torch
        if not torch.cuda.is_available():
            up_target.auto_detect_target = lambda: {"kind": "cuda", "arch": "sm_90a"}
    except ImportError:
        pass
    by_name = {c.name: c for c in CASES}
    results = {"_tilelang": f"{getattr(tilelang, '__version__', '?')} {tilelang.__file__}"}

    def build(c) -> float:
        mod = load(examples, c.folder, c.module)
        t0 = time.perf_counter()
        kernel = c.build(mod)
        if callable(getattr(kernel, "ensure_cubin", None)):
            kernel.ensure_cubin()
        return time.perf_counter() - t0

    for name in [WARM_UP] + [n for n in names if n != WARM_UP]:
        try:
            results[name if name != WARM_UP else "_warm_up"] = build(by_name[name])
        except Exception as e:  # noqa: BLE001 - one case's failure must not end the run
            results[name] = one_line(e)
        out.write_text(json.dumps(results))
    return 0


def run_side(side: str, python: str, path: str | None, names, examples: Path, timeout: int) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"tl-compile-{side}-") as tmp:
        env = dict(os.environ, TILELANG_CACHE_DIR=str(Path(tmp) / "cache"))
        env.setdefault("TILELANG_TARGET_ARCH", "sm_90a")
        if path:
            env["PYTHONPATH"] = path
        out = Path(tmp) / "times.json"
        cmd = [python, str(Path(__file__).resolve()), "--child", str(out), "--examples", str(examples),
               "--only", ",".join(names)]
        try:
            subprocess.run(cmd, env=env, cwd=tmp, timeout=timeout, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            pass
        return json.loads(out.read_text()) if out.is_file() else {}


def table(names, rounds: list[dict]) -> tuple[list[str], list[float]]:
    lines = ["| case | ours s | upstream s | upstream / ours |", "|---|---:|---:|---:|"]
    ratios = []
    for name in names:
        if name == WARM_UP:
            continue
        best = {}
        for side in ("ours", "upstream"):
            times = [r[side].get(name) for r in rounds]
            nums = [t for t in times if isinstance(t, float)]
            best[side] = min(nums) if nums else next((t for t in times if t), "not run")
        o, u = best["ours"], best["upstream"]
        if isinstance(o, float) and isinstance(u, float):
            ratios.append(u / o)
            lines.append(f"| {name} | {o:.2f} | {u:.2f} | {u / o:.2f}x |")
        else:
            cell = lambda v: f"{v:.2f}" if isinstance(v, float) else str(v)[:80].replace("|", "/")  # noqa: E731
            lines.append(f"| {name} | {cell(o)} | {cell(u)} | - |")
    return lines, ratios


def main(argv=None) -> int:
    from bench_upstream import examples_dir, select

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--upstream-python", help="interpreter for upstream's side (default: this one)")
    p.add_argument("--upstream-path", help="folder holding upstream's unpacked wheel (PYTHONPATH)")
    p.add_argument("--only", help="substrings of case names, comma separated")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--timeout", type=int, default=1800, help="seconds per side and round")
    p.add_argument("--examples", help="upstream's examples/ folder")
    p.add_argument("--json", type=Path, help="write every round's figures here")
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    examples = examples_dir(args.examples)
    if args.child:    # the parent's exact case names (``select`` matches substrings)
        return child(args.only.split(","), examples, args.child)
    names = [c.name for c in select(args.only)]
    if not args.upstream_path:
        p.error("--upstream-path is required (upstream's wheel unpacked: docs/conformance.md)")
    sides = {"ours": (sys.executable, None),
             "upstream": (args.upstream_python or sys.executable, args.upstream_path)}
    rounds = []
    for r in range(args.rounds):
        order = ["ours", "upstream"] if r % 2 == 0 else ["upstream", "ours"]
        got = {}
        for side in order:
            t0 = time.time()
            got[side] = run_side(side, *sides[side], names, examples, args.timeout)
            print(f"round {r + 1}: {side} {time.time() - t0:.0f} s ({got[side].get('_tilelang', 'did not start')})",
                  flush=True)
        rounds.append(got)
    lines, ratios = table(names, rounds)
    print("\n".join(lines))
    if ratios:
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        slower = sum(1 for x in ratios if x < 1)
        print(f"\n{len(ratios)} cases: upstream / ours geometric mean {geo:.2f}x; ours slower on {slower}")
    if args.json:
        args.json.write_text(json.dumps(rounds, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
