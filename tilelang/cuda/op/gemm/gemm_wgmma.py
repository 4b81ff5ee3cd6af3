"""``GemmWGMMA``: Hopper's warpgroup gemm (wgmma.mma_async with shared-memory descriptors)."""


class GemmWGMMA:
    inst_name = "cuda.wgmma"
    intrin_emitter_cls = None
