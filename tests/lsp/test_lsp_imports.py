"""The language-server process never imports ``tilelang``, ``tvm`` or ``torch`` (issue 16).

The first TL0501 quick fix and the first ``T.use_swizzle`` hover used to import all three into the
server (a 2-3 s freeze, 43 -> 413 MiB). Here a fresh Python imports the server, replays a recorded
worker reply (``recorded/server_inputs.json``: the ``check`` reply for ``recorded/server_inputs.py``)
through the server's own delivery and handlers, renders every hover, quick fix, code lens,
completion and symbol of the file, and reports ``sys.modules``. A second test keeps the
recording honest: the worker's reply today has the same diagnostics and hover-data keys.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

RECORDED = Path(__file__).resolve().parent / "recorded"
REPO = Path(__file__).resolve().parents[2]

REPLAY = r'''
import ast, json, sys
from pathlib import Path

from lsprotocol import types as lsp

from tilelang_lsp.completion import static_index
from tilelang_lsp.server import build_server
from tilelang_lsp.server_state import DocState, Result

source, recording = Path(sys.argv[1]), Path(sys.argv[2])
text = source.read_text()
reply = json.loads(recording.read_text().replace("<path>", str(source).replace("\\", "\\\\")))
server = build_server()
server.pull_mode = True                       # nothing to publish to: no client
steps = server.protocol.lsp_initialize(lsp.InitializeParams(capabilities=lsp.ClientCapabilities(), root_uri=None))
try:
    step = next(steps)
    while True:
        handler, args, _ = step
        step = steps.send(handler(*args))
except StopIteration:
    pass
server.language = static_index()             # what ``initialized`` reads before the worker answers
uri = source.as_uri()
server.workspace.put_text_document(lsp.TextDocumentItem(uri, "python", 1, text))
server.checks.docs[uri] = DocState(uri)
result = Result(1, reply["diagnostics"], reply["kernels"], reply["target"])
server.checks.deliver(uri, result, text)      # builds the quick fixes the checker left to the server
features = server.protocol.fm.features
doc = lsp.TextDocumentIdentifier(uri)

hovers = {}
positions = set()
for node in ast.walk(ast.parse(text)):
    if isinstance(node, (ast.Name, ast.Attribute, ast.arg, ast.FunctionDef)):
        positions.add((node.lineno - 1, node.col_offset + (4 if isinstance(node, ast.FunctionDef) else 0)))
        if isinstance(node, ast.Attribute):
            positions.add((node.end_lineno - 1, node.end_col_offset - 1))
for line, col in sorted(positions):
    found = features[lsp.TEXT_DOCUMENT_HOVER](lsp.HoverParams(doc, lsp.Position(line, col)))
    if found is not None:
        hovers[f"{line + 1}:{col}"] = found.contents.value

actions = features[lsp.TEXT_DOCUMENT_CODE_ACTION](lsp.CodeActionParams(
    doc, lsp.Range(lsp.Position(0, 0), lsp.Position(len(text.splitlines()), 0)),
    lsp.CodeActionContext(diagnostics=result.lsp)))
lenses = features[lsp.TEXT_DOCUMENT_CODE_LENS](lsp.CodeLensParams(doc))
symbols = features[lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL](lsp.DocumentSymbolParams(doc))
line = next(i for i, t in enumerate(text.splitlines()) if "T.use_swizzle" in t)
completion = features[lsp.TEXT_DOCUMENT_COMPLETION](lsp.CompletionParams(doc, lsp.Position(line, 14)))
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("tilelang", "tvm", "torch", "tvm_ffi"))
print(json.dumps({"heavy": heavy, "hovers": hovers, "actions": [a.title for a in actions],
                  "lenses": len(lenses), "symbols": len(symbols), "completion": len(completion.items)}))
'''


def test_the_server_renders_every_hover_and_quick_fix_without_importing_the_compiler(tmp_path):
    # (fragment hovers draw their layout pictures into the cache: keep them out of the user's)
    env = {**os.environ, "TILELANG_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", REPLAY, str(RECORDED / "server_inputs.py"),
                           str(RECORDED / "server_inputs.json")], capture_output=True, text=True, cwd=REPO,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["heavy"] == [], f"the server process imported {out['heavy']}"
    assert sorted(out["actions"]) == ["add `T.clear(C_local)` before line 53",
                                      "lower num_stages from 4 to 3 to fit sm_90a's shared memory"]
    texts = "\n".join(out["hovers"].values())
    for expected in ("**T.use_swizzle** · panels of **16** block rows", "one per SM of sm_90a (H100 / H200)",
                     "**T.gemm**", "**T.Pipelined**", "**T.Kernel**", "fragment `float32[128, 256]`",
                     "shared `float16[128, 128]`", "over budget", "Checked with:"):
        assert expected in texts, expected
    assert len(out["hovers"]) > 60 and out["lenses"] == 6 and out["symbols"] == 3 and out["completion"] > 50


def test_the_recording_is_what_the_worker_sends_today():
    sys.path.insert(0, str(RECORDED))
    from record import RECORDING, check_reply

    now, recorded = check_reply(), json.loads(RECORDING.read_text())
    assert [(d["code"], d["span"]["line"]) for d in now["diagnostics"]] == \
        [(d["code"], d["span"]["line"]) for d in recorded["diagnostics"]]
    assert now["kernels"].keys() == recorded["kernels"].keys()
    for name, entries in now["kernels"].items():
        fresh, old = entries[0]["summary"], recorded["kernels"][name][0]["summary"]
        assert fresh.keys() == old.keys(), f"{name}: re-record with python tests/lsp/recorded/record.py"
