"""The conformance runner (scripts/conformance.py) on a small made-up upstream tree: what each tier
records per file and module, how a crash or a hang is pinned on the one module that caused it,
the expected state that only improves, and the pure helpers (baseline, exclusions, error lines)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
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
                      "--timeout", "15", "--exclusions", str(tree / "empty.toml"),
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
                      "--timeout", "15", "--exclusions", str(tree / "empty.toml"),
                      "--only", "foo/test_ok", "bar/", "examples/fam")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = json.loads((out / "conformance-gpu.json").read_text())["files"]
    ok = files["testing/python/foo/test_ok.py"]
    assert ok["counts"] == {"passed": 3, "failed": 1, "errors": 0, "skipped": 0, "note": ""}
    assert ok["reason"] == "test_b: AssertionError: boom"
    assert files["testing/python/bar/test_slow.py"]["reason"] == "timeout (15 s)"
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


# ---------------------------------------------------------------- example mains

MAINS_FILES = {
    "upstream/examples/fam/helper.py": "VALUE = 1\n\n\ndef util():\n    return VALUE\n",
    "upstream/examples/fam/example_ok.py": """
        import helper

        def main():
            assert helper.util() == 1
            print("latency: 1.00 ms")

        if __name__ == "__main__":
            main()
    """,
    "upstream/examples/fam/example_raise.py": """
        def main():
            raise ValueError("result mismatch at (0, 0)")

        if __name__ == "__main__":
            main()
    """,
    "upstream/examples/fam/example_exit.py": """
        import sys

        if __name__ == "__main__":
            print("giving up")
            sys.exit(3)
    """,
    "upstream/examples/fam/example_segv.py": """
        import os, signal

        if __name__ == "__main__":
            os.kill(os.getpid(), signal.SIGSEGV)
    """,
    "upstream/examples/fam/example_hang.py": """
        import pathlib, subprocess, sys, time

        if __name__ == "__main__":
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
            pathlib.Path(sys.argv[0]).resolve().with_suffix(".pid").write_text(str(child.pid))
            time.sleep(120)
    """,
    "upstream/examples/fam/example_top.py": """
        import os
        assert os.path.isdir(os.environ["TILELANG_CACHE_DIR"])
        print("top-level ran")
    """,
    "upstream/examples/fam/example_only_main.py": "def main():\n    print('called')\n",
    "upstream/examples/fam/example_covered.py": "def main():\n    pass\n\nif __name__ == '__main__':\n    main()\n",
    "upstream/examples/fam/example_from.py": "def main():\n    pass\n\nif __name__ == '__main__':\n    main()\n",
    "upstream/examples/fam/example_dyn.py": "def main():\n    pass\n\nif __name__ == '__main__':\n    main()\n",
    "upstream/examples/fam/test_fam.py": """
        import importlib
        import example_covered
        from example_from import main as run_from

        def test_all():
            example_covered.main()
            run_from()
            importlib.import_module("example_dyn").main()
    """,
    "upstream/examples/fam/pkg/__init__.py": "",
    "upstream/examples/fam/pkg/tool.py": "if __name__ == '__main__':\n    print('pkg tool')\n",
    "upstream/examples/which/example_which.py": """
        def main():
            import tilelang
            assert tilelang.__version__ == "up", f"got {tilelang.__version__}"

        if __name__ == "__main__":
            main()
    """,
    "upstream/examples/which/example_gain.py": """
        import tilelang
        assert tilelang.__version__ == "ours"
    """,
    "upstream/examples/skipme/example_x.py": "if __name__ == '__main__':\n    pass\n",
    "site-ours/tilelang/__init__.py": "__version__ = 'ours'\n",
    "site-up/tilelang/__init__.py": "__version__ = 'up'\n",
    "skip.toml": '[[exclude]]\ntest = "examples/skipme/"\nkind = "backend"\nreason = "not ours to run"\n',
}
MAINS_RUN = ["examples/fam/example_exit.py", "examples/fam/example_hang.py", "examples/fam/example_ok.py",
             "examples/fam/example_only_main.py", "examples/fam/example_raise.py", "examples/fam/example_segv.py",
             "examples/fam/example_top.py", "examples/fam/pkg/tool.py", "examples/which/example_gain.py",
             "examples/which/example_which.py"]


@pytest.fixture(scope="module")
def mains_tree(tmp_path_factory):
    base = tmp_path_factory.mktemp("mains")
    for rel, text in MAINS_FILES.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return base


def mains_args(base: Path, *extra: str) -> list[str]:
    return ["--upstream", str(base / "upstream"), "--exclusions", str(base / "skip.toml"), *extra]


@pytest.fixture(scope="module")
def mains_runs(mains_tree):
    base = mains_tree
    ours = run_runner("mains", *mains_args(base, "--out", str(base / "out-ours"), "--jobs", "4", "--timeout", "6",
                                           "--python-path", str(base / "site-ours")))
    assert ours.returncode == 0, ours.stdout + ours.stderr
    up = run_runner("mains", *mains_args(base, "--out", str(base / "out-up"), "--timeout", "6",
                                         "--python-path", str(base / "site-up"),
                                         "--only", "examples/which", "example_ok", "example_raise"))
    assert up.returncode == 0, up.stdout + up.stderr
    return (ours, json.loads((base / "out-ours" / "conformance-mains.json").read_text()),
            json.loads((base / "out-up" / "conformance-mains.json").read_text()))


def test_mains_discovery_leaves_out_covered_helper_and_excluded(mains_tree):
    proc = run_runner("mains", *mains_args(mains_tree, "--dry-run", "--all"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listed = sorted(line.split()[1] for line in proc.stdout.splitlines()
                    if line.split() and line.split()[0] in ("script", "top-level", "main()", "module"))
    assert listed == MAINS_RUN
    assert "covered by test_fam.py" in proc.stdout and "examples/fam/example_dyn.py" in proc.stdout
    assert "skip      examples/fam/helper.py  (no main)" in proc.stdout
    assert "examples/skipme/example_x.py  (excluded: not ours to run)" in proc.stdout
    assert "10 modules to run; left out: 3 covered by a test file, 1 without a main, 1 excluded" in proc.stdout


def test_mains_records_status_and_error_line(mains_runs, mains_tree):
    proc, ours, _ = mains_runs
    mods = ours["modules"]
    assert sorted(mods) == MAINS_RUN
    assert ours["tilelang"].startswith("ours ") and "site-ours" in ours["tilelang"]
    for ok in ("example_ok", "example_only_main", "example_top", "pkg/tool", "example_gain"):
        row = next(r for k, r in mods.items() if ok + ".py" in k)
        assert row["status"] == "ok" and row["rc"] == 0 and row["error"] == "", (ok, row)
    assert mods["examples/fam/example_only_main.py"]["entry"] == "main()"
    assert mods["examples/fam/example_top.py"]["entry"] == "top-level"
    assert mods["examples/fam/pkg/tool.py"]["entry"] == "module"
    raised = mods["examples/fam/example_raise.py"]
    assert raised["status"] == "fail" and raised["rc"] == 1
    assert raised["error"] == "ValueError: result mismatch at (0, 0)" and "Traceback" in raised["tail"]
    assert mods["examples/fam/example_exit.py"]["error"] == "exit 3: giving up"
    assert mods["examples/fam/example_segv.py"] == {**mods["examples/fam/example_segv.py"], "status": "crash",
                                                    "error": "crash: SIGSEGV"}
    hang = mods["examples/fam/example_hang.py"]
    assert hang["status"] == "timeout" and hang["error"] == "timeout (6 s)" and hang["seconds"] < 30
    # the whole process group is killed: the module's own child does not outlive the timeout
    pid = int((mains_tree / "upstream/examples/fam/example_hang.pid").read_text())
    status = Path(f"/proc/{pid}/status")
    assert not status.exists() or "zombie" in status.read_text()
    assert "| examples/fam/example_raise.py | fail |" in proc.stdout
    assert (mains_tree / "out-ours" / "conformance-mains.partial.json").is_file()


def test_report_mains_compares_ours_with_upstream(mains_runs, mains_tree):
    _, ours, up = mains_runs
    assert up["tilelang"].startswith("up ")
    assert up["modules"]["examples/which/example_which.py"]["status"] == "ok"
    out = mains_tree
    proc = run_runner("report-mains", str(out / "out-ours" / "conformance-mains.json"),
                      str(out / "out-up" / "conformance-mains.json"))
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a module regresses
    assert "1 of 2 modules upstream runs also run with ours." in proc.stdout
    rows = {r[0]: r for r in rep.mains_rows(ours, up)}
    assert rows["examples/which/example_which.py"][1:4] == ["fail", "ok", "REGRESS"]
    assert rows["examples/which/example_which.py"][5] == "AssertionError: got ours"
    assert rows["examples/which/example_gain.py"][1:4] == ["ok", "fail", "gain"]
    assert rows["examples/fam/example_ok.py"][3] == "ok"
    assert rows["examples/fam/example_raise.py"][3] == "both fail"
    assert rows["examples/fam/example_top.py"][1:4] == ["ok", "-", "no upstream"]
    assert "| examples/which/example_which.py | fail | ok | REGRESS |" in proc.stdout
    assert rep.mains_verdict(None, {"status": "ok"}) == "no ours"


def test_mains_static_helpers(tmp_path):
    import conformance

    covering = tmp_path / "test_x.py"
    covering.write_text("import a, pkg.b as pb\nfrom c import main\nfrom pkg import d\n"
                        "def test():\n    e.main()\n    runpy.run_path('f.py')\n")
    names = conformance.covered_names([covering])
    assert {"a", "pkg", "pkg.b", "c", "pkg.d", "e", "f"} <= names and "main" not in names
    helper = tmp_path / "h.py"
    helper.write_text("import tilelang\ntilelang.set_log_level('WARNING')\nX = 1\ndef f():\n    pass\n")
    assert conformance.main_entry(helper) is None
    helper.write_text("def f():\n    pass\n\nf()\n")
    assert conformance.main_entry(helper) == "top-level"
    assert conformance.error_line(-11, "", 5) == "crash: SIGSEGV"
    assert conformance.error_line(None, "", 300) == "timeout (300 s)"
    assert conformance.error_line(2, "usage: x\nx: error: bad flag\n", 5) == "exit 2: x: error: bad flag"
    assert "<!-- conformance:mains:begin -->" in (ROOT / "docs" / "conformance.md").read_text()


def test_mains_budget_and_resume(mains_tree):
    base = mains_tree
    only = ["--only", "examples/fam/example_hang", "examples/fam/example_ok", "examples/fam/example_top"]
    common = mains_args(base, "--jobs", "1", "--timeout", "3", "--python-path", str(base / "site-ours"), *only)
    cut = run_runner("mains", *common, "--out", str(base / "out-cut"), "--budget", "1")
    assert cut.returncode == 0, cut.stdout + cut.stderr
    first = json.loads((base / "out-cut" / "conformance-mains.json").read_text())
    # the biggest file (the hang) starts first and uses up the budget; the others wait for --resume
    assert list(first["modules"]) == ["examples/fam/example_hang.py"]
    assert first["not_run"] == ["examples/fam/example_ok.py", "examples/fam/example_top.py"]
    rest = run_runner("mains", *common, "--out", str(base / "out-rest"),
                      "--resume", str(base / "out-cut" / "conformance-mains.partial.json"))
    assert rest.returncode == 0, rest.stdout + rest.stderr
    assert "1 modules kept from" in rest.stdout and "warning" not in rest.stdout
    final = json.loads((base / "out-rest" / "conformance-mains.json").read_text())
    assert {k: v["status"] for k, v in final["modules"].items()} == {
        "examples/fam/example_hang.py": "timeout", "examples/fam/example_ok.py": "ok",
        "examples/fam/example_top.py": "ok"}
    assert final["not_run"] == []


def test_mains_sigterm_kills_the_running_modules(mains_tree):
    base = mains_tree
    pid_file = base / "upstream/examples/fam/example_hang.pid"
    pid_file.unlink(missing_ok=True)
    runner = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "conformance.py"), "mains",
                               *mains_args(base, "--jobs", "1", "--timeout", "60", "--out", str(base / "out-term"),
                                           "--python-path", str(base / "site-ours"),
                                           "--only", "example_hang", "example_ok")],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 60
        while not pid_file.exists() and time.time() < deadline:
            time.sleep(0.2)
        assert pid_file.exists(), "the hanging module never started"
        time.sleep(0.5)
        runner.send_signal(signal.SIGTERM)
        output = runner.communicate(timeout=30)[0]
    finally:
        runner.kill()
    assert runner.returncode == 128 + signal.SIGTERM, output
    assert "stopped  examples/fam/example_hang.py" in output
    assert "example_ok" not in output.split("stopped", 1)[1]  # nothing starts after the signal
    time.sleep(0.5)
    status = Path(f"/proc/{int(pid_file.read_text())}/status")
    assert not status.exists() or "zombie" in status.read_text()
