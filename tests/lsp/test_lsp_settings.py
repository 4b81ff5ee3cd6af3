"""Server settings: pull diagnostics for clients that support them, and ``allowExecution=false``."""

from __future__ import annotations

import pytest

from lsp_testing import FIXTURES, Doc, start_server
from tilelang_lsp.editor_client import default_capabilities

pytestmark = pytest.mark.timeout(180)


def test_pull_diagnostics_when_the_client_supports_them(tmp_path):
    client = start_server(tmp_path, capabilities=default_capabilities(pull=True), name="pull")
    try:
        doc = Doc(client, tmp_path / "no_clear.py", (FIXTURES / "no_clear.py").read_text())
        params = {"textDocument": {"uri": doc.uri}}
        report = client.request("textDocument/diagnostic", params, timeout=90)
        assert report["kind"] == "full"
        assert [d["code"] for d in report["items"]] == ["TL0401"]
        again = client.request("textDocument/diagnostic", {**params, "previousResultId": report["resultId"]})
        assert again == {"kind": "unchanged", "resultId": report["resultId"]}
        doc.replace(doc.text.replace("            for k in", "            T.clear(C_local)\n            for k in"))
        fixed = client.request("textDocument/diagnostic", {**params, "previousResultId": report["resultId"]}, 90)
        assert fixed["kind"] == "full" and fixed["items"] == []
        pushed = [n for n in client.notifications if n.get("method") == "textDocument/publishDiagnostics"]
        assert pushed == [], "a pull client must not also get pushed diagnostics"
    finally:
        assert client.shutdown() == 0


def test_allow_execution_false_runs_no_user_code(tmp_path):
    client = start_server(tmp_path, options={"allowExecution": False}, name="noexec")
    try:
        path = tmp_path / "side_effect.py"
        marker = tmp_path / "side_effect.marker"
        doc = Doc(client, path, (FIXTURES / "side_effect.py").read_text())
        found = doc.diagnostics()
        # The value-free checks still run: the missing T.clear is found from the source alone.
        assert [d["code"] for d in found] == ["TL0401"]
        assert not marker.exists(), "the factory was executed although allowExecution is false"
        hover = doc.at("textDocument/hover", "C_local = ", 2)
        assert "allowExecution is off" in hover["contents"]["value"]
        lens = client.request("workspace/executeCommand", {"command": "tilelang.compile",
                                                           "arguments": [doc.uri, "matmul_marked"]})
        assert not lens["ok"] and "allowExecution is false" in lens["report"]
        assert not marker.exists()
        # Turning execution on re-checks the open documents with the kernels built.
        client.notify("workspace/didChangeConfiguration", {"settings": {"tilelang": {"allowExecution": True}}})
        client.wait_for(lambda c: marker.exists(), 90, "the kernel build after allowing execution")
    finally:
        assert client.shutdown() == 0


def test_tcp_transport(tmp_path):
    import json
    import os
    import socket
    import subprocess
    import sys
    import time

    from lsp_testing import REPO

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(REPO), "TILELANG_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "tilelang_lsp.server", "--tcp", f"127.0.0.1:{port}"], env=env,
                            cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:  # connect as soon as the server listens
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline, "the server never listened"
                assert proc.poll() is None, "the server exited"
                time.sleep(0.05)
        with sock:
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                               "params": {"processId": None, "rootUri": None, "capabilities": {}}}).encode()
            sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            reply = sock.makefile("rb")
            length = None
            while (line := reply.readline().strip()):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            result = json.loads(reply.read(length))["result"]
        assert result["serverInfo"]["name"] == "tilelang-lsp"
        assert "hoverProvider" in result["capabilities"]
    finally:
        proc.kill()
        proc.wait(10)


SLOW = '''import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def slow(N):
    while True:
        pass


kernel = slow(1024)
'''

CRASH = '''import os
import signal

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def crash(N):
    os.kill(os.getpid(), signal.SIGKILL)


kernel = crash(1024)
'''


def test_a_hung_build_times_out_and_a_dead_worker_is_replaced(tmp_path):
    client = start_server(tmp_path, options={"timeout": 2}, name="limits")
    try:
        doc = Doc(client, tmp_path / "limits.py", SLOW)
        found = doc.diagnostics()
        assert [d["code"] for d in found] == ["TL0803"]
        assert "took longer than 2 s" in found[0]["message"]
        doc.replace(CRASH)
        found = doc.diagnostics()
        assert [d["code"] for d in found] == ["TL0003"]
        assert "worker process" in found[0]["message"]
        doc.replace((FIXTURES / "no_clear.py").read_text())
        assert [d["code"] for d in doc.diagnostics()] == ["TL0401"]
    finally:
        assert client.shutdown() == 0


HANG_IN_IF = '''import time

import tilelang
import tilelang.language as T

if True:
    READY = time.sleep(3600)


@tilelang.jit(out_idx=[-1])
def add_one(N, block=128):
    @T.prim_func
    def kernel(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] + 1.0

    return kernel


kernel = add_one(1024)
'''


def test_a_module_level_hang_inside_an_if_times_out_once_and_does_not_stall_other_files(tmp_path):
    """Issue 16: the hang's timeout used to be swallowed (no diagnostic) and paid again on every check."""
    import time

    client = start_server(tmp_path, options={"timeout": 2}, name="hang")
    try:
        hang = Doc(client, tmp_path / "hang.py", HANG_IN_IF)
        found = hang.diagnostics()
        assert [(d["code"], d["range"]["start"]["line"]) for d in found] == [("TL0803", 6)]
        assert "ran past the time limit (no answer within 2 s)" in found[0]["message"]
        other = Doc(client, tmp_path / "other.py", (FIXTURES / "no_clear.py").read_text())
        assert [d["code"] for d in other.diagnostics()] == ["TL0401"]
        for i in range(3):   # editing the hanging file re-checks it without running the hang again
            hang.replace(HANG_IN_IF.replace("kernel = add_one(1024)", f"kernel = add_one({2048 + i})"))
            other.replace(other.text + f"\n# edit {i}\n")
            started = time.monotonic()
            assert [d["code"] for d in other.diagnostics()] == ["TL0401"]
            assert time.monotonic() - started < 1.5, "the other file waited for the hang again"
            found = hang.diagnostics()
            assert [d["code"] for d in found] == ["TL0803"] and "not run" in found[0]["message"]
    finally:
        assert client.shutdown() == 0
