"""``GemmFMA``: the CUDA-core gemm (scalar fused multiply-adds), for any CUDA target."""


class GemmFMA:
    inst_name = "cuda.fma"
    intrin_emitter_cls = None
