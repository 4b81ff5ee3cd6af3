"""Tensor-core layout helpers with upstream's names (``from tilelang.cuda.intrinsics import
get_swizzle_layout, make_mma_swizzle_layout``); see ``layout.mma_layout``."""

from tilelang.cuda.intrinsics.layout import mma_layout  # noqa: F401
from tilelang.cuda.intrinsics.layout.mma_layout import get_swizzle_layout, make_mma_swizzle_layout

__all__ = ["get_swizzle_layout", "make_mma_swizzle_layout", "mma_layout"]
