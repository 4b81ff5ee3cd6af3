"""sm_120 (consumer Blackwell) block-scaled warp MMA: declared, refused.

Contract: ``T.mma_gemm_blockscaled(A, B, C, SFA, SFB, ..., k_start=, sf_a_granularity_k=,
sf_b_granularity_k=, sf_layout=None)`` takes upstream's arguments and fails where it is called
(a ``NotImplementedError`` the front end locates), naming the operands: this TileLang generates
no sm_120 ``mma.sync ... kind::mxf4nvf4.block_scale`` code (its targets are sm_80 and sm_90a).
"""

from __future__ import annotations

_WHY = ("this TileLang does not generate sm_120 block-scaled MMA (mma.sync kind::mxf4nvf4.block_scale) "
        "code (targets: sm_80, sm_90a)")


def _names(*operands) -> str:
    return ", ".join(str(getattr(b, "name", getattr(getattr(b, "buffer", None), "name", "?"))) for b in operands)


def mma_gemm_blockscaled(A, B, C, SFA, SFB, transpose_A=False, transpose_B=False, policy=0, clear_accum=False, *,
                         k_start=None, sf_a_granularity_k=None, sf_b_granularity_k=None, sf_layout=None):
    """sm_120 block-scaled MMA; refused (see the module docstring)."""
    raise NotImplementedError(f"T.mma_gemm_blockscaled({_names(A, B, C, SFA, SFB)}): {_WHY}")


__all__ = ["mma_gemm_blockscaled"]
