"""``GemmMMASm75``: mma.sync with Turing's shapes (m16n8k8, m8n8k16, m8n8k32)."""

from tilelang.cuda.intrinsics.macro.mma_sm75_macro_generator import TensorCoreIntrinEmitterSM75
from tilelang.cuda.op.gemm.gemm_mma import GemmMMA


class GemmMMASm75(GemmMMA):
    intrin_emitter_cls = TensorCoreIntrinEmitterSM75
