"""Upstream's ``tilelang.cuda.language.intrinsics``: the tensor-core emitters under one import path.

Contract:
- ``TensorCoreIntrinEmitter``: the mma.sync emitter of ``tilelang.cuda.intrinsics.macro``
  (ldmatrix / mma / stmatrix steps a hand-written GEMM splices in).
- ``TCGEN05TensorCoreIntrinEmitter``: the sm_100 emitter's layout and descriptor half
  (``tcgen05_macro_generator.TensorCoreIntrinEmitter``).
- ``WGMMATensorCoreIntrinEmitter``: hand-written wgmma issue is not provided (``T.gemm`` chooses
  and emits wgmma itself); constructing one raises ``NotImplementedError`` saying so, so code that
  merely imports it still loads. The descriptor helpers (``compute_gmma_descriptor``,
  ``compute_umma_descriptor``) are re-exported.
"""

from __future__ import annotations

from tilelang.cuda.intrinsics.layout.mma_layout import get_swizzle_layout, make_mma_swizzle_layout
from tilelang.cuda.intrinsics.macro.mma_macro_generator import (TensorCoreIntrinEmitter,
                                                               TensorCoreIntrinEmitterWithLadderTransform)
from tilelang.cuda.intrinsics.macro.tcgen05_macro_generator import TCGEN05DescriptorParams
from tilelang.cuda.intrinsics.macro.tcgen05_macro_generator import TensorCoreIntrinEmitter as TCGEN05TensorCoreIntrinEmitter
from tilelang.cuda.intrinsics.macro.tcgen05_macro_generator import compute_umma_descriptor
from tilelang.cuda.intrinsics.macro.wgmma_macro_generator import (WGMMADescriptorParams, compute_gmma_descriptor,
                                                                 select_wgmma_inst_n)

__all__ = ["TCGEN05DescriptorParams", "TCGEN05TensorCoreIntrinEmitter", "TensorCoreIntrinEmitter",
           "TensorCoreIntrinEmitterWithLadderTransform", "WGMMADescriptorParams", "WGMMATensorCoreIntrinEmitter",
           "compute_gmma_descriptor", "compute_umma_descriptor", "get_swizzle_layout", "make_mma_swizzle_layout",
           "select_wgmma_inst_n"]


class WGMMATensorCoreIntrinEmitter:
    """Placeholder for upstream's hand-written wgmma emitter (see the module docstring)."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            "tilelang.cuda.language.intrinsics.WGMMATensorCoreIntrinEmitter: hand-written wgmma issue is not "
            "provided by this TileLang; write the product as T.gemm(A_shared, B_shared, C_local), which "
            "emits wgmma on sm_90a itself")
