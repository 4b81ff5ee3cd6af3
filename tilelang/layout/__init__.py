"""Layouts: fragments (registers) and shared-memory swizzles, plus the user-facing ``Layout``
objects that ``T.annotate_layout`` accepts."""

from __future__ import annotations

from .axes import (Axis, LayoutError, UserLayoutError, default_fragment, drop_dim, evaluate_index_expr,  # noqa: F401
                   mma_accumulator, mma_operand_a, project)
from .layout import Layout, unpack_layout_expr
from .fragment import (Fragment, build_user_fragment, make_fully_replicated_layout_fragment,
                       make_gemm_fragment_8x8, make_gemm_fragment_8x8_transposed)
from .swizzle import (CustomSharedLayout, RowMajorLayout, SharedLayout, SwizzledLayout, SwizzleMode,
                      make_full_bank_swizzled_layout, make_half_bank_swizzled_layout, make_linear_layout,
                      make_quarter_bank_swizzled_layout, make_swizzled_layout, make_wgmma_swizzled_layout)


__all__ = ["Axis", "CustomSharedLayout", "cute", "Fragment", "Layout", "LayoutError", "RowMajorLayout", "SharedLayout",
           "SwizzleMode", "SwizzledLayout", "UserLayoutError", "build_user_fragment", "default_fragment", "drop_dim",
           "make_full_bank_swizzled_layout", "make_fully_replicated_layout_fragment", "make_gemm_fragment_8x8",
           "make_gemm_fragment_8x8_transposed", "make_half_bank_swizzled_layout", "make_linear_layout",
           "make_quarter_bank_swizzled_layout", "make_swizzled_layout", "make_wgmma_swizzled_layout",
           "mma_accumulator", "mma_operand_a", "project", "unpack_layout_expr"]


def __getattr__(name):
    if name == "cute":  # the CuTe layout algebra (``tilelang.layout.cute``) loads on first use
        import importlib

        return importlib.import_module(".cute", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
