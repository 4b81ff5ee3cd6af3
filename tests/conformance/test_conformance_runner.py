"""The conformance runner (scripts/conformance.py) on a small made-up upstream tree: what each tier
records per file and module, how a crash or a hang is pinned on the one module that caused it,
the expected state that only improves, and the pure helpers (baseline, exclusions, error lines)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "conformance"))

import conformance_report as rep  # noqa: E402
import tl_conformance_plugin as plugin  # noqa: E402

FILES = {
    "testing/python/foo/test_ok.py": """
        import pytest

        def test_a():
            pass

        def test_b():
            assert 1 == 2, "boom"

        @pytest.mark.parametrize("x", [1, 2])
        def test_p(x):
            pass
    """,
    "testing/python/foo/test_env.py": "import not_a_real_package_xyz\n",
    "testing/python/foo/test_ours.py": "raise AttributeError(\"module 'tilelang.language' has no attribute 'nope'\")\n",
    "testing/python/bar/test_slow.py": "import time\n\ndef test_slow():\n    time.sleep(60)\n",
    "examples/fam/example_a.py": "VALUE = 1\n",
    "examples/fam/example_b.py": "raise ImportError(\"cannot import name 'X' from 'tilelang'\")\n",
    "examples/fam/example_crash.py": "import os\nos._exit(3)\n",
    "examples/fam/example_zz.py": "VALUE = 2\n",
    "examples/fam/test_example_fam.py": "import example_a\n\ndef test_fam():\n    assert example_a.VALUE == 1\n",
    "examples/fam/pkg/__init__.py": "from .mod import X\n",
    "examples/fam/pkg/mod.py": "X = 1\n",
    "examples/hang/example_hang.py": "import time\ntime.sleep(60)\n",
    "examples/hang/example_after.py": "OK = 1\n",
}
BASELINE = """
| file | passed | failed | errors | skipped | note |
|---|---|---|---|---|---|
| examples/fam | 1 | 0 | 0 | 0 |  |
| testing/python/foo/test_ok.py | 4 | 0 | 0 | 0 |  |
| testing/python/bar/test_slow.py | 1 | 0 | 0 | 0 |  |
"""


def run_runner(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "conformance.py"), *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    base = tmp_path_factory.mktemp("conf")
    upstream = base / "upstream"
    for rel, text in FILES.items():
        path = upstream / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (base / "BASELINE.md").write_text(BASELINE)
    (base / "empty.toml").write_text("")
    return base


@pytest.fixture(scope="module")
def cpu_run(tree):
    out = tree / "out-cpu"
    proc = run_runner("cpu", "--upstream", str(tree / "upstream"), "--out", str(out), "--jobs", "2",
                      "--timeout", "4", "--exclusions", str(tree / "empty.toml"),
                      "--expected", str(tree / "none.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, json.loads((out / "conformance-cpu.json").read_text())


def test_cpu_tier_records_each_file(cpu_run):
    _, results = cpu_run
    files = results["files"]
    assert files["testing/python/foo/test_ok.py"]["status"] == "collected"
    assert files["testing/python/foo/test_ok.py"]["items"] == 4
    assert files["testing/python/foo/test_env.py"]["kind"] == "env"
    ours = files["testing/python/foo/test_ours.py"]
    assert ours["status"] == "error" and ours["kind"] == "ours"
    assert ours["error"] == "AttributeError: module 'tilelang.language' has no attribute 'nope'"
    assert files["examples/fam/test_example_fam.py"]["items"] == 1


def test_cpu_tier_pins_crash_and_hang_on_their_module(cpu_run):
    _, results = cpu_run
    modules = results["modules"]
    assert modules["examples/fam/example_a.py"]["status"] == "imported"
    assert modules["examples/fam/example_b.py"]["error"].startswith("ImportError: cannot import name 'X'")
    assert modules["examples/fam/example_crash.py"]["status"] == "crash"
    assert modules["examples/fam/example_crash.py"]["error"].startswith("crash: exit 3")
    # The modules after the crash and the hang still get their own result.
    assert modules["examples/fam/example_zz.py"]["status"] == "imported"
    assert modules["examples/fam/pkg/mod.py"]["status"] == "imported"
    assert modules["examples/hang/example_hang.py"]["status"] == "timeout"
    assert modules["examples/hang/example_after.py"]["status"] == "imported"


def test_cpu_tier_prints_tables_and_grouped_errors(cpu_run):
    proc, _ = cpu_run
    assert "CPU tier: 3/5 test files collect" in proc.stdout
    assert "| testing/python/foo | 1/3 | 4/4 | - |" in proc.stdout
    assert "First errors, grouped" in proc.stdout
    assert "[env] ModuleNotFoundError: No module named 'not_a_real_package_xyz'" in proc.stdout


def test_expected_state_only_improves(tree, cpu_run):
    results_file = str(tree / "out-cpu" / "conformance-cpu.json")
    expected = tree / "expected.json"
    common = ["report", results_file, "--upstream", str(tree / "upstream"), "--expected", str(expected),
              "--exclusions", str(tree / "empty.toml")]
    assert run_runner(*common, "--update-expected").returncode == 0
    recorded = json.loads(expected.read_text())
    assert "testing/python/foo/test_ok.py" in recorded["collected"]
    assert "examples/fam/example_zz.py" in recorded["imported"]

    # Pretend test_ours.py collected before, and test_env.py (an environment gap is no regression).
    recorded["collected"]["testing/python/foo/test_ours.py"] = 1
    recorded["collected"]["testing/python/foo/test_env.py"] = 1
    expected.write_text(json.dumps(recorded))
    proc = run_runner(*common)
    assert proc.returncode == 1
    assert "REGRESSION  testing/python/foo/test_ours.py" in proc.stdout
    assert "REGRESSION  testing/python/foo/test_env.py" not in proc.stdout
    refused = run_runner(*common, "--update-expected")
    assert refused.returncode == 1 and "refusing" in refused.stdout
    assert "testing/python/foo/test_ours.py" in json.loads(expected.read_text())["collected"]
    assert run_runner(*common, "--update-expected", "--allow-regression").returncode == 0
    assert "testing/python/foo/test_ours.py" not in json.loads(expected.read_text())["collected"]


def test_gpu_tier_counts_and_explains_regressions(tree):
    out = tree / "out-gpu"
    proc = run_runner("gpu", "--upstream", str(tree / "upstream"), "--out", str(out), "--jobs", "3",
                      "--timeout", "4", "--exclusions", str(tree / "empty.toml"),
                      "--only", "foo/test_ok", "bar/", "examples/fam")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = json.loads((out / "conformance-gpu.json").read_text())["files"]
    ok = files["testing/python/foo/test_ok.py"]
    assert ok["counts"] == {"passed": 3, "failed": 1, "errors": 0, "skipped": 0, "note": ""}
    assert ok["reason"] == "test_b: AssertionError: boom"
    assert files["testing/python/bar/test_slow.py"]["reason"] == "timeout (4 s)"
    assert files["examples/fam"]["counts"]["passed"] == 1
    assert "| testing/python/foo/test_ok.py | 3/1/0/0 | 4/0/0/0 | REGRESS | test_b: AssertionError: boom |" \
        in proc.stdout
    # Excluding the failing test turns the verdict around.
    excl = rep.Exclusions([rep.Exclusion("testing/python/foo/test_ok.py::test_b", "asserts on IR", "internal-ir")])
    base = rep.parse_baseline(tree / "BASELINE.md")
    assert rep.gpu_verdict("testing/python/foo/test_ok.py", ok, base, excl)[0] == "ok"


def test_baseline_and_exclusion_share(tree):
    base = rep.parse_baseline(tree / "BASELINE.md")
    assert base["testing/python/foo/test_ok.py"].passed == 4 and base["examples/fam"].passed == 1
    excl = rep.Exclusions([rep.Exclusion("testing/python/foo/test_ok.py::test_p", "r", "internal-ir"),
                           rep.Exclusion("testing/python/bar/test_slow.py", "r", "backend")])
    nodeids = {"testing/python/foo/test_ok.py": [f"testing/python/foo/test_ok.py::{n}"
                                                 for n in ("test_a", "test_b", "test_p[1]", "test_p[2]")]}
    assert excl.share(base, nodeids) == (3, 6, 0)
    assert excl.share(base, {}) == (2, 6, 1)  # unknown items: one per pattern, flagged as a guess
    assert excl.whole_file("testing/python/bar/test_slow.py").kind == "backend"
    folder = rep.Exclusion("examples/amd/", "r", "backend")
    assert folder.matches("examples/amd/x.py") and not folder.matches("examples/amd_like/x.py")


def test_first_error_line_and_classification():
    text = "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: a\n\n" \
           "During handling of the above exception, another exception occurred:\n\n" \
           "Traceback (most recent call last):\n  File \"y.py\", line 2\ntvm.error.InternalError: b\n"
    assert plugin.first_error_line(text) == "tvm.error.InternalError: b"
    assert plugin.first_error_line("stuff\nE   ModuleNotFoundError: No module named 'x'\n") == \
        "ModuleNotFoundError: No module named 'x'"
    assert rep.classify("ModuleNotFoundError: No module named 'einops'", set()) == "env"
    assert rep.classify("ModuleNotFoundError: No module named 'tilelang.carver'", set()) == "ours"
    assert rep.classify("ModuleNotFoundError: No module named 'example_gemm'", {"example_gemm"}) == "ours"
    assert rep.classify("AssertionError: Torch not compiled with CUDA enabled", set()) == "gpu"
