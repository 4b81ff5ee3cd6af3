"""``GemmMMA``: the mma.sync gemm of sm_80 and later (m16n8k16 / m16n8k32 / m16n8k8 tf32)."""

from tilelang.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter


class GemmMMA:
    """mma.sync + ldmatrix (what ``T.gemm`` emits through ``tl::gemm_ss`` on sm_80+)."""

    inst_name = "cuda.mma"
    intrin_emitter_cls = TensorCoreIntrinEmitter
