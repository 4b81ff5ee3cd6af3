"""Upstream's ``tilelang.cuda.intrinsics.macro``: emitter objects whose methods splice warp-level
tensor-core steps (ldmatrix, mma.sync, wgmma descriptors) into a kernel; see each module."""

from tilelang.cuda.intrinsics.macro.mma_macro_generator import (  # noqa: F401
    TensorCoreIntrinEmitter, TensorCoreIntrinEmitterWithLadderTransform)
from tilelang.cuda.intrinsics.macro.mma_sm75_macro_generator import TensorCoreIntrinEmitterSM75  # noqa: F401

__all__ = ["TensorCoreIntrinEmitter", "TensorCoreIntrinEmitterSM75", "TensorCoreIntrinEmitterWithLadderTransform"]
