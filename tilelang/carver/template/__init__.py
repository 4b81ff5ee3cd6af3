"""``tilelang.carver.template``: hardware-aware tile configurations for common operators.

    template = MatmulTemplate(M=4096, N=4096, K=4096, in_dtype="float16", out_dtype="float16",
                              accum_dtype="float32").with_arch(CUDA("cuda"))
    template.equivalent_function()      # the operator as a TIR PrimFunc (reference semantics)
    for hint in template.recommend_hints(topk=10): hint.block, hint.warp, hint.rstep, ...

Contract: a template describes one operator by its shapes and dtypes (a dataclass); after
``with_arch`` it recommends ``topk`` ``roller.Hint``s, best first, from the device facts of
``tilelang.carver.arch`` (shared memory per block and per SM, register file, SM count, memory
bandwidth and peak throughput). Provided: ``MatmulTemplate`` (see ``matmul``) and
``FlashAttentionTemplate`` (see ``flashattention``); on sm_90 both rank by the calibrated model of
our generated kernels (``tilelang.carver.cost_model``). Kernels of any other shape:
``tilelang.carver.recommend`` (roofline + occupancy over a factory's tile parameters).
"""

from tilelang.carver.template.base import BaseTemplate
from tilelang.carver.template.flashattention import FlashAttentionTemplate
from tilelang.carver.template.matmul import MatmulTemplate

__all__ = ["BaseTemplate", "FlashAttentionTemplate", "MatmulTemplate"]
