"""One checker worker for the whole test session: tvm is imported once, in one child process."""

from __future__ import annotations

import pytest

from tilelang_lsp.session import Session
from tilelang_lsp.worker_client import WorkerClient


@pytest.fixture(scope="session")
def worker():
    w = WorkerClient("tilelang-check-worker")
    w.start()
    yield w
    w.stop()


@pytest.fixture(scope="session")
def session_for(worker):
    sessions = {}

    def get(target="sm_90a", timeout=30.0):
        key = (target, timeout)
        if key not in sessions:
            sessions[key] = Session(target=target, timeout=timeout, worker=worker)
        return sessions[key]

    return get
