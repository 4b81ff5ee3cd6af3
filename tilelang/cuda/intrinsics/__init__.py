"""Upstream's ``tilelang.cuda.intrinsics``: tensor-core layout helpers (``get_swizzle_layout``,
``make_mma_swizzle_layout``, see ``layout.mma_layout``), the per-lane fragment maps
(``layout.utils``) and the emitter classes of ``macro`` (``TensorCoreIntrinEmitter`` ...)."""

from tilelang.cuda.intrinsics.layout import mma_layout  # noqa: F401
from tilelang.cuda.intrinsics.layout.mma_layout import get_swizzle_layout, make_mma_swizzle_layout
from tilelang.cuda.intrinsics.layout.utils import get_ldmatrix_offset, get_mma_micro_size, mma_store_index_map
from tilelang.cuda.intrinsics.macro import (TensorCoreIntrinEmitter, TensorCoreIntrinEmitterSM75,
                                            TensorCoreIntrinEmitterWithLadderTransform)

__all__ = ["TensorCoreIntrinEmitter", "TensorCoreIntrinEmitterSM75", "TensorCoreIntrinEmitterWithLadderTransform",
           "get_ldmatrix_offset", "get_mma_micro_size", "get_swizzle_layout", "make_mma_swizzle_layout",
           "mma_layout", "mma_store_index_map"]
