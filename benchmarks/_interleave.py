"""Several builds of ``tilelang`` timed on the same cases, alternating case by case, in rounds.

``bench_upstream.py --side NAME=SHELL ...`` comes here. Each side is a long-lived worker process
(``bench_upstream.py --serve FD`` started by ``bash -c "SHELL && exec python3 ..."``, so SHELL picks
the ``tilelang`` it imports: ``source ~/tl-env.sh``, ``export PYTHONPATH=~/up-site``, a pass-config
variable). The driver asks the workers for one case at a time, every side in turn (the order
rotating from case to case and round to round, so no side always runs first), and repeats the
whole list ``--rounds`` times. A worker keeps its CUDA context and each case's built kernel between
rounds, so a round costs the timing, not interpreter starts; the sides of one case run seconds
apart on the same GPU state.

Each side's JSON (``--json`` with ``{side}`` in the path) maps a case to the first round's record
with ``runs`` (every round's ``ms``, ``ref_ms``, ``ok``, ``maxdiff``, ``error``, ``wall_s``) and
``ms`` / ``ref_ms`` replaced by the medians over the rounds; a case is ``ok`` only when every round
matched its reference. A worker that hangs past ``--case-timeout``, dies, or reports an error is
replaced by a fresh process before the next request (a sticky CUDA error ends with its case), and a
case that failed in a worker which had run other cases is tried once more in a fresh one; a case
that failed is not asked for again in later rounds.
``--budget`` stops starting cases; ``--resume`` keeps the rounds the files hold and measures the
rest. Only the standard library here: the workers import torch and ``tilelang``.
"""

from __future__ import annotations

import json
import os
import select
import shlex
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent / "bench_upstream.py"
START_TIMEOUT = 300          # seconds for a worker to import torch and tilelang and say hello
RUN_FIELDS = ("ms", "ref_ms", "ok", "maxdiff", "error", "wall_s")


def parse_sides(specs, skips) -> list[dict]:
    """``NAME=SHELL`` strings (and ``NAME=CASE,CASE`` skips) -> [{name, shell, skip}]; ValueError
    on a malformed or repeated name."""
    sides = []
    for spec in specs:
        name, sep, shell = spec.partition("=")
        if not sep or not name.strip() or not name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"--side {spec!r}: write NAME=SHELL (NAME of letters, digits, - and _)")
        if any(s["name"] == name for s in sides):
            raise ValueError(f"--side {name!r} given twice")
        sides.append({"name": name, "shell": shell.strip() or "true", "skip": set()})
    by_name = {s["name"]: s for s in sides}
    for spec in skips or ():
        name, sep, cases = spec.partition("=")
        if not sep or name not in by_name:
            raise ValueError(f"--side-skip {spec!r}: write SIDE=CASE[,CASE...] for a side given with --side")
        by_name[name]["skip"] |= {c for c in cases.split(",") if c}
    return sides


class Worker:
    """One side's measuring process; ``request`` returns a record or an error record."""

    def __init__(self, side: dict, serve_args: list[str], log: Path):
        self.side, self.serve_args, self.log = side, serve_args, log
        self.proc, self.fd, self.buf, self.served, self.meta = None, None, b"", 0, None
        self.dead = None            # why the side's worker cannot start: every request gets it

    def _start(self) -> str | None:
        r, w = os.pipe()
        cmd = f"{self.side['shell']} && exec python3 {shlex.quote(str(BENCH))} --serve {w} " + \
            " ".join(shlex.quote(a) for a in self.serve_args)
        with open(self.log, "a") as log:
            log.write(f"\n=== {time.strftime('%H:%M:%S')} start: {cmd}\n")
            log.flush()
            self.proc = subprocess.Popen(["bash", "-c", cmd], stdin=subprocess.PIPE, stdout=log,
                                         stderr=subprocess.STDOUT, pass_fds=(w,), start_new_session=True,
                                         text=True)
        os.close(w)
        self.fd, self.buf, self.served = r, b"", 0
        hello = self._read(START_TIMEOUT)
        if isinstance(hello, str):
            self.stop()
            self.dead = f"{self.side['name']} worker did not start: {hello}"
            return self.dead
        self.meta = hello
        return None

    def _read(self, timeout: float):
        """The next JSON line from the worker, or a one-line reason there is none."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return f"timed out: nothing in {timeout:g}s (hang?)"
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                self.proc.wait()
                return f"worker exited {self.proc.returncode}: {self._last_log_line()}"
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError:
            return f"unreadable reply from the worker: {line[:120]!r}"

    def _last_log_line(self) -> str:
        try:
            lines = [ln.strip() for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return "no log"
        return lines[-1][:200] if lines else "no output"

    def request(self, name: str, timeout: float) -> dict:
        if self.dead:
            return {"error": self.dead, "ok": False}
        if self.proc is None:
            err = self._start()
            if err:
                return {"error": err, "ok": False}
        try:
            self.proc.stdin.write(json.dumps({"name": name}) + "\n")
            self.proc.stdin.flush()
        except OSError:             # it died after its last reply: the read below says how
            pass
        rec = self._read(timeout)
        self.served += 1
        if isinstance(rec, str):
            self.stop()
            return {"error": rec, "ok": False}
        return rec

    def stop(self):
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            os.close(self.fd)
        self.proc = None


def aggregate(first: dict, runs: list[dict]) -> dict:
    """One case's record over its rounds: the first round's fields, medians of the timings."""
    rec = {**first, "runs": runs}
    errors = [r.get("error") for r in runs if r.get("error")]
    rec["error"] = errors[0] if errors else None
    rec["ok"] = not errors and all(r.get("ok") for r in runs)
    diffs = [r["maxdiff"] for r in runs if isinstance(r.get("maxdiff"), (int, float))]
    rec["maxdiff"] = max(diffs) if diffs else None
    for key in ("ms", "ref_ms"):
        vals = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
        rec[key] = statistics.median(vals) if vals and len(vals) == len(runs) else (vals[0] if vals else None)
    for key in ("tflops", "gbps"):   # rates follow the median time
        if first.get(key) and first.get("ms") and rec.get("ms"):
            rec[key] = first[key] * first["ms"] / rec["ms"]
    return rec


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text()) if path.is_file() else {}
    except ValueError:
        return {}


def save_json(path: Path, data: dict):
    """``data`` written to ``path`` whole or not at all (a temporary file, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(path)


def fmt_ms(v) -> str:
    return f"{v:.4f}" if isinstance(v, (int, float)) and not isinstance(v, bool) else "-"


def _measure(worker: Worker, name: str, timeout: float) -> dict:
    """One case on one side; a failure in a worker that ran other cases first is tried again in
    a fresh one (it may be the earlier case's sticky error), and a failed worker is replaced."""
    reused = worker.served > 0 and worker.proc is not None
    rec = worker.request(name, timeout)
    if rec.get("error"):
        worker.stop()
        if reused:
            rec = worker.request(name, timeout)
            if rec.get("error"):
                worker.stop()
    return rec


def run_sides(cases, args) -> int:
    """Measure ``cases`` on every side of ``args.side`` (see the module docstring)."""
    try:
        sides = parse_sides(args.side, args.side_skip)
    except ValueError as e:
        print(f"bench_upstream: {e}", file=sys.stderr)
        return 1
    if "{side}" not in (args.json or ""):
        print("bench_upstream: --side needs --json with {side} in the path (one file a side)", file=sys.stderr)
        return 1
    paths = {s["name"]: Path(os.path.expanduser(args.json.replace("{side}", s["name"]))) for s in sides}
    data = {n: (_load(p) if args.resume else {}) for n, p in paths.items()}
    serve = ["--warmup", str(args.warmup), "--rep", str(args.rep)] + \
        (["--examples", args.examples] if args.examples else []) + (["-v"] if args.verbose else [])
    workers = {s["name"]: Worker(s, serve, p.with_suffix(".log")) for s, p in zip(sides, paths.values())}
    if args.jobs > 1:
        _prebuild(sides, cases, args, paths)
    start, rounds = time.monotonic(), max(1, args.rounds)
    print(f"{len(cases)} cases x {rounds} rounds on {', '.join(s['name'] for s in sides)}, alternating", flush=True)
    try:
        for r in range(rounds):
            for i, c in enumerate(cases):
                if args.budget is not None and time.monotonic() - start > args.budget:
                    print(f"budget of {args.budget:g}s spent in round {r + 1} at case {i + 1} of {len(cases)}: "
                          f"run again with --resume for the rest", flush=True)
                    return 0
                _one_case(c, r, (i + r) % len(sides), sides, workers, data, paths, args)
    finally:
        for w in workers.values():
            w.stop()
    print(summary(cases, sides, data), flush=True)
    return 0


def summary(cases, sides, data) -> str:
    """Each case's median ms a side, and each other side's median over the first side's (> 1: the
    first is faster), with the range of that ratio over the rounds both sides completed."""
    first = sides[0]["name"]
    head = [f"{s['name']} ms" for s in sides] + [f"{s['name']}/{first} (rounds)" for s in sides[1:]]
    lines = ["| case | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    for c in cases:
        recs = [data[s["name"]].get(c.name) for s in sides]
        cells = [fmt_ms(r["ms"]) if r and r.get("ok") else ("error" if r and r.get("error") else "-") for r in recs]
        for r in recs[1:]:
            cells.append(round_ratios(recs[0], r))
        lines.append(f"| {c.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def round_ratios(base: dict | None, other: dict | None) -> str:
    """``other``'s median over ``base``'s, and the per-round ratios' range: '1.03x (0.99-1.05)'."""
    ok = base and other and base.get("ok") and other.get("ok") and base.get("ms") and other.get("ms")
    if not ok:
        return "-"
    per = per_round_ratios(base, other)
    spread = f" ({min(per):.2f}-{max(per):.2f})" if len(per) > 1 else ""
    return f"{other['ms'] / base['ms']:.2f}x{spread}"


def per_round_ratios(base: dict | None, other: dict | None) -> list[float]:
    """``other``'s ms over ``base``'s, round by round, where both rounds have a time."""
    def ms(run):
        v = run.get("ms")
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None
    pairs = [(ms(a), ms(b)) for a, b in zip(_runs(base), _runs(other))]
    return [b / a for a, b in pairs if a and b]


def _runs(rec) -> list[dict]:
    if not rec:
        return []
    return rec.get("runs") or [{k: rec.get(k) for k in RUN_FIELDS}]


def _one_case(c, r, shift, sides, workers, data, paths, args):
    name, order = c.name, sides[shift:] + sides[:shift]
    cells = []
    for s in order:
        n = s["name"]
        if name in s["skip"]:
            continue
        old = _runs(data[n].get(name))
        if len(old) > r:            # measured before (--resume)
            cells.append(f"{n} {fmt_ms(old[r].get('ms'))}")
            continue
        if any(o.get("error") for o in old):    # failed in an earlier round: the record says so already
            cells.append(f"{n} error")
            continue
        t0 = time.monotonic()
        rec = _measure(workers[n], name, args.case_timeout)
        rec.setdefault("wall_s", round(time.monotonic() - t0, 2))
        run = {k: rec.get(k) for k in RUN_FIELDS}
        first = data[n].get(name) if old else {"size": c.size, "ref": c.ref, **rec}
        data[n][name] = aggregate(first, old + [run])
        if workers[n].meta:
            data[n]["_meta"] = {**workers[n].meta, "rounds": args.rounds, "side": n,
                                "sides": [x["name"] for x in sides], "order": "alternating case by case"}
        save_json(paths[n], data[n])
        cells.append(f"{n} " + (f"error: {run['error']}" if run["error"] else
                                fmt_ms(run["ms"]) + ("" if run["ok"] else " WRONG")))
    print(f"| r{r + 1} | {name:34s} | " + " | ".join(cells) + " |", flush=True)


def _prebuild(sides, cases, args, paths):
    """Every side's kernels built first (``--jobs`` processes a side, the sides at once), so the
    workers find them in their compilers' disk caches."""
    procs = []
    for s in sides:
        names = ",".join(c.name for c in cases if c.name not in s["skip"])
        if not names:
            continue
        cmd = f"{s['shell']} && exec python3 {shlex.quote(str(BENCH))} --compile-only --nvcc " \
              f"--jobs {args.jobs} --names {shlex.quote(names)}" + \
              (f" --examples {shlex.quote(args.examples)}" if args.examples else "")
        log = open(paths[s["name"]].with_suffix(".build.log"), "w")
        procs.append((s["name"], subprocess.Popen(["bash", "-c", cmd], stdout=log, stderr=subprocess.STDOUT), log))
    t0 = time.monotonic()
    for name, proc, log in procs:
        proc.wait()
        log.close()
        print(f"{name}: built (exit {proc.returncode}) after {time.monotonic() - t0:.0f}s", flush=True)
