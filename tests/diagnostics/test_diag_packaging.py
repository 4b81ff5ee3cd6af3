"""The install and CI entry points this package's owner maintains: pyproject, bootstrap, .ci/run, hooks."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_declares_the_distribution():
    tomllib = pytest.importorskip("tomllib")
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = data["project"]
    assert project["name"] == "tilelang" and project["requires-python"] == ">=3.10"
    assert "apache-tvm==0.27.0.post1" in project["dependencies"]
    # torch must never be a hard dependency: an open range pulls a multi-GB CUDA build.
    assert not any(dep.startswith("torch") for dep in project["dependencies"])
    assert project["optional-dependencies"]["torch"] == ["torch==2.13.0"]
    assert project["scripts"] == {
        "tilelang-check": "tilelang_lsp.cli:main",
        "tilelang-lsp": "tilelang_lsp.server:main",
    }
    pytest_options = data["tool"]["pytest"]["ini_options"]
    assert {m.split(":")[0] for m in pytest_options["markers"]} == {"requires_cuda", "gpu"}


def test_ci_and_bootstrap_are_executable_and_reject_bad_usage():
    assert os.access(ROOT / ".ci" / "run", os.X_OK)
    assert os.access(ROOT / "scripts" / "bootstrap.sh", os.X_OK)
    bootstrap = str(ROOT / "scripts" / "bootstrap.sh")
    result = subprocess.run(["bash", bootstrap, "nonsense"], capture_output=True, text=True)
    assert result.returncode == 4 and "usage" in result.stderr


def test_pre_commit_hook_runs_tilelang_check_on_python_files():
    text = (ROOT / ".pre-commit-hooks.yaml").read_text()
    for line in ("- id: tilelang-check", "entry: tilelang-check", "language: python", "types: [python]"):
        assert line in text
