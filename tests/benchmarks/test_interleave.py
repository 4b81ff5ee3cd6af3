"""bench_upstream.py --side (benchmarks/_interleave.py) on CPU, with fake workers that speak the
worker protocol (a meta line, then one record per requested case): the sides alternate case by
case and round by round from one long-lived process each, the JSON keeps every round and the
medians, a hung or dying worker costs only its case (and is replaced), --resume measures only the
rounds a file lacks, and bad --side arguments are clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_upstream.py"

FAKE = r'''
import json, os, sys, time
out = os.fdopen(int(sys.argv[sys.argv.index("--serve") + 1]), "w")
side = os.environ["FAKE_SIDE"]
out.write(json.dumps({"tilelang_version": side, "gpu": "fake"}) + "\n"); out.flush()
for line in sys.stdin:
    name = json.loads(line)["name"]
    with open(os.environ["FAKE_LOG"], "a") as f:
        f.write(f"{side} {name} {os.getpid()}\n")
    if name == os.environ.get("FAKE_HANG"):
        time.sleep(60)
    if name == os.environ.get("FAKE_DIE"):
        print("dying on purpose", flush=True)
        os._exit(3)
    ms = float(os.environ["FAKE_MS"]) * (1 + 0.1 * sum(1 for _ in open(os.environ["FAKE_LOG"])) % 3)
    out.write(json.dumps({"ms": ms, "ref_ms": 2.0, "ok": True, "maxdiff": 0.0, "error": None,
                          "tflops": 10.0 / ms, "size": "fake"}) + "\n"); out.flush()
    if name == os.environ.get("FAKE_QUIT_AFTER"):
        os._exit(0)
'''


def _bench():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import _upstream_cases
        return [c.name for c in _upstream_cases.CASES]
    finally:
        sys.path.remove(str(SCRIPT.parent))


NAMES = _bench()[:3]


def _sides(tmp_path, extra=""):
    fake = tmp_path / "fake_worker.py"
    fake.write_text(FAKE)
    log = tmp_path / "calls.log"
    common = f"export FAKE_LOG={log} {extra}"
    return fake, log, [f"ours={common}; export FAKE_SIDE=ours FAKE_MS=1.0",
                       f"up={common}; export FAKE_SIDE=up FAKE_MS=2.0"]


def _run(tmp_path, sides, *args, fake=None):
    cmd = [sys.executable, str(tmp_path / "driver.py")]
    (tmp_path / "driver.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(SCRIPT.parent)!r})\n"
        "import _interleave, pathlib\n"
        f"_interleave.BENCH = pathlib.Path({str(fake)!r})\n"
        "import bench_upstream\n"
        "sys.exit(bench_upstream.main(sys.argv[1:]))\n")
    side_args = [a for s in sides for a in ("--side", s)]
    return subprocess.run(cmd + side_args + ["--names", ",".join(NAMES), "--json", str(tmp_path / "t-{side}.json"),
                                             *args], capture_output=True, text=True, timeout=120)


def _calls(log):
    return [line.split() for line in log.read_text().splitlines()]


def test_sides_alternate_case_by_case_and_round_by_round_in_one_process_each(tmp_path):
    fake, log, sides = _sides(tmp_path)
    r = _run(tmp_path, sides, "--rounds", "2", fake=fake)
    assert r.returncode == 0, r.stderr + r.stdout
    calls = _calls(log)
    assert len(calls) == 2 * 3 * 2
    # case i of round k is measured first on side (i + k) % 2, the other right after it
    firsts = [calls[j][0] for j in range(0, len(calls), 2)]
    assert firsts == ["ours", "up", "ours", "up", "ours", "up"]
    assert [c[1] for c in calls[0::2]] == [c[1] for c in calls[1::2]] == NAMES * 2
    assert len({c[2] for c in calls if c[0] == "ours"}) == 1 and len({c[2] for c in calls if c[0] == "up"}) == 1
    ours = json.loads((tmp_path / "t-ours.json").read_text())
    rec = ours[NAMES[0]]
    assert len(rec["runs"]) == 2 and rec["ok"] and rec["size"] == "fake"
    times = sorted(run["ms"] for run in rec["runs"])
    assert rec["ms"] == (times[0] + times[1]) / 2                       # the median of the rounds
    assert abs(rec["tflops"] * rec["ms"] - 10.0) < 1e-9                  # rates follow the median
    assert ours["_meta"]["rounds"] == 2 and ours["_meta"]["sides"] == ["ours", "up"]
    assert f"| r2 | {NAMES[2]}" in r.stdout
    up = json.loads((tmp_path / "t-up.json").read_text())
    row = next(line for line in r.stdout.splitlines() if line.startswith(f"| {NAMES[0]} |"))
    per = [b["ms"] / a["ms"] for a, b in zip(rec["runs"], up[NAMES[0]]["runs"])]
    assert row.endswith(f"| {up[NAMES[0]]['ms'] / rec['ms']:.2f}x ({min(per):.2f}-{max(per):.2f}) |")
    # --compare of the two files: medians, and the per-round range in the notes
    cmp = subprocess.run([sys.executable, str(SCRIPT), "--compare", str(tmp_path / "t-ours.json"),
                          str(tmp_path / "t-up.json")], capture_output=True, text=True, timeout=60)
    assert f"rounds {min(per):.2f}-{max(per):.2f}x" in cmp.stdout and "median of 2 rounds" in cmp.stdout


def test_a_hung_or_dead_worker_costs_its_case_and_is_replaced(tmp_path):
    fake, log, sides = _sides(tmp_path, f"FAKE_HANG={NAMES[0]} FAKE_DIE={NAMES[1]}")
    sides[0] = sides[0].replace("FAKE_HANG", "NO_HANG").replace("FAKE_DIE", "NO_DIE")
    r = _run(tmp_path, sides, "--rounds", "2", "--case-timeout", "3", fake=fake)
    assert r.returncode == 0, r.stderr + r.stdout
    up = json.loads((tmp_path / "t-up.json").read_text())
    assert up[NAMES[0]]["error"].startswith("timed out") and not up[NAMES[0]]["ok"]
    assert up[NAMES[1]]["error"].startswith("worker exited 3: dying on purpose")
    assert up[NAMES[2]]["ok"] and not up[NAMES[2]]["error"]
    pids = [c[2] for c in _calls(log) if c[0] == "up"]
    # the hang was the worker's first case: not retried; the death came in a fresh worker's first
    # case too; the third case in a third process, and in the second round only the third case
    assert [c[1] for c in _calls(log) if c[0] == "up"] == NAMES + NAMES[2:]
    assert len(pids) == 4 and len(set(pids)) == 3 and pids[2] == pids[3]
    assert len(up[NAMES[2]]["runs"]) == 2 and len(up[NAMES[0]]["runs"]) == 1
    ours = json.loads((tmp_path / "t-ours.json").read_text())
    assert all(ours[n]["ok"] for n in NAMES)


def test_a_failure_after_other_cases_is_tried_again_in_a_fresh_worker(tmp_path):
    fake, log, sides = _sides(tmp_path, f"FAKE_DIE={NAMES[1]}")
    sides = sides[1:]
    r = _run(tmp_path, sides, "--rounds", "1", fake=fake)
    assert r.returncode == 0, r.stderr + r.stdout
    calls = _calls(log)
    assert [c[1] for c in calls] == [NAMES[0], NAMES[1], NAMES[1], NAMES[2]]
    assert calls[0][2] == calls[1][2] != calls[2][2] != calls[3][2]


def test_resume_measures_only_the_rounds_a_file_lacks(tmp_path):
    fake, log, sides = _sides(tmp_path)
    assert _run(tmp_path, sides, "--rounds", "1", fake=fake).returncode == 0
    log.write_text("")
    r = _run(tmp_path, sides, "--rounds", "2", "--resume", fake=fake)
    assert r.returncode == 0, r.stderr
    assert len(_calls(log)) == 6
    ours = json.loads((tmp_path / "t-ours.json").read_text())
    assert all(len(ours[n]["runs"]) == 2 for n in NAMES)
    log.write_text("")
    assert _run(tmp_path, sides, "--rounds", "2", "--resume", fake=fake).returncode == 0
    assert log.read_text() == ""


def test_side_skip_and_bad_side_arguments(tmp_path):
    fake, log, sides = _sides(tmp_path)
    r = _run(tmp_path, sides, "--rounds", "1", "--side-skip", f"up={NAMES[1]}", fake=fake)
    assert r.returncode == 0
    up = json.loads((tmp_path / "t-up.json").read_text())
    assert NAMES[1] not in up and NAMES[0] in up
    for bad, msg in ((["--side", "no-equals"], "write NAME=SHELL"),
                     (["--side", sides[0], "--side-skip", "zz=x"], "--side-skip"),
                     (["--side", sides[0], "--side", sides[0]], "given twice")):
        r = subprocess.run([sys.executable, str(SCRIPT), *bad, "--json", str(tmp_path / "x-{side}.json")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and msg in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = subprocess.run([sys.executable, str(SCRIPT), "--side", sides[0], "--json", str(tmp_path / "x.json")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "{side}" in r.stderr


def test_a_worker_gone_after_its_reply_is_replaced_and_the_next_case_measured(tmp_path):
    fake, log, sides = _sides(tmp_path, f"FAKE_QUIT_AFTER={NAMES[0]}")
    r = _run(tmp_path, sides[1:], "--rounds", "1", fake=fake)
    assert r.returncode == 0, r.stderr + r.stdout
    up = json.loads((tmp_path / "t-up.json").read_text())
    assert all(up[n]["ok"] and not up[n]["error"] for n in NAMES)
    calls = _calls(log)
    assert [c[1] for c in calls] == NAMES and calls[0][2] != calls[1][2] == calls[2][2]
