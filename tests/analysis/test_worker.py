"""The worker boundary: time limits, crashes, and keeping user code out of the checker's process."""

from __future__ import annotations

import os

from fixture_check import FIXTURES, check_fixture


def test_timeout_and_crash_are_reported_and_the_worker_recovers(worker):
    from tilelang_lsp.worker import Session

    session = Session(target="sm_90a", timeout=3.0, worker=worker)
    diagnostics = check_fixture(FIXTURES / "build_timeout.py", lambda target: session)
    # `fine` was built after both failures: the session recovered with a fresh worker.
    assert all(d.binding is None or "fine" not in d.binding for d in diagnostics)


def test_user_code_never_runs_in_the_checker_process(session_for, tmp_path):
    marker = tmp_path / "ran.txt"
    source = (
        "import os\n"
        "import tilelang\n"
        f"MARK = {str(marker)!r}\n"
        "@tilelang.jit\n"
        "def factory(N=1):\n"
        "    open(MARK, 'w').write(str(os.getpid()))\n"
        "    return None\n"
    )
    path = tmp_path / "marker.py"
    path.write_text(source)
    session_for().check_file(str(path))
    assert marker.exists(), "the factory should have run in the worker"
    assert int(marker.read_text()) != os.getpid()


def test_unsaved_text_is_checked_not_the_file_on_disk(session_for, tmp_path):
    path = tmp_path / "buffer.py"
    path.write_text("x = 1\n")
    text = (FIXTURES / "tma_alignment.py").read_text()
    report = session_for().check_file(str(path), text)
    assert [d.code for d in report.diagnostics] == ["TL0301"]
    assert report.diagnostics[0].span.file == str(path)


def test_the_public_handlers_load_build_and_check_in_process(tmp_path):
    """``load_module``/``build_kernel``: what the language server's worker runs in its own process."""
    from tvm import tirx

    from tilelang_lsp import worker

    path = str(tmp_path / "tma.py")
    text = (FIXTURES / "tma_alignment.py").read_text() + "\n\ndef broken(n):\n    raise ValueError('no')\n"
    modules = {}
    loaded = worker.load_module({"op": "load", "path": path, "text": text}, modules)
    assert loaded["ok"] and loaded["diagnostics"] == [] and modules[path].__name__ == loaded["module"]
    message = {"op": "build", "path": path, "factory": "matmul", "args": ["M", "N", "K"], "kwargs": [],
               "binding": "matmul(M=1024, N=1024, K=1001)", "target": "sm_90a", "prim_func": False,
               "out_idx_span": None}
    reply, func = worker.build_kernel(modules[path], message)
    assert isinstance(func, tirx.PrimFunc) and reply["built"]
    assert [d["code"] for d in reply["diagnostics"]] == ["TL0301"]
    assert reply["diagnostics"][0]["binding"] == message["binding"]
    reply, func = worker.build_kernel(modules[path], {**message, "factory": "broken", "args": ["1"]})
    assert func is None and not reply["built"]
    assert [d["code"] for d in reply["diagnostics"]] == ["TL0802"]
    assert reply["diagnostics"][0]["span"]["line"] == text.splitlines().index("    raise ValueError('no')") + 1
