"""Upstream's CUDA gemm implementation classes, registered in ``tilelang.tileop.gemm.registry``.

Each class names an instruction family and the emitter class that family's hand-written
kernels use (``intrin_emitter_cls``); ``T.gemm`` itself is lowered by ``tilelang.transform``,
which makes the same choice by target: FMA (``cuda.fma``), mma.sync with the sm_70 / sm_75 /
sm_80+ shapes (``cuda.mma``), wgmma on sm_90 (``cuda.wgmma``).
"""

from tilelang.cuda.op.gemm.gemm_fma import GemmFMA
from tilelang.cuda.op.gemm.gemm_mma import GemmMMA
from tilelang.cuda.op.gemm.gemm_mma_sm70 import GemmMMASm70
from tilelang.cuda.op.gemm.gemm_mma_sm75 import GemmMMASm75
from tilelang.cuda.op.gemm.gemm_wgmma import GemmWGMMA
from tilelang.tileop.gemm.registry import register_gemm_impl


def _sm(target) -> int:
    arch = str(target.attrs.get("arch", "")) if hasattr(target, "attrs") else ""
    digits = "".join(ch for ch in arch.split("_")[-1] if ch.isdigit())
    return int(digits) if digits else 0


register_gemm_impl("cuda.fma", "cuda.fma", lambda t: t.kind.name == "cuda", GemmFMA)
register_gemm_impl("cuda.mma.sm70", "cuda.mma", lambda t: t.kind.name == "cuda" and _sm(t) == 70, GemmMMASm70)
register_gemm_impl("cuda.mma.sm75", "cuda.mma", lambda t: t.kind.name == "cuda" and _sm(t) == 75, GemmMMASm75)
register_gemm_impl("cuda.mma", "cuda.mma", lambda t: t.kind.name == "cuda" and _sm(t) >= 80, GemmMMA)
register_gemm_impl("cuda.wgmma", "cuda.wgmma", lambda t: t.kind.name == "cuda" and _sm(t) == 90, GemmWGMMA)

__all__ = ["GemmFMA", "GemmMMA", "GemmMMASm70", "GemmMMASm75", "GemmWGMMA"]
