"""benchmarks/bench_compile.py on CPU: the table from two rounds (best round per side, errors
shown, the warm-up kernel left out), and a whole run with our package on both sides over one case
(each side a child process with an empty cache, nvcc included)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_compile.py"


sys.path.insert(0, str(SCRIPT.parent))      # (bench_compile imports its siblings lazily)
import bench_compile as bench  # noqa: E402


def test_the_table_keeps_each_sides_best_round_and_shows_errors():
    rounds = [{"ours": {"a": 1.0, "b": 2.0, "c": "ImportError: no triton"}, "upstream": {"a": 3.0, "b": 1.0}},
              {"ours": {"a": 1.5, "b": 1.0, "c": "ImportError: no triton"}, "upstream": {"a": 2.0, "b": 1.5}}]
    lines, ratios = bench.table([bench.WARM_UP, "a", "b", "c"], rounds)
    assert lines[2:] == ["| a | 1.00 | 2.00 | 2.00x |", "| b | 1.00 | 1.00 | 1.00x |",
                         "| c | ImportError: no triton | not run | - |"]
    assert ratios == [2.0, 1.0]


def test_a_run_with_our_package_on_both_sides():
    from bench_upstream import examples_dir

    try:
        examples_dir(None)
    except SystemExit:
        pytest.skip("upstream's examples/ folder is not beside this checkout")
    out = subprocess.run([sys.executable, str(SCRIPT), "--upstream-path", str(ROOT), "--only", "gdn_cumsum",
                          "--rounds", "1"], capture_output=True, text=True, timeout=600, cwd=str(ROOT))
    assert out.returncode == 0, out.stderr[-2000:]
    row = next(line for line in out.stdout.splitlines() if line.startswith("| gdn_cumsum |"))
    ours, theirs = (float(c) for c in row.split("|")[2:4])
    assert 0 < ours < 120 and 0 < theirs < 120
    assert "1 cases: upstream / ours geometric mean" in out.stdout
    assert out.stdout.count(str(ROOT / "tilelang" / "__init__.py")) == 2    # both sides were ours
