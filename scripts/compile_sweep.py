#!/usr/bin/env python3
"""Compile upstream's example kernels over the configurations and sizes users give them, without a
GPU, with our package and with upstream's, and list where ours fails and upstream's compiles.

  python scripts/compile_sweep.py run --out DIR [--mode configs|sizes|dtypes] [--only PAT...]
                                      [--most N] [--timeout S] [--jobs N] [--python EXE]
                                      [--python-path DIR]... [--upstream DIR]
  python scripts/compile_sweep.py compare OURS_DIR UPSTREAM_DIR [--all]

``run`` starts scripts/compile_sweep_child.py once per example module (fresh process, the module's
folder as working directory) and leaves ``DIR/<module>.json`` (what each variant of each kernel
factory call compiled to) and ``DIR/<module>.log``. With ``--python`` / ``--python-path`` it runs
under another interpreter or package (upstream's wheel unpacked into a folder: ``--python-path
/tmp/up-site``). ``compare`` matches the two runs variant by variant and prints the variants ours
fails where upstream's compiles (first), those only upstream's fails, and those both fail; exit
status 1 when ours fails one that upstream's compiles. A shared-memory budget error (TL0501) is
listed but not counted: upstream lowers such kernels and fails at launch (docs/conformance.md).
Modules for sm_100 / sm_120 / ROCm, and the benchmark, regression and Triton ones, are skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conformance import DEFAULT_UPSTREAM  # noqa: E402  (where the pinned upstream copy lies)

CHILD = Path(__file__).resolve().parent / "compile_sweep_child.py"
SKIP_FOLDERS = ("amd", "aws", "blockscaled_gemm_sm100", "flash_attention_sm100", "gemm_sm120", "gemm_tcgen05",
                "plot_layout", "visual_layout_inference", "autodd", "analyze")
SKIP_PARTS = ("test_", "regression_", "benchmark", "triton", "__init__", "_amd", "cdna", "sm100", "conftest")
BUDGET = "TL0501"


def example_modules(upstream: Path, only: list[str]) -> list[str]:
    root = upstream / "examples"
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] in SKIP_FOLDERS or any(p in path.name for p in SKIP_PARTS):
            continue
        if not only or any(p in rel for p in only):
            out.append(rel)
    return out


def _run_one(rel: str, args, upstream: Path, out: Path) -> str:
    name = rel[:-3].replace("/", "__")
    target, log = out / f"{name}.json", out / f"{name}.log"
    env = dict(os.environ)
    if args.python_path:
        env["PYTHONPATH"] = os.pathsep.join([*args.python_path, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    t0 = time.time()
    cmd = [args.python, str(CHILD), str(upstream / "examples" / rel), str(target), args.mode, str(args.most)]
    with open(log, "w") as f:
        try:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=args.timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    if not target.is_file():
        target.write_text("[]")
    records = json.loads(target.read_text() or "[]")
    return f"{rel}: {len(records)} variants, {sum(not r['ok'] for r in records)} failed, {time.time() - t0:.0f} s (rc {rc})"


def run(args) -> int:
    upstream = Path(args.upstream)
    if not (upstream / "examples").is_dir():
        print("no upstream tree (give --upstream DIR)", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    modules = example_modules(upstream, args.only)
    with ThreadPoolExecutor(args.jobs) as pool:
        for line in pool.map(lambda rel: _run_one(rel, args, upstream, out), modules):
            print(line, flush=True)
    return 0


def _load(folder: Path) -> dict:
    out = {}
    for f in sorted(folder.glob("*.json")):
        for r in json.loads(f.read_text() or "[]"):
            out[(f.stem, r["kind"], r["factory"], r["variant"])] = r
    return out


def compare(args) -> int:
    ours, theirs = _load(Path(args.ours)), _load(Path(args.upstream_run))
    rows = {"ours fails, upstream's compiles": [], "only upstream's fails": [], "both fail": []}
    counts = {"both compile": 0, "not run by upstream's": 0}
    for key, o in ours.items():
        u = theirs.get(key)
        if u is None:
            counts["not run by upstream's"] += 1
        elif o["ok"] and u["ok"]:
            counts["both compile"] += 1
        elif not o["ok"] and u["ok"]:
            rows["ours fails, upstream's compiles"].append((key, o, u))
        elif o["ok"]:
            rows["only upstream's fails"].append((key, o, u))
        else:
            rows["both fail"].append((key, o, u))
    print(", ".join(f"{k}: {v}" for k, v in {**counts, **{k: len(v) for k, v in rows.items()}}.items()))
    regressions = [r for r in rows["ours fails, upstream's compiles"] if BUDGET not in r[1].get("error", "")]
    for title, items in rows.items():
        if not items or (title != "ours fails, upstream's compiles" and not args.all):
            continue
        print(f"\n## {title} ({len(items)})")
        for (module, kind, factory, variant), o, u in items:
            print(f"- {module.replace('__', '/')} {factory} [{kind}] {variant}")
            for side, r in (("ours", o), ("upstream's", u)):
                if not r["ok"]:
                    print(f"    {side}: {r.get('error', '')[:300]}")
    print(f"\n{len(regressions)} variant(s) ours fails where upstream's compiles (shared-memory budget errors not counted)")
    return 1 if regressions else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--mode", choices=("configs", "sizes", "dtypes"), default="configs")
    r.add_argument("--only", nargs="*", default=[])
    r.add_argument("--most", type=int, default=6, help="configs per factory call (configs mode)")
    r.add_argument("--timeout", type=float, default=600)
    r.add_argument("--jobs", type=int, default=1)
    r.add_argument("--python", default=sys.executable)
    r.add_argument("--python-path", action="append", default=[])
    r.add_argument("--upstream", default=os.environ.get("TL_CONFORMANCE_UPSTREAM", str(DEFAULT_UPSTREAM)))
    c = sub.add_parser("compare")
    c.add_argument("ours")
    c.add_argument("upstream_run")
    c.add_argument("--all", action="store_true")
    args = p.parse_args(argv)
    return run(args) if args.command == "run" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
