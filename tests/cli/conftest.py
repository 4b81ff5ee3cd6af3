"""The CLI tests share one started checker worker and run from the repository root."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilelang_lsp.worker_client import WorkerClient

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def worker():
    w = WorkerClient("tilelang-check-worker")
    w.start()
    yield w
    w.stop()


@pytest.fixture
def run(worker, monkeypatch, capsys):
    """``run(*argv)`` -> (exit status, stdout, stderr) of ``tilelang-check`` run in-process."""
    from tilelang_lsp.cli import main

    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)

    def invoke(*argv, env=None):
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        status = main(list(argv), worker=worker)
        out, err = capsys.readouterr()
        return status, out, err

    return invoke
