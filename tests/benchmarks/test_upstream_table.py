"""benchmarks/upstream_table.sh on CPU, with ``python3`` replaced by a stub whose bench_upstream.py
workers (``--serve``) log each case they are asked for and answer placeholder results (the driver,
bench_upstream.py --side, is the real one). ``paired``: ours and upstream's alternate case by case
(neither side always first) in rounds, the cases of SKIP are left to ours, a second run resumes
(measures nothing again) and the two JSON files make one --compare table. ``ab``: upstream's wheel
and pass-config objects as sides."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "upstream_table.sh"

STUB = r"""#!/bin/bash
if [[ "$*" == *--serve* ]]; then exec "$REAL_PYTHON" "$FAKE_WORKER" "$@"; fi
if [[ "$*" == *--compile-only* ]]; then exit 0; fi
exec "$REAL_PYTHON" "$@"
"""

# a measuring worker of bench_upstream --side: its meta line, then a record per requested case; each
# request logged with the worker's PYTHONPATH and pass configs
FAKE_WORKER = r"""
import json, os, sys
out = os.fdopen(int(sys.argv[sys.argv.index("--serve") + 1]), "w")
out.write(json.dumps({"tilelang_version": "stub"}) + "\n"); out.flush()
for line in sys.stdin:
    name = json.loads(line)["name"]
    with open(os.environ["STUB_LOG"], "a") as log:
        log.write(f"{os.environ.get('PYTHONPATH', '')} {name} {os.environ.get('TILELANG_PASS_CONFIGS', '-')}\n")
    out.write(json.dumps({"ms": 1.0, "ok": True, "ref_ms": 2.0, "error": None, "maxdiff": 0.0}) + "\n"); out.flush()
"""


def _sandbox(tmp_path):
    """HOME with ~/tl-env.sh (PYTHONPATH=OURS) and ~/tables, the stub first on PATH; returns
    (env, HOME, OUT, the stub's call log)."""
    home, bin_, out = tmp_path / "home", tmp_path / "bin", tmp_path / "out"
    (home / "tables").mkdir(parents=True)
    bin_.mkdir()
    (home / "tl-env.sh").write_text("export PYTHONPATH=OURS\n")
    stub = bin_ / "python3"
    stub.write_text(STUB)
    stub.chmod(0o755)
    worker = tmp_path / "fake_worker.py"
    worker.write_text(FAKE_WORKER)
    log = tmp_path / "calls.log"
    env = dict(os.environ, HOME=str(home), PATH=f"{bin_}:{os.environ['PATH']}", OUT=str(out),
               STUB_LOG=str(log), REAL_PYTHON=sys.executable, FAKE_WORKER=str(worker))
    env.pop("TILELANG_PASS_CONFIGS", None)
    return env, home, out, log


def _calls(log):
    return [line.split(" ", 2) for line in log.read_text().splitlines()]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_paired_alternates_the_compilers_case_by_case_in_rounds(tmp_path):
    env, home, out, log = _sandbox(tmp_path)
    env["ROUNDS"] = "2"

    def run():
        return subprocess.run(["bash", str(SCRIPT), "paired"], capture_output=True, text=True, env=env,
                              cwd=str(ROOT), timeout=300)

    r = run()
    assert r.returncode == 0, r.stderr
    calls = _calls(log)
    assert all(pp in ("OURS", f"{home}/up-site") for pp, _, _ in calls)
    sides = ["ours" if pp == "OURS" else "upstream" for pp, _, _ in calls]
    # case 0: ours then upstream's; case 1: upstream's then ours; each pair the same case
    assert sides[:4] == ["ours", "upstream", "upstream", "ours"]
    assert calls[0][1] == calls[1][1] and calls[2][1] == calls[3][1] != calls[0][1]
    ours = json.loads((out / "paired-ours.json").read_text())
    upstream = json.loads((out / "paired-upstream.json").read_text())
    assert "dsv32_sparse_mla_fwd_pipelined" in ours and "dsv32_sparse_mla_fwd_pipelined" not in upstream
    assert set(ours) - set(upstream) == {"dsv32_sparse_mla_fwd_pipelined"}
    assert all(len(rec["runs"]) == 2 for n, rec in ours.items() if not n.startswith("_"))
    assert "geometric mean" in r.stdout
    # run again: every round of every case is in both files already, so nothing is measured
    log.write_text("")
    assert run().returncode == 0
    assert log.read_text() == ""


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_ab_takes_upstreams_wheel_and_pass_configs_as_sides(tmp_path):
    """``ab =CASES @upstream ROUNDS``: ours (the off side) and upstream's wheel (~/up-site, nothing
    of ours on the path) alternate case by case, the first side rotating from case to case and
    round to round; a pass-config object reaches its side's workers intact."""
    env, home, out, log = _sandbox(tmp_path)
    r = subprocess.run(["bash", str(SCRIPT), "ab", "=rms_norm,topk_router", "@upstream", "2"], capture_output=True,
                       text=True, env=env, cwd=str(ROOT), timeout=300)
    assert r.returncode == 0, r.stderr
    calls = _calls(log)
    up = f"{home}/up-site"
    assert [(pp, n) for pp, n, _ in calls] == [("OURS", "rms_norm"), (up, "rms_norm"), (up, "topk_router"),
                                               ("OURS", "topk_router"), (up, "rms_norm"), ("OURS", "rms_norm"),
                                               ("OURS", "topk_router"), (up, "topk_router")]
    assert sorted(p.name for p in out.glob("ab-*.json")) == ["ab-off.json", "ab-upstream.json"]
    assert "| rms_norm | 1.0000 | 1.0000 | 1.00x (1.00-1.00) |" in r.stdout
    log.write_text("")
    r = subprocess.run(["bash", str(SCRIPT), "ab", "=rms_norm", '{"tl.some_key": true, "tl.x": "a b"}', "1"],
                       capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=300)
    assert r.returncode == 0, r.stderr
    assert sorted(c[2] for c in _calls(log)) == ['-', '{"tl.some_key": true, "tl.x": "a b"}']


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_ab_all_runs_the_whole_table_on_each_side(tmp_path):
    """``ab all '{}' 1``: ours against ours (an A/A of the method), every case on both sides."""
    env, home, out, log = _sandbox(tmp_path)
    r = subprocess.run(["bash", str(SCRIPT), "ab", "all", "{}", "1"], capture_output=True, text=True, env=env,
                       cwd=str(ROOT), timeout=300)
    assert r.returncode == 0, r.stderr
    calls = _calls(log)
    names = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_upstream.py"), "--list"],
                           capture_output=True, text=True, timeout=60).stdout
    count = int(names.rstrip().splitlines()[-1].split()[0])
    assert len(calls) == 2 * count
    assert sorted({c[2] for c in calls}) == ["-", "{}"]
    assert sorted(p.name for p in out.glob("ab-*.json")) == ["ab-off.json", "ab-on.json"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_paired_aa_adds_a_second_process_of_ours(tmp_path):
    """``AA=1 paired``: ours, ours2 (the same tree in another process) and upstream's, in turn."""
    env, home, out, log = _sandbox(tmp_path)
    env.update(ROUNDS="1", AA="1")
    r = subprocess.run(["bash", str(SCRIPT), "paired"], capture_output=True, text=True, env=env, cwd=str(ROOT),
                       timeout=300)
    assert r.returncode == 0, r.stderr
    calls = _calls(log)
    assert [pp for pp, _, _ in calls[:3]] == ["OURS", "OURS", f"{home}/up-site"]
    assert calls[0][1] == calls[1][1] == calls[2][1]
    assert json.loads((out / "paired-ours2.json").read_text()).keys() == json.loads(
        (out / "paired-ours.json").read_text()).keys()
