"""benchmarks/upstream_table.sh on CPU, with ``python3`` replaced by a stub that records each
bench_upstream.py call and writes placeholder results. ``paired``: ours and upstream's alternate
chunk by chunk (neither side always first), the cases of SKIP are left to ours, a second run
resumes (measures nothing again) and the two JSON files make one --compare table. ``ab`` with an
``@upstream`` side: ours and upstream's wheel alternate round by round."""

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
if [[ "$*" == *bench_upstream.py* && "$*" != *--compare* ]]; then
  names=""; json=""
  while [ $# -gt 0 ]; do case $1 in --names) names=$2; shift;; --json) json=$2; shift;; esac; shift; done
  exec "$REAL_PYTHON" - "$json" "$names" "$PYTHONPATH" <<'PY'
import json, os, pathlib, sys
p = pathlib.Path(sys.argv[1]); d = json.loads(p.read_text()) if p.is_file() else {}
todo = [n for n in sys.argv[2].split(",") if n not in d]      # bench_upstream's --resume
if todo:
    with open(os.environ["STUB_LOG"], "a") as log:
        log.write(f"{sys.argv[3]} {','.join(todo)}\n")
for n in todo:
    d[n] = {"ms": 1.0, "ok": True, "ref_ms": 2.0, "error": None, "maxdiff": 0.0}
p.write_text(json.dumps(d))
PY
fi
exec "$REAL_PYTHON" "$@"
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
    log = tmp_path / "calls.log"
    env = dict(os.environ, HOME=str(home), PATH=f"{bin_}:{os.environ['PATH']}", OUT=str(out),
               STUB_LOG=str(log), REAL_PYTHON=sys.executable, CHUNK="6")
    return env, home, out, log


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_paired_alternates_the_compilers_chunk_by_chunk(tmp_path):
    env, home, out, log = _sandbox(tmp_path)

    def run():
        return subprocess.run(["bash", str(SCRIPT), "paired"], capture_output=True, text=True, env=env,
                              cwd=str(ROOT), timeout=300)

    r = run()
    assert r.returncode == 0, r.stderr
    calls = [line.split(" ", 1) for line in log.read_text().splitlines()]
    sides = ["ours" if pp == "OURS" else "upstream" for pp, _ in calls]
    assert all(pp in ("OURS", f"{home}/up-site") for pp, _ in calls)
    # chunk 0: ours then upstream's; chunk 1: upstream's then ours; each chunk the same six names
    assert sides[:4] == ["ours", "upstream", "upstream", "ours"]
    assert calls[0][1] == calls[1][1] and calls[2][1] == calls[3][1] and len(calls[0][1].split(",")) == 6
    ours = json.loads((out / "paired-ours.json").read_text())
    upstream = json.loads((out / "paired-upstream.json").read_text())
    assert "dsv32_sparse_mla_fwd_pipelined" in ours and "dsv32_sparse_mla_fwd_pipelined" not in upstream
    assert set(ours) - set(upstream) == {"dsv32_sparse_mla_fwd_pipelined"}
    assert "geometric mean" in r.stdout
    # run again: every case is in both files already, so nothing is measured
    log.write_text("")
    assert run().returncode == 0
    assert log.read_text() == ""


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_ab_takes_upstreams_wheel_as_a_side(tmp_path):
    """``ab =CASES @upstream ROUNDS``: ours (the off side) and upstream's wheel (~/up-site, nothing
    of ours on the path) alternate round by round on the same cases, the second round in reverse
    order (neither side always runs first)."""
    env, home, out, log = _sandbox(tmp_path)
    r = subprocess.run(["bash", str(SCRIPT), "ab", "=rms_norm,topk_router", "@upstream", "2"], capture_output=True,
                       text=True, env=env, cwd=str(ROOT), timeout=300)
    assert r.returncode == 0, r.stderr
    calls = [line.split(" ", 1) for line in log.read_text().splitlines()]
    assert [pp for pp, _ in calls] == ["OURS", f"{home}/up-site", f"{home}/up-site", "OURS"]
    assert all(names == "rms_norm,topk_router" for _, names in calls)
    assert sorted(p.name for p in out.glob("ab-*.json")) == ["ab-off-1.json", "ab-off-2.json", "ab-on-1.json",
                                                             "ab-on-2.json"]
