"""Runs in the language-server process.

``textDocument/hover``: answered from memory, never by a worker round trip.

The hovered node comes from the document's ``SourceModel`` (``ast``); its data from the hover
summaries the last check delivered for the enclosing factory (``Checks.kernels``), computed in
the worker once per document version. While the document has changed since that check, tile
ops are matched by their order in the factory rather than by line. Targets: a buffer or tensor
name, ``T.gemm``, ``T.Pipelined``, ``T.Kernel``, ``T.alloc_*`` (the buffer it defines), a factory
name, and any other ``T.<member>`` (its signature and docstring).
"""

from __future__ import annotations

import ast
import logging

from tilelang_lsp import convert, hover
from tilelang_lsp.server_source import dotted

log = logging.getLogger("tilelang_lsp")


def register(server) -> None:
    @server.feature("textDocument/hover")
    def text_document_hover(ls, params):
        try:
            return hover_at(ls, params.text_document.uri, params.position)
        except Exception:  # noqa: BLE001 - a hover must never take the server down
            log.exception("hover failed")
            return None


def hover_at(ls, uri: str, position):
    snap, model = ls.snapshot(uri), ls.model(uri)
    if snap is None or model is None or not model.ok:
        return None
    index = ls.line_index(snap[1])
    line, col = index.from_position(position)
    ctx = _Context(ls, uri, model, line, snap[0])
    name_range = _factory_name_at(model, ctx.factory, line, col)
    if name_range is not None:
        return convert.to_lsp_hover(ctx.factory_hover(), index.range(*name_range))
    node = model.node_at(line, col, (ast.Name, ast.Attribute, ast.arg))
    if node is None:
        return None
    text = ctx.markdown(node)
    if text is None:
        return None
    return convert.to_lsp_hover(text, index.range(*model.node_range(node)))


def _factory_name_at(model, factory, line: int, col: int):
    """The range of the factory's name when the cursor is on it in its ``def`` line."""
    if factory is None or factory.node.lineno != line:
        return None
    text = model.lines[line - 1]
    start = text.find(f"def {factory.name}") + 4
    if start < 4 or not start <= col <= start + len(factory.name):
        return None
    return (line, start + 1, line, start + 1 + len(factory.name))


class _Context:
    def __init__(self, ls, uri, model, line, version):
        self.ls, self.model, self.line = ls, model, line
        self.factory = model.factory_at(line)
        st = ls.checks.docs.get(uri)
        self.exact = st is not None and st.kernels_version == version
        self.entries = ls.checks.kernels(uri).get(self.factory.name, []) if self.factory else []
        self.compiled = ls.compile_results.get((uri, self.factory.name)) if self.factory else None
        self.ran = ls.run_results.get((uri, self.factory.name)) if self.factory else None

    def markdown(self, node) -> str | None:
        if isinstance(node, ast.Attribute):
            member = self.model.is_t(dotted(node))
            return self.member(member, node) if member else None
        name = node.arg if isinstance(node, ast.arg) else node.id
        if self.factory is not None and name == self.factory.name:
            return self.factory_hover()
        return self.buffer(name)

    # ----- buffers ------------------------------------------------------------------------
    def buffer(self, name: str) -> str | None:
        for i, entry in enumerate(self.entries):
            summary = entry["summary"]
            found = summary.get("buffers", {}).get(name)
            if found is not None:
                return hover.buffer_markdown(name, found, summary, entry["binding"], len(self.entries) - 1)
        definition = self.factory.buffers().get(name) if self.factory is not None else None
        if definition is None:
            return None
        return hover.pending_markdown(name, definition.detail, self.missing_reason())

    def missing_reason(self) -> str:
        if not self.ls.settings.allow_execution:
            return "tilelang.allowExecution is off: kernels are not built, so no layout is known"
        if not self.entries:
            return "no hover data yet: the kernel has not been built (still checking, or see the diagnostics)"
        return "this name is not a buffer of the built kernel"

    # ----- T members ----------------------------------------------------------------------
    def member(self, member: str, node) -> str | None:
        call = self.model.call_at(node.end_lineno, self.model.char_col(node.end_lineno, node.end_col_offset) - 1)
        if member == "use_swizzle" and call is not None:
            found = self.raster()
            if found is not None:
                return found
        if member in ("gemm", "Pipelined", "Kernel") and call is not None:
            found = self.tile_op(member, call)
            if found is not None:
                return found
        if member.startswith(("alloc_", "empty")) and call is not None:
            target = self._assigned_name(call)
            if target is not None:
                return self.buffer(target)
        return self.doc(member)

    def raster(self) -> str | None:
        for entry in self.entries:
            r = entry["summary"].get("raster")
            if r is not None:
                return hover.raster_markdown(r, entry["summary"], entry["binding"], len(self.entries) - 1)
        return None

    def tile_op(self, member: str, call) -> str | None:
        ordinal = self.model.ordinal_of_call(self.factory, call) if self.factory is not None else 0
        for entry in self.entries:
            summary, binding, others = entry["summary"], entry["binding"], len(self.entries) - 1
            if member == "Kernel" and summary.get("launch"):
                return hover.kernel_markdown(summary, binding, self.compiled, others, self.ran)
            items = summary.get("gemms" if member == "gemm" else "pipelines") or []
            item = self._pick(items, call.lineno, ordinal)
            if item is not None and member == "gemm":
                return hover.gemm_markdown(item, binding, others)
            if item is not None:
                return hover.pipeline_markdown(item, summary, binding, others)
        return None

    def _pick(self, items: list, line: int, ordinal: int):
        by_line = next((i for i in items if i.get("line") == line), None)
        by_order = items[ordinal] if ordinal < len(items) else None
        return (by_line or by_order) if self.exact else (by_order or by_line)

    def _assigned_name(self, call) -> str | None:
        for node in ast.walk(self.factory.node if self.factory else self.model.tree):
            if isinstance(node, ast.Assign) and node.value is call and isinstance(node.targets[0], ast.Name):
                return node.targets[0].id
        return None

    def doc(self, member: str) -> str | None:
        for m in (self.ls.language or {}).get("T", []):
            if m["name"] == member:
                return hover.member_markdown("T", m)
        return None

    def factory_hover(self) -> str:
        kind = "@T.prim_func" if self.factory.is_prim_func else "kernel factory"
        lines = [f"**{self.factory.name}** · {kind}"]
        if not self.entries:
            return "\n\n".join([lines[0], f"_{self.missing_reason()}_"])
        lines += ["", "Checked with:"] + [f"- {e['binding']}" for e in self.entries]
        summary = self.entries[0]["summary"]
        if summary.get("launch"):
            lines += ["", hover.kernel_markdown(summary, None, self.compiled, ran=self.ran)]
        return "\n".join(lines)

