"""Source spans on TIR nodes, as upstream's ``tilelang.ir`` exposes them.

The front end runs a kernel body under TVM's IR builder with the source span of every statement
(``tilelang/frontend/builder.py``), so statements and buffers carry ``span`` fields that point at
the user's lines. These helpers read and write those fields (TVM reflects ``span`` read-only to
Python; the field's own setter writes it in place) and measure how much of a function carries
them. ``TILELANG_ENABLE_IR_SPAN=0`` turns stamping off (``tilelang.knobs``). Spans never take
part in structural equality.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm.ir import SourceName, Span


def make_span(file: str, line: int) -> Span:
    """A span covering one whole source line."""
    return Span(SourceName(file), int(line), int(line), 1, 1 << 20)


def _set_span(node: Any, span: Span | None) -> None:
    type(node).span.set(node, span)


def _innermost(span):
    # a statement built inside a macro carries a SequentialSpan (call site, then the macro's line)
    while span is not None and getattr(span, "source_name", None) is None and getattr(span, "spans", None):
        span = span.spans[-1]
    return span


def _get_span(node: Any) -> Span | None:
    span = _innermost(getattr(node, "span", None))
    if span is None or getattr(span, "source_name", None) is None:
        return None
    return span


def set_stmt_span(stmt, span: Span | None) -> None:
    _set_span(stmt, span)


def get_stmt_span(stmt) -> Span | None:
    return _get_span(stmt)


def set_buffer_span(buffer, span: Span | None) -> None:
    _set_span(buffer, span)


def get_buffer_span(buffer) -> Span | None:
    return _get_span(buffer)


def set_prim_func_span(func, span: Span | None) -> None:
    _set_span(func, span)


def get_prim_func_span(func) -> Span | None:
    return _get_span(func)


def stamp_stmt_spans(stmt, span: Span | None) -> None:
    """Give ``span`` to every statement under ``stmt`` that has none."""
    if span is None:
        return
    from tvm.tirx.stmt_functor import post_order_visit

    def visit(node):
        if isinstance(node, tvm.tirx.Stmt) and _get_span(node) is None:
            _set_span(node, span)

    post_order_visit(stmt, visit)


def span_to_location(span: Span | None) -> tuple[str, int] | None:
    """``(file, line)`` of a span, or None when it has none."""
    span = _innermost(span)
    if span is None or getattr(span, "source_name", None) is None:
        return None
    return (span.source_name.name, int(span.line))


def span_coverage(func) -> dict:
    """``{"stmts": [with_span, total], "buffers": [with_span, total]}`` of a parsed PrimFunc.

    Buffers are the parameters' buffers and the allocated ones (the ``T.alloc_*`` sites: ``AllocBuffer``
    statements, or a block's ``alloc_buffers``).
    """
    from tvm.tirx.stmt_functor import post_order_visit

    stmts = [0, 0]
    buffers = [0, 0]
    seen: list = []

    def count_buffer(buf):
        if any(buf.same_as(b) for b in seen):
            return
        seen.append(buf)
        buffers[1] += 1
        buffers[0] += get_buffer_span(buf) is not None

    def visit(node):
        if isinstance(node, tvm.tirx.Stmt):
            stmts[1] += 1
            stmts[0] += get_stmt_span(node) is not None
        kind = type(node).__name__
        if kind == "AllocBuffer":
            count_buffer(node.buffer)
        elif kind == "SBlockRealize":
            for buf in node.block.alloc_buffers:
                count_buffer(buf)

    post_order_visit(func.body, visit)
    for buf in func.buffer_map.values():
        count_buffer(buf)
    return {"stmts": stmts, "buffers": buffers}


__all__ = [
    "get_buffer_span",
    "get_prim_func_span",
    "get_stmt_span",
    "make_span",
    "set_buffer_span",
    "set_prim_func_span",
    "set_stmt_span",
    "span_coverage",
    "span_to_location",
    "stamp_stmt_spans",
]
