"""Fuzzing the server with random edits: truncations, deletions, stray tokens and broken syntax.

Invariants: the server never crashes, every request is answered within ``REQUEST_LIMIT`` seconds
while the edits stream in, diagnostics keep arriving for the current version, and once the
text is whole again its diagnostics and hover data come back.
"""

from __future__ import annotations

import random
import time

import pytest

from lsp_testing import FIXTURES, Doc

pytestmark = pytest.mark.timeout(240)

EDITS = 2000
REQUEST_LIMIT = 5.0
TOKENS = ["(", ")", "[", "]", ":", ",", "T.", "T.gemm(", "def ", "with ", "for k in T.Pipelined(", "'''", '"',
          "\\", "#", "\n", "\n    ", "\t", "é", "😋", "lambda", "=", "==", "@T.prim_func\n", "return", " ", "\r\n",
          "\x00", "C_local", "num_stages=", "):", "    pass\n", "'", "f'{", "}"]
METHODS = ["textDocument/hover", "textDocument/completion", "textDocument/signatureHelp",
           "textDocument/definition", "textDocument/documentSymbol", "textDocument/codeLens",
           "textDocument/codeAction"]


def mutate(rng: random.Random, text: str, base: str) -> str:
    kind = rng.random()
    n = len(text)
    if kind < 0.15:
        return text[: rng.randrange(n + 1)]
    if kind < 0.35 and n:
        a = rng.randrange(n)
        return text[:a] + text[a + rng.randrange(1, 40):]
    if kind < 0.75:
        a = rng.randrange(n + 1)
        return text[:a] + rng.choice(TOKENS) + text[a:]
    if kind < 0.85:
        lines = text.split("\n")
        i = rng.randrange(len(lines))
        lines.insert(i, lines[rng.randrange(len(lines))])
        return "\n".join(lines)
    if kind < 0.93:
        return base[: rng.randrange(len(base) + 1)] + text[rng.randrange(n + 1):]
    return base


def utf16_position(text: str, offset: int) -> dict:
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    return {"line": line, "character": len(text[start:offset].encode("utf-16-le")) // 2}


def send_edit(rng: random.Random, doc: Doc, new: str) -> None:
    """Send ``new`` as a full change or as one incremental change replacing the differing middle."""
    old = doc.text
    doc.version += 1
    doc.text = new
    if rng.random() < 0.5 or "\r" in old or "\r" in new:
        doc.client.change(doc.uri, doc.version, new)
        return
    a = 0
    while a < min(len(old), len(new)) and old[a] == new[a]:
        a += 1
    b = 0
    while b < min(len(old), len(new)) - a and old[-1 - b] == new[-1 - b]:
        b += 1
    rng_ = {"start": utf16_position(old, a), "end": utf16_position(old, len(old) - b)}
    doc.client.notify("textDocument/didChange", {"textDocument": {"uri": doc.uri, "version": doc.version},
                                                 "contentChanges": [{"range": rng_, "text": new[a: len(new) - b]}]})


def random_request(rng: random.Random, doc: Doc) -> float:
    lines = doc.text.split("\n")
    line = rng.randrange(len(lines))
    character = rng.randrange(len(lines[line].encode("utf-16-le")) // 2 + 2)
    method = rng.choice(METHODS)
    params = {"textDocument": {"uri": doc.uri}}
    if method in ("textDocument/documentSymbol", "textDocument/codeLens"):
        pass
    elif method == "textDocument/codeAction":
        pos = {"line": line, "character": character}
        params.update(range={"start": pos, "end": pos}, context={"diagnostics": []})
    else:
        params["position"] = {"line": line, "character": character}
    start = time.perf_counter()
    doc.client.request(method, params, timeout=REQUEST_LIMIT)
    return time.perf_counter() - start


def test_random_edits_never_crash_the_server(server, lsp_dir):
    rng = random.Random(20240611)
    base = (FIXTURES / "gemm_kernel.py").read_text()
    doc = Doc(server, lsp_dir / "fuzz_target.py", base)
    assert doc.diagnostics() == []
    latencies = []
    for i in range(1, EDITS + 1):
        send_edit(rng, doc, mutate(rng, doc.text, base))
        if i % 10 == 0:
            latencies.append(random_request(rng, doc))
        if i % 250 == 0:
            doc.diagnostics(timeout=60)
    assert server.proc.poll() is None, "the server exited"
    send_edit(rng, doc, base)
    assert doc.diagnostics(timeout=90) == []
    hover = doc.at("textDocument/hover", "C_local = ", 2)
    assert "registers/thread" in hover["contents"]["value"]
    assert max(latencies) < REQUEST_LIMIT
    print(f"{len(latencies)} requests during {EDITS} edits: max {max(latencies) * 1e3:.0f} ms, "
          f"median {sorted(latencies)[len(latencies) // 2] * 1e3:.1f} ms")
