"""Runs in the language-server process.

``textDocument/completion`` and ``textDocument/signatureHelp`` (logic in ``tilelang_lsp.completion``).

Both work on the text before the cursor and the document's ``SourceModel``: in-process, no worker
round trip. Before the worker has sent the ``tilelang.language`` index, ``T.`` completion is
marked incomplete (the client asks again) and keyword completion uses a built-in list.
"""

from __future__ import annotations

import logging

from tilelang_lsp import completion, convert

log = logging.getLogger("tilelang_lsp")


def _cursor(ls, params):
    snap, model = ls.snapshot(params.text_document.uri), ls.model(params.text_document.uri)
    if snap is None or model is None:
        return None
    index = ls.line_index(snap[1])
    line, col = index.from_position(params.position)
    line_text = index.lines[line - 1][:col]
    before = "\n".join(index.lines[max(0, line - 200): line - 1] + [line_text])
    return model, line, line_text, before


def register(server) -> None:
    @server.feature("textDocument/completion", convert.completion_options())
    def text_document_completion(ls, params):
        try:
            cursor = _cursor(ls, params)
            if cursor is None:
                return None
            model, line, line_text, before = cursor
            items, incomplete = completion.complete(model, ls.language, line_text, before, line)
            return convert.to_lsp_completion_list(items, incomplete)
        except Exception:  # noqa: BLE001 - completion must never take the server down
            log.exception("completion failed")
            return None

    @server.feature("textDocument/signatureHelp", convert.signature_help_options())
    def text_document_signature_help(ls, params):
        try:
            cursor = _cursor(ls, params)
            if cursor is None:
                return None
            found = completion.signature(cursor[0], ls.language, cursor[3])
            return convert.to_lsp_signature_help(*found) if found else None
        except Exception:  # noqa: BLE001
            log.exception("signature help failed")
            return None
