"""Runs in the language-server process.

``textDocument/definition`` and ``textDocument/documentSymbol``, from ``ast`` alone.

Definition: a name goes to its binding visible at the cursor (buffers, kernel tensors, factory
and kernel definitions, parameters, module-level names; innermost function first); ``T.member``
goes to the member's source in ``tilelang.language`` (from the completion index). Symbols:
kernel factories, their ``@T.prim_func`` kernels, and each kernel's tensors and buffers.
"""

from __future__ import annotations

import ast
import logging

from tilelang_lsp import convert

log = logging.getLogger("tilelang_lsp")


def register(server) -> None:
    @server.feature("textDocument/definition")
    def text_document_definition(ls, params):
        try:
            return definition(ls, params.text_document.uri, params.position)
        except Exception:  # noqa: BLE001
            log.exception("definition failed")
            return None

    @server.feature("textDocument/documentSymbol")
    def text_document_document_symbol(ls, params):
        try:
            snap, model = ls.snapshot(params.text_document.uri), ls.model(params.text_document.uri)
            if snap is None or model is None:
                return []
            index = ls.line_index(snap[1])
            return [convert.to_lsp_document_symbol(s, index) for s in model.symbols()]
        except Exception:  # noqa: BLE001
            log.exception("document symbols failed")
            return []


def definition(ls, uri: str, position):
    snap, model = ls.snapshot(uri), ls.model(uri)
    if snap is None or model is None or not model.ok:
        return None
    index = ls.line_index(snap[1])
    line, col = index.from_position(position)
    node = model.node_at(line, col, (ast.Name, ast.Attribute))
    if isinstance(node, ast.Attribute):
        return _member_location(ls, model, node)
    if not isinstance(node, ast.Name):
        return None
    found = model.definitions_at(line).get(node.id)
    if found is None:
        return None
    rng = index.range(found.line, found.col + 1, found.line, found.end_col + 1)
    return convert.to_lsp_location(uri, rng)


def _member_location(ls, model, node):
    if not isinstance(node.value, ast.Name) or node.value.id not in model.t_aliases:
        return None
    member = next((m for m in (ls.language or {}).get("T", []) if m["name"] == node.attr), None)
    if member is None or not member.get("file") or not member.get("line"):
        return None
    return convert.to_lsp_location(convert.path_to_uri(member["file"]), convert.line_start_range(member["line"]))
