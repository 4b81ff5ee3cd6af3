"""Runs in the language-server process.

``didOpen``/``didChange``/``didClose`` and the pull request ``textDocument/diagnostic``.

``didChange`` only lets pygls store the text and version, then asks the scheduler
(``server_state.Checks``) for a check; ``didClose`` forgets the document and clears its
diagnostics. The pull handler answers with the result for the document's current version,
waiting for its check when needed; an unchanged result id gets an unchanged report.
"""

from __future__ import annotations

from tilelang_lsp import convert


def register(server) -> None:
    @server.feature("textDocument/didOpen")
    def did_open(ls, params):
        ls.checks.touch(params.text_document.uri)

    @server.feature("textDocument/didChange")
    def did_change(ls, params):
        ls.checks.touch(params.text_document.uri)

    @server.feature("textDocument/didClose")
    def did_close(ls, params):
        uri = params.text_document.uri
        ls.checks.close(uri)
        ls.forget(uri)
        ls.clear(uri)


async def diagnostic(ls, params):
    """``textDocument/diagnostic`` (registered only in pull mode)."""
    uri = params.text_document.uri
    snap = ls.snapshot(uri)
    if snap is None:
        return convert.full_report("none", [])
    result = await ls.checks.wait_result(uri, snap[0])
    if result is None:
        return convert.full_report("none", [])
    result_id = f"{result.version}-{id(result)}"
    if params.previous_result_id == result_id:
        return convert.unchanged_report(result_id)
    return convert.full_report(result_id, result.lsp)
