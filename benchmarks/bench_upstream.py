#!/usr/bin/env python3
"""Upstream TileLang's own example kernels, measured with whichever ``tilelang`` is importable.

Run it once with ours and once with upstream's wheel (separate processes: both are named
``tilelang``), then compare the two JSON files:

    source ~/tl-env.sh;          python3 benchmarks/bench_upstream.py --json ours.json
    PYTHONPATH=~/up-site         python3 benchmarks/bench_upstream.py --json upstream.json
    python3 benchmarks/bench_upstream.py --compare ours.json upstream.json      # no GPU needed

Other modes: ``--list`` (the cases and their sizes), ``--only SUBSTR[,SUBSTR...]`` (a subset),
``--compile-only`` (build every case's kernel, no GPU needed; ``--nvcc`` also runs nvcc where the
kernel object defers it, as ours does for multi-kernel functions; ``--dump DIR`` writes each case's
CUDA source to ``DIR/<case>.cu``, to diff two compilers' or two trees' code), ``--merge`` (update an existing
``--json`` file instead of replacing it, for a run split by ``--only``), ``--skip NAME[,NAME...]``
(leave cases out), ``--budget S`` (start no case after S seconds, for a device's command limit) and
``--resume`` (measure only the cases the ``--json`` file lacks, merging), ``--isolate`` (each case
in a child process: a sticky CUDA error, or a hang, cut when ``--case-timeout`` passes with no case
finished, costs only that case), ``--examples DIR`` (upstream's ``examples/``; default
``$TL_UPSTREAM_EXAMPLES``, else the first of ``{<repo>/../shared, <repo>/shared,
<repo>/.gpu}/conformance/upstream/examples``), ``--jobs N`` (build every case first in N concurrent
child processes, so the timed pass finds each kernel in the compiler's disk cache: a whole table in
minutes on a many-core GPU machine), ``--chunk K`` (with ``--isolate``: K cases per child process,
one interpreter start for K; a child that dies has its unfinished cases rerun one per child),
``--side NAME=SHELL`` (repeated: several builds of ``tilelang`` timed alternately case by case, one
long-lived worker process a side, ``--rounds`` passes, medians; ``--json`` with ``{side}`` in the
path; ``_interleave.py``).

Each case (``_upstream_cases.py``) imports the unchanged example module from its folder, builds
the kernel as the example does, checks it against the example's reference (or torch) on random
inputs and times the kernel and a torch reference with ``triton.testing.do_bench`` (median, after
a warm-up call), torch seeded with ``SEED`` before each case, so that both compilers see the same
inputs and the same workload where it is random (the fp8 indexer's sequence ranges). A case that
fails prints ``error: <first line>`` and the run goes on.
The JSON maps each case name to ``{ms, ref_ms, ok, maxdiff, error, tilelang_version,
tilelang_path, ...}`` (plus ``_meta``). Without a CUDA GPU a measuring run says so and exits 2.

Nothing here imports our package's internals: only ``tilelang`` (public API), torch, triton and
the example modules.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _interleave import fmt_ms, per_round_ratios, run_sides, save_json  # noqa: E402
from _upstream_cases import CASES, load  # noqa: E402

EXIT_NO_GPU = 2
SEED = 0                # torch.manual_seed before each case (``measure``)


# --------------------------------------------------------------------------- helpers

def one_line(err: BaseException, limit: int = 200) -> str:
    text = next((ln.strip() for ln in str(err).splitlines() if ln.strip()), "")
    line = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return line if len(line) <= limit else line[:limit - 3] + "..."


def examples_dir(arg: str | None) -> Path:
    root = HERE.parent
    # beside the checkout, inside it, or carried to the GPU machine in the git-ignored .gpu/ (as
    # scripts/conformance.py looks for it)
    candidates = [arg, os.environ.get("TL_UPSTREAM_EXAMPLES")] + [
        str(base / "conformance" / "upstream" / "examples")
        for base in (root.parent / "shared", root / "shared", root / ".gpu")] + [
        str(root / ".gpu" / "conf" / "upstream" / "examples")]
    for c in candidates:
        if c and Path(c).is_dir():
            return Path(c).resolve()
    raise SystemExit("bench_upstream: upstream's examples/ folder not found; pass --examples DIR "
                     "or set TL_UPSTREAM_EXAMPLES")


def select(only: str | None):
    if not only:
        return list(CASES)
    keys = [k.strip() for k in only.split(",") if k.strip()]
    return [c for c in CASES if any(k in c.name for k in keys)]


def tilelang_identity() -> dict:
    import tilelang
    return {"tilelang_version": str(getattr(tilelang, "__version__", "?")),
            "tilelang_path": str(Path(getattr(tilelang, "__file__", "?")).parent)}


class Helper:
    """Given to each case's run(): timing and the closeness checks, results as a dict."""

    def __init__(self, warmup_ms: int, rep_ms: int):
        self.warmup_ms, self.rep_ms = warmup_ms, rep_ms

    def time(self, fn) -> float:
        import torch
        import triton.testing
        fn()
        torch.cuda.synchronize()
        return float(triton.testing.do_bench(fn, warmup=self.warmup_ms, rep=self.rep_ms, return_mode="median"))

    @staticmethod
    def close(out, ref, atol: float, rtol: float, rel_l2: float = 2e-2):
        """allclose(atol, rtol) and a relative L2 error below ``rel_l2`` (outputs of random inputs
        are often small next to atol: the norm keeps the check meaningful). -> (ok, maxdiff)."""
        import torch
        out, ref = out.float(), ref.float()
        if out.shape != ref.shape:
            raise AssertionError(f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
        if not bool(torch.isfinite(out).all()):
            return False, float("inf")
        diff = (out - ref).abs()
        maxdiff = float(diff.max()) if diff.numel() else 0.0
        ok = bool(torch.allclose(out, ref, atol=atol, rtol=rtol))
        norm = float(ref.norm())
        if ok and norm > 0:
            ok = float(diff.norm()) / norm <= rel_l2
        return ok, maxdiff

    def result(self, out, ref, *, atol, rtol, ms, ref_ms, flops=None, bytes_=None):
        ok, maxdiff = self.close(out, ref, atol, rtol)
        return self.result_metric(ok, maxdiff, ms=ms, ref_ms=ref_ms, flops=flops, bytes_=bytes_)

    @staticmethod
    def result_metric(ok, maxdiff, *, ms, ref_ms, flops=None, bytes_=None, metric="maxdiff"):
        rec = {"ok": bool(ok), "maxdiff": float(maxdiff), "ms": ms, "ref_ms": ref_ms}
        if metric != "maxdiff":
            rec["metric"] = metric
        if flops and ms:
            rec["tflops"] = flops / ms * 1e-9
        if bytes_ and ms:
            rec["gbps"] = bytes_ / ms * 1e-6
        return rec


# --------------------------------------------------------------------------- modes

def do_list(cases) -> int:
    for c in cases:
        print(f"{c.name:34s} {c.folder}/{c.module}.py")
        print(f"{'':34s}   {c.size}")
        print(f"{'':34s}   torch: {c.ref or '-'}")
    print(f"{len(cases)} cases")
    return 0


def do_compile_only(cases, examples: Path, verbose: bool, nvcc: bool, dump: str | None = None) -> int:
    ident = tilelang_identity()
    print(f"tilelang {ident['tilelang_version']} at {ident['tilelang_path']}; compile only", flush=True)
    failed = 0
    for c in cases:
        t0 = time.time()
        try:
            mod = load(examples, c.folder, c.module)
            kernel = c.build(mod)
            src = kernel.get_kernel_source()
            if dump:
                Path(dump).mkdir(parents=True, exist_ok=True)
                (Path(dump) / f"{c.name}.cu").write_text(src)
            if nvcc and callable(getattr(kernel, "ensure_cubin", None)):
                kernel.ensure_cubin()   # ours compiles device code on first launch; --nvcc runs it now
            print(f"{c.name:34s} built  {time.time() - t0:6.1f}s  ({len(src)} chars of source)", flush=True)
        except BaseException as e:  # noqa: BLE001 - one case's failure must not end the run
            if isinstance(e, KeyboardInterrupt):
                raise
            failed += 1
            print(f"{c.name:34s} error: {one_line(e)}", flush=True)
            if verbose:
                traceback.print_exc()
    print(f"{len(cases) - failed}/{len(cases)} built")
    return 0 if failed == 0 else 1


def gpu_missing() -> str | None:
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        return f"torch cannot be imported ({one_line(e)})"
    if not torch.cuda.is_available():
        return "no CUDA GPU is visible (torch.cuda.is_available() is False)"
    return None


def write_json(path: Path, records: dict, merge: bool) -> None:
    data = {}
    if merge and path.is_file():
        data = json.loads(path.read_text())
    data.update(records)
    save_json(path, data)


def _blank(c, ident: dict) -> dict:
    return {**ident, "ms": None, "ref_ms": None, "ok": False, "maxdiff": None, "error": None,
            "size": c.size, "ref": c.ref}


def measure(c, examples: Path, h: Helper, ident: dict, verbose: bool, built: dict | None = None) -> dict:
    """Build, check and time one case in this process; a failure becomes the record's error.
    ``built`` (name -> (module, kernel)) keeps the kernels of a process that measures again."""
    import torch
    rec = _blank(c, ident)
    t0 = time.time()
    try:
        if built is not None and c.name in built:
            mod, kernel = built[c.name]
        else:
            mod = load(examples, c.folder, c.module)
            kernel = c.build(mod)
            if built is not None:
                built[c.name] = (mod, kernel)
        rec["build_s"] = round(time.time() - t0, 2)
        torch.manual_seed(SEED)     # the same inputs (and, where random, workloads) for both compilers
        rec.update(c.run(mod, kernel, h))
    except BaseException as e:  # noqa: BLE001 - one case's failure must not end the run
        if isinstance(e, KeyboardInterrupt):
            raise
        rec["error"] = one_line(e)
        if verbose:
            traceback.print_exc()
    finally:
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - a sticky CUDA error shows in the next case too
            pass
        torch.cuda.empty_cache()
        rec["wall_s"] = round(time.time() - t0, 2)   # load, build, check and timing together
    return rec


def _child_cmd(names, examples: Path, args, out: Path) -> list[str]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--names", ",".join(names), "--json", str(out),
           "--examples", str(examples), "--warmup", str(args.warmup), "--rep", str(args.rep)]
    return cmd + (["-v"] if args.verbose else [])


def run_child(cmd, out: Path, case_timeout: float, verbose: bool = False):
    """Run a measuring child that records each finished case in ``out`` (JSON). It is killed when
    ``case_timeout`` seconds pass with no new case recorded, so a hang costs one case's timeout, not
    the whole chunk's. -> (returncode or None when killed, one-line error or None)."""
    import subprocess
    import tempfile
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
        seen, deadline = None, time.monotonic() + case_timeout
        while proc.poll() is None:
            time.sleep(0.5)
            stamp = out.stat().st_mtime_ns if out.is_file() else None
            if stamp != seen:
                seen, deadline = stamp, time.monotonic() + case_timeout
            elif time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                return None, f"timed out: no case finished in {case_timeout:g}s (hang?)"
        log.seek(0)
        text = log.read()
    if verbose and text:
        sys.stderr.write(text)
    tail = [ln for ln in text.splitlines() if ln.strip()]
    return proc.returncode, f"child process exited {proc.returncode}: {tail[-1].strip() if tail else 'no output'}"


def measure_isolated(chunk, examples: Path, args, ident: dict) -> dict:
    """The cases of ``chunk`` in a child process of their own (a fresh CUDA context; the child is
    cut when --case-timeout passes without a case finishing). When the child dies part-way, a chunk
    of several cases has its unfinished or failed ones rerun one per child, so a sticky CUDA error
    or a hang costs only its own case. -> {name: record}."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "chunk.json"
        rc, err = run_child(_child_cmd([c.name for c in chunk], examples, args, out), out, args.case_timeout,
                            args.verbose)
        got = json.loads(out.read_text()) if out.is_file() else {}
    # a child cut for a hang stopped in the first case it had not recorded: that one is not run again
    hung = next((c.name for c in chunk if c.name not in got), None) if rc is None else None
    records, left = {}, []
    for c in chunk:
        if got.get(c.name) and (len(chunk) == 1 or not got[c.name].get("error")):
            records[c.name] = got[c.name]
        elif c.name == hung and len(chunk) > 1:
            records[c.name] = {**_blank(c, ident), "error": err}
        else:
            left.append(c)
    if len(chunk) == 1 or not left:
        for c in left:
            records[c.name] = {**_blank(c, ident), "error": err}
        return records
    for c in left:   # the child died in one of these: each alone now
        records.update(measure_isolated([c], examples, args, ident))
    return records


def prebuild(cases, examples: Path, args) -> list[str]:
    """Build every case's kernel (nvcc included) in ``args.jobs`` concurrent child processes, so the
    timed pass loads each from the compiler's disk cache. Cases are dealt round-robin; a failure
    here is only reported (the timed pass records it properly). -> the names that failed."""
    import subprocess
    jobs = max(1, min(args.jobs, len(cases)))
    groups = [cases[i::jobs] for i in range(jobs)]
    t0 = time.time()
    print(f"building {len(cases)} cases in {jobs} processes ...", flush=True)
    procs = []
    for g in groups:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--compile-only", "--nvcc",
               "--names", ",".join(c.name for c in g), "--examples", str(examples)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    failed = []
    for proc in procs:
        out, _ = proc.communicate()
        failed += [ln.split()[0] for ln in out.splitlines() if " error: " in ln]
    print(f"built in {time.time() - t0:.0f}s" + (f"; failed to build: {', '.join(failed)}" if failed else ""),
          flush=True)
    return failed


def run_meta() -> dict:
    import torch
    return {**tilelang_identity(), "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "python": sys.version.split()[0]}


def do_serve(fd: int, examples: Path, args) -> int:
    """A measuring worker for ``--side`` (``_interleave.py``): its meta, then one record for each
    ``{"name": CASE}`` line read from stdin, as JSON lines on ``fd``; built kernels are kept."""
    out = os.fdopen(fd, "w")

    def send(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()
    send(run_meta())
    ident, h, built = tilelang_identity(), Helper(args.warmup, args.rep), {}
    by_name = {c.name: c for c in CASES}
    for line in sys.stdin:
        name = json.loads(line).get("name")
        if name not in by_name:
            send({"error": f"no case named {name!r}", "ok": False})
            continue
        send(measure(by_name[name], examples, h, ident, args.verbose, built))
    return 0


def do_run(cases, examples: Path, args) -> int:
    meta = run_meta()
    ident = {k: meta[k] for k in ("tilelang_version", "tilelang_path")}
    print(f"tilelang {ident['tilelang_version']} at {ident['tilelang_path']}; torch {meta['torch']}; "
          f"{meta['gpu']}", flush=True)
    h = Helper(args.warmup, args.rep)
    records = {"_meta": meta}
    print(f"| {'case':34s} | {'ms':>9s} | {'torch ms':>9s} | {'torch/ms':>8s} | check |", flush=True)
    print(f"|{'-' * 36}|{'-' * 11}|{'-' * 11}|{'-' * 10}|-------|", flush=True)
    if args.jobs > 1:
        prebuild(cases, examples, args)
    step = max(1, args.chunk) if args.isolate else 1
    start = time.monotonic()
    for i in range(0, len(cases), step):
        if args.budget is not None and time.monotonic() - start > args.budget:
            rest = [c.name for c in cases[i:]]
            print(f"budget of {args.budget:g}s spent: {len(rest)} case(s) not started "
                  f"(run again with --resume to measure them): {', '.join(rest)}", flush=True)
            break
        chunk = cases[i:i + step]
        if args.isolate:
            got = measure_isolated(chunk, examples, args, ident)
        else:
            got = {c.name: measure(c, examples, h, ident, args.verbose) for c in chunk}
        for c in chunk:
            rec = got[c.name]
            if rec.get("error"):
                print(f"| {c.name:34s} | error: {rec['error']} |", flush=True)
            else:
                ratio = rec["ref_ms"] / rec["ms"] if rec.get("ref_ms") and rec.get("ms") else None
                check = ("ok" if rec["ok"] else "WRONG") + f" {rec['maxdiff']:.2e}"
                print(f"| {c.name:34s} | {fmt_ms(rec['ms']):>9s} | {fmt_ms(rec.get('ref_ms')):>9s} | "
                      f"{(f'{ratio:.2f}x' if ratio else '-'):>8s} | {check} |", flush=True)
            records[c.name] = rec
        if args.json:
            write_json(Path(args.json), records, args.merge)
    ok = sum(1 for k, r in records.items() if not k.startswith("_") and r["ok"])
    print(f"{ok}/{len(cases)} cases ran and matched their reference", flush=True)
    return 0


# --------------------------------------------------------------------------- compare

def geomean(values) -> float | None:
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def _valid(rec) -> bool:
    return bool(rec) and rec.get("ok") and not rec.get("error") and isinstance(rec.get("ms"), (int, float)) \
        and rec["ms"] > 0


def _status(rec) -> str:
    if not rec:
        return "not run"
    if rec.get("error"):
        return f"error: {rec['error']}"
    if not rec.get("ok"):
        return f"wrong result (maxdiff {rec.get('maxdiff')})"
    return ""


def _rounds_note(a: dict, b: dict) -> str:
    """'rounds 0.97-1.04x' where both records hold several rounds (``--side``), else ''."""
    per = per_round_ratios(a, b)
    return f"rounds {min(per):.2f}-{max(per):.2f}x" if len(per) > 1 else ""


def compare_table(ours: dict, upstream: dict) -> str:
    names = [n for n in ours if not n.startswith("_")]
    names += [n for n in upstream if not n.startswith("_") and n not in ours]
    order = {c.name: i for i, c in enumerate(CASES)}
    names.sort(key=lambda n: order.get(n, len(order)))
    lines = []
    mo, mu = ours.get("_meta", {}), upstream.get("_meta", {})
    lines.append(f"ours: tilelang {mo.get('tilelang_version', '?')} ({mo.get('tilelang_path', '?')}); "
                 f"upstream: tilelang {mu.get('tilelang_version', '?')} ({mu.get('tilelang_path', '?')}); "
                 f"GPU {mo.get('gpu', mu.get('gpu', '?'))}")
    lines.append("")
    lines.append("| case | ours ms | upstream ms | upstream/ours | torch ms | ours vs torch | upstream vs torch "
                 "| notes |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---|")
    speed, ovt, uvt = [], [], []
    for n in names:
        a, b = ours.get(n), upstream.get(n)
        va, vb = _valid(a), _valid(b)
        a_ms = a["ms"] if va else None
        b_ms = b["ms"] if vb else None
        ratio = b_ms / a_ms if va and vb else None
        ref_ms = (a or {}).get("ref_ms") or (b or {}).get("ref_ms")
        rt_a = a["ref_ms"] / a_ms if va and a.get("ref_ms") else None
        rt_b = b["ref_ms"] / b_ms if vb and b.get("ref_ms") else None
        if ratio:
            speed.append(ratio)
        if rt_a:
            ovt.append(rt_a)
        if rt_b:
            uvt.append(rt_b)
        notes = "; ".join(x for x in (("ours: " + _status(a)) if _status(a) else "",
                                      ("upstream: " + _status(b)) if _status(b) else "",
                                      _rounds_note(a, b) if ratio else "") if x)
        cells = [n, fmt_ms(a_ms), fmt_ms(b_ms), f"{ratio:.2f}x" if ratio else "-", fmt_ms(ref_ms),
                 f"{rt_a:.2f}x" if rt_a else "-", f"{rt_b:.2f}x" if rt_b else "-", notes.replace("|", "/")]
        lines.append("| " + " | ".join(cells) + " |")
    g, go, gu = geomean(speed), geomean(ovt), geomean(uvt)
    lines.append(f"| **geometric mean** | | | {f'{g:.2f}x' if g else '-'} ({len(speed)} cases) | | "
                 f"{f'{go:.2f}x' if go else '-'} ({len(ovt)}) | {f'{gu:.2f}x' if gu else '-'} ({len(uvt)}) | |")
    lines.append("")
    lines.append("upstream/ours > 1: ours is faster. vs torch = torch ms / kernel ms, each from its own run "
                 "(> 1: faster than torch). Ratios only where the result matched its reference.")
    rounds = mo.get("rounds") if mo.get("order") else None
    if rounds:
        lines.append(f"ms: the median of {rounds} rounds, the two compilers alternating case by case "
                     "(bench_upstream --side); 'rounds': the range of the per-round ratio.")
    return "\n".join(lines)


def do_compare(a_path: str, b_path: str) -> int:
    try:
        ours = json.loads(Path(a_path).read_text())
        upstream = json.loads(Path(b_path).read_text())
    except (OSError, ValueError) as e:
        print(f"bench_upstream --compare: cannot read the JSON files: {one_line(e)}", file=sys.stderr)
        return 1
    print(compare_table(ours, upstream))
    return 0


# --------------------------------------------------------------------------- main

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", metavar="OUT.json", help="write the results (case -> record) to this file")
    p.add_argument("--merge", action="store_true", help="update the --json file instead of replacing it")
    p.add_argument("--only", metavar="SUBSTR", help="only cases whose name contains one of these (comma-separated)")
    p.add_argument("--compare", nargs=2, metavar=("OURS.json", "UPSTREAM.json"),
                   help="print the markdown table of two runs (no GPU needed)")
    p.add_argument("--list", action="store_true", help="list the cases and their sizes")
    p.add_argument("--compile-only", action="store_true", help="build every case's kernel; no GPU needed")
    p.add_argument("--nvcc", action="store_true",
                   help="with --compile-only: also run nvcc where the kernel defers it (ours)")
    p.add_argument("--dump", metavar="DIR",
                   help="with --compile-only: write each case's CUDA to DIR/<case>.cu (one case after another: --jobs is ignored)")
    p.add_argument("--examples", metavar="DIR", help="upstream's examples/ folder")
    p.add_argument("--warmup", type=int, default=25, help="do_bench warm-up, ms (default 25)")
    p.add_argument("--rep", type=int, default=100, help="do_bench repetitions, ms (default 100)")
    p.add_argument("--isolate", action="store_true",
                   help="run each case in a child process of its own (survives a sticky CUDA error or a hang)")
    p.add_argument("--case-timeout", type=int, default=300, help="with --isolate: seconds per case (default 300)")
    p.add_argument("--chunk", type=int, default=1, metavar="K",
                   help="with --isolate: K cases per child process (default 1)")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="build every case first in N concurrent processes (default 1: build as measured)")
    p.add_argument("--skip", metavar="NAME", help="leave out these cases (exact names, comma-separated)")
    p.add_argument("--budget", type=float, metavar="S",
                   help="start no case after S seconds (a device's command limit); the rest: --resume")
    p.add_argument("--resume", action="store_true",
                   help="with --json: measure only the cases that file does not hold yet, and merge")
    p.add_argument("--side", action="append", metavar="NAME=SHELL",
                   help="time every case on several sides, alternating case by case (repeat: one a side; "
                        "SHELL picks the side's tilelang, e.g. 'export PYTHONPATH=~/up-site'); --json names "
                        "each side's file with {side}; see _interleave.py")
    p.add_argument("--side-skip", action="append", metavar="NAME=CASE,...", help="with --side: cases that side leaves out")
    p.add_argument("--rounds", type=int, default=3, help="with --side: passes over the cases (default 3; medians)")
    p.add_argument("--serve", type=int, metavar="FD", help=argparse.SUPPRESS)
    p.add_argument("--names", help=argparse.SUPPRESS)
    p.add_argument("-v", "--verbose", action="store_true", help="print the traceback of a failing case")
    args = p.parse_args(argv)

    if args.compare:
        return do_compare(*args.compare)
    cases = select(args.only)
    if args.names:   # exact names (what --isolate gives each child)
        wanted = set(args.names.split(","))
        cases = [c for c in CASES if c.name in wanted]
    if args.skip:
        unknown = set(args.skip.split(",")) - {c.name for c in CASES}
        if unknown:
            print(f"bench_upstream: --skip names no case: {', '.join(sorted(unknown))} (see --list)", file=sys.stderr)
            return 1
        cases = [c for c in cases if c.name not in set(args.skip.split(","))]
    if args.list:
        return do_list(cases)
    if args.side:
        return run_sides(cases, args)
    if args.serve is not None:
        missing = gpu_missing()
        if missing:
            print(f"bench_upstream --serve: {missing}", file=sys.stderr)
            return EXIT_NO_GPU
        return do_serve(args.serve, examples_dir(args.examples), args)
    if args.resume:
        if not args.json:
            print("bench_upstream: --resume needs --json (the file of the run to continue)", file=sys.stderr)
            return 1
        done = set(json.loads(Path(args.json).read_text())) if Path(args.json).is_file() else set()
        cases, args.merge = [c for c in cases if c.name not in done], True
        if not cases:
            print(f"bench_upstream: {args.json} holds every selected case already")
            return 0
    if not cases:
        print(f"bench_upstream: no case matches --only {args.only!r} (see --list)", file=sys.stderr)
        return 1
    if args.compile_only and args.jobs > 1 and not args.dump:
        return 1 if prebuild(cases, examples_dir(args.examples), args) else 0
    if args.compile_only:
        return do_compile_only(cases, examples_dir(args.examples), args.verbose, args.nvcc, args.dump)
    missing = gpu_missing()
    if missing:
        print(f"bench_upstream: {missing}; measuring needs one. Without a GPU use --list, --compile-only "
              f"or --compare.", file=sys.stderr)
        return EXIT_NO_GPU
    return do_run(cases, examples_dir(args.examples), args)


if __name__ == "__main__":
    sys.exit(main())
