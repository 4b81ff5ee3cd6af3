"""``GemmMMASm70``: Volta's mma.sync (m8n8k4 quad-pair shapes)."""

from tilelang.cuda.op.gemm.gemm_mma import GemmMMA


class GemmMMASm70(GemmMMA):
    intrin_emitter_cls = None   # no emitter of ours for Volta's m8n8k4
