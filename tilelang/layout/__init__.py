"""Layouts: fragments (registers) and shared-memory swizzles, plus the user-facing ``Layout``
objects that ``T.annotate_layout`` accepts."""

from __future__ import annotations

from tvm import ir, tirx

from .fragment import (Axis, Fragment, LayoutError, default_fragment, drop_dim, mma_accumulator,
                       mma_operand_a, project)
from .swizzle import SharedLayout


class Layout:
    """A user-annotated layout (``T.annotate_layout``); encoded into the IR as a string."""

    kind = "layout"

    def encode(self):
        return ir.StringImm(self.kind)


class SwizzledLayout(Layout):
    kind = "swizzle"


class RowMajorLayout(Layout):
    kind = "row_major"


def make_swizzled_layout(buffer=None, k_major=True, allow_pad=True):
    """Ask for the XOR-swizzled shared layout on ``buffer`` (the default for gemm operands)."""
    return SwizzledLayout()


def make_linear_layout(buffer=None):
    return RowMajorLayout()


__all__ = ["Axis", "Fragment", "Layout", "LayoutError", "SharedLayout", "default_fragment",
           "drop_dim", "make_linear_layout", "make_swizzled_layout", "mma_accumulator",
           "mma_operand_a", "project"]
