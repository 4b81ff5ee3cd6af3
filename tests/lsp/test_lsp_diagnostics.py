"""Diagnostics end to end: push with the document version, stale versions dropped, syntax errors
located, quick fixes applied and re-checked, diagnostics cleared on close."""

from __future__ import annotations

import pytest

from tilelang_lsp.editor_client import apply_edits

pytestmark = pytest.mark.timeout(180)


def codes(diagnostics) -> list:
    return sorted(d["code"] for d in diagnostics)


def test_open_publishes_diagnostics_for_the_opened_version(open_doc):
    doc = open_doc("no_clear.py")
    found = doc.diagnostics()
    assert codes(found) == ["TL0401"]
    d = found[0]
    assert d["source"] == "tilelang"
    assert d["codeDescription"]["href"].endswith("#tl0401")
    # The accumulator operand of T.gemm (0-based line 17), not the whole statement.
    line, ch = doc.position("C_local)\n")
    assert d["range"]["start"] == {"line": line, "character": ch}
    assert d["relatedInformation"][0]["message"].startswith("'C_local' is allocated here")
    assert "checked with matmul_no_clear(M=256, N=256, K=256)" in d["message"]


def test_fast_edits_publish_only_the_newest_version(open_doc, server):
    doc = open_doc("no_clear.py", as_name="fast_edits.py")
    doc.diagnostics()
    fixed = doc.text.replace("            for k in", "            T.clear(C_local)\n            for k in")
    doc.replace(doc.text + "\n# an edit\n")
    doc.replace(fixed.replace("block=64", "block=64 "))
    last = doc.replace(fixed)
    assert doc.diagnostics() == []
    published = [n["params"]["version"] for n in server.notifications
                 if n.get("method") == "textDocument/publishDiagnostics" and n["params"]["uri"] == doc.uri]
    assert published[-1] == last
    assert published == sorted(published), "a stale result was published after a newer one"


def test_syntax_error_becomes_tl0001_at_the_error(open_doc):
    doc = open_doc("gemm_kernel.py", as_name="broken.py")
    doc.diagnostics()
    doc.replace(doc.text.replace("T.clear(C_local)", "T.clear(C_local"))
    found = doc.diagnostics()
    assert codes(found) == ["TL0001"]
    line, _ = doc.position("T.clear(C_local")
    assert found[0]["range"]["start"]["line"] == line
    assert "never closed" in found[0]["message"]


def test_quick_fix_from_the_checker_is_applied_and_rechecked(open_doc, server):
    doc = open_doc("no_clear.py", as_name="quick_fix.py")
    found = doc.diagnostics()
    actions = server.request("textDocument/codeAction", {"textDocument": {"uri": doc.uri}, "range": found[0]["range"],
                                                         "context": {"diagnostics": found}})
    assert [a["title"] for a in actions] == ["add `T.clear(C_local)` before line 15"]
    change = actions[0]["edit"]["documentChanges"][0]
    assert change["textDocument"] == {"uri": doc.uri, "version": doc.version}
    doc.replace(apply_edits(doc.text, change["edits"]))
    assert "            T.clear(C_local)\n            for k in T.Pipelined" in doc.text
    assert doc.diagnostics() == []


def test_num_stages_fix_built_by_the_server_fits_the_budget(open_doc, server):
    doc = open_doc("smem_budget.py")
    found = doc.diagnostics()
    assert codes(found) == ["TL0501"]
    actions = server.request("textDocument/codeAction", {"textDocument": {"uri": doc.uri}, "range": found[0]["range"],
                                                         "context": {"diagnostics": found}})
    assert actions[0]["title"] == "lower num_stages from 4 to 3 to fit sm_90a's shared memory"
    doc.replace(apply_edits(doc.text, actions[0]["edit"]["documentChanges"][0]["edits"]))
    assert "block_K=128, num_stages=3):" in doc.text
    assert doc.diagnostics() == []


def test_close_clears_diagnostics(open_doc, server):
    doc = open_doc("no_clear.py", as_name="closing.py")
    assert doc.diagnostics()
    doc.close()
    server.wait_for(lambda c: c.diagnostics.get(doc.uri) == (None, []), 30, "cleared diagnostics")
