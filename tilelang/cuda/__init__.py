"""``tilelang.cuda``: CUDA-specific helpers under upstream's module path.

Provided: ``tilelang.cuda.intrinsics`` (``get_swizzle_layout``, ``make_mma_swizzle_layout``, also
as ``tilelang.cuda.intrinsics.layout.mma_layout``; the mma lane maps in ``layout.utils``), the
emitters of ``tilelang.cuda.intrinsics.macro`` (``TensorCoreIntrinEmitter``: hand-written GEMMs
with explicit ldmatrix / mma.sync steps; the wgmma descriptor helpers) and ``tilelang.cuda.op.gemm``
(upstream's implementation classes, for its registry). ``T.gemm`` itself chooses and emits
mma / wgmma in tilelang/transform; ``cuda.language`` re-exports the dialect and names the emitters.
"""

from tilelang.cuda import intrinsics  # noqa: F401

__all__ = ["intrinsics"]
