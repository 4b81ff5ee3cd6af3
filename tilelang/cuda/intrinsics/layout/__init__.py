"""Upstream's ``tilelang.cuda.intrinsics.layout`` package: shared-memory layouts for mma operands."""

from tilelang.cuda.intrinsics.layout import mma_layout  # noqa: F401
from tilelang.cuda.intrinsics.layout.mma_layout import get_swizzle_layout, make_mma_swizzle_layout

__all__ = ["get_swizzle_layout", "make_mma_swizzle_layout", "mma_layout"]
