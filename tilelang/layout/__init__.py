"""Layouts: fragments (registers) and shared-memory swizzles, plus the user-facing ``Layout``
objects that ``T.annotate_layout`` accepts."""

from __future__ import annotations

from tvm import ir, tirx

from .fragment import (Axis, Fragment, LayoutError, default_fragment, drop_dim, mma_accumulator,
                       mma_operand_a, project)
from .swizzle import CustomSharedLayout, SharedLayout


class Layout:
    """A shared-memory layout for ``T.annotate_layout``: ``T.Layout(shape, lambda i, j: [...])``
    maps a logical index to a physical one (row-major over the physical index space)."""

    kind = "custom"

    def __init__(self, shape=None, forward_fn=None):
        self.shape = tuple(shape) if shape is not None else None
        self.forward_fn = forward_fn

    def encode(self):
        """IR arguments: kind, then (for a custom layout) the input vars and output expressions."""
        if self.forward_fn is None:
            return [ir.StringImm(self.kind)]
        n = len(self.shape) if self.shape is not None else self.forward_fn.__code__.co_argcount
        names = list(self.forward_fn.__code__.co_varnames[:n])
        count = _output_count(self.forward_fn, names)
        # Each output index becomes ``let i = 0, j = 0 in expr`` over its own fresh variables:
        # the IR may hold neither free variables nor a variable defined twice.
        wrapped = []
        for k in range(count):
            variables = [tirx.Var(name, "int32") for name in names]
            out = self.forward_fn(*variables)
            expr = out[k] if isinstance(out, (list, tuple)) else out
            expr = tirx.IntImm("int32", expr) if isinstance(expr, int) else expr
            for var in reversed(variables):
                expr = tirx.Let(var, tirx.IntImm("int32", 0), expr)
            wrapped.append(expr)
        return [ir.StringImm(self.kind), tirx.IntImm("int32", n)] + wrapped


def _output_count(fn, names) -> int:
    out = fn(*[tirx.Var(name, "int32") for name in names])
    return len(out) if isinstance(out, (list, tuple)) else 1


def unpack_layout_expr(expr, n):
    """(variables, body) of an output index built by ``Layout.encode``."""
    variables = []
    for _ in range(n):
        variables.append(expr.var)
        expr = expr.body
    return variables, expr


class SwizzledLayout(Layout):
    kind = "swizzle"


class RowMajorLayout(Layout):
    kind = "row_major"


def make_swizzled_layout(buffer=None, k_major=True, allow_pad=True):
    """Ask for the XOR-swizzled shared layout on ``buffer`` (the default for gemm operands)."""
    return SwizzledLayout()


def make_linear_layout(buffer=None):
    return RowMajorLayout()


__all__ = ["Axis", "CustomSharedLayout", "Fragment", "Layout", "LayoutError", "SharedLayout", "default_fragment",
           "drop_dim", "make_linear_layout", "make_swizzled_layout", "mma_accumulator",
           "mma_operand_a", "project"]
