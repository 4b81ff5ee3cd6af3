"""Server settings: pull diagnostics for clients that support them, and ``allowExecution=false``."""

from __future__ import annotations

import pytest

from lsp_testing import FIXTURES, Doc, start_server
from tilelang_lsp.lsp_client import default_capabilities

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
