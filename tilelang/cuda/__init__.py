"""``tilelang.cuda``: CUDA-specific helpers under upstream's module path.

Provided: ``tilelang.cuda.intrinsics`` (``get_swizzle_layout``, ``make_mma_swizzle_layout``, also
as ``tilelang.cuda.intrinsics.layout.mma_layout``). Upstream's ``TensorCoreIntrinEmitter`` macro
generators, ``cuda.language`` and ``cuda.op`` (its per-instruction gemm lowerings) have no
counterpart: ``T.gemm`` chooses and emits mma / wgmma itself (tilelang/transform).
"""

from tilelang.cuda import intrinsics  # noqa: F401

__all__ = ["intrinsics"]
