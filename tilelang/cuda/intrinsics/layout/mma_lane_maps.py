"""Where each element of an mma.sync operand tile lives in the warp: PTX's fragment layouts as
index maps, under upstream's names (re-exported by ``mma_layout``).

Contract (``t`` a lane 0..31, ``g = t // 4``, ``q = t % 4``; ``p = 32 / bits`` elements per
32-bit register, so a tile row holds ``4p`` elements per k-step):
- ``shared_16x{4p}_to_mma_a_32x{2p}_layout(i, j)`` -> ``(lane, local)``: A tile ``[m=16, k=4p]``
  (``sr``: spatial rows, reduction columns). Register ``r`` of a lane holds row ``g + 8*(r % 2)``,
  columns ``(r // 2)*4p + q*p + [0, p)``; ``local = r*p + j % p``.
- ``shared_16x{4p}_to_mma_b_32x{2p}_layout(i, j)``: B tile ``[n=16, k=4p]`` (two n8 halves);
  register ``r`` holds row ``g + 8*(r // 2)``, columns ``(r % 2)*4p + q*p + [0, p)``.
- ``*_trans`` / ``*_rs_*``: the same for the operand stored transposed (``[k, m]`` / ``[k, n]``).
- ``mma_load_a_32x32_to_shared_16x64_layout(lane, local)`` -> ``(m, k)``: the inverse map of the
  4-bit (e2m1) ``m16n8k64`` A operand: 8 elements per register, registers ordered (m half, k
  half) — CuTe's SM120 A layout. ``mma_load_b_32x16_to_shared_8x64_layout``: its B (``n8``).
All maps work on Python ints and on TIR expressions alike.
"""

from __future__ import annotations

__all__ = [
    "mma_load_a_32x32_to_shared_16x64_layout", "mma_load_b_32x16_to_shared_8x64_layout",
    "shared_16x8_to_mma_32x4_layout_rs_a", "shared_16x8_to_mma_32x4_layout_rs_b",
    "shared_16x8_to_mma_32x4_layout_sr_a", "shared_16x8_to_mma_32x4_layout_sr_b",
    "shared_16x8_to_mma_a_32x4_layout", "shared_16x8_to_mma_a_32x4_layout_trans",
    "shared_16x8_to_mma_b_32x4_layout", "shared_16x8_to_mma_b_32x4_layout_trans",
    "shared_16x16_to_mma_32x8_layout_rs_a", "shared_16x16_to_mma_32x8_layout_rs_b",
    "shared_16x16_to_mma_32x8_layout_sr_a", "shared_16x16_to_mma_32x8_layout_sr_b",
    "shared_16x16_to_mma_a_32x8_layout", "shared_16x16_to_mma_a_32x8_layout_trans",
    "shared_16x16_to_mma_b_32x8_layout", "shared_16x16_to_mma_b_32x8_layout_trans",
    "shared_16x32_to_mma_32x16_layout_rs_a", "shared_16x32_to_mma_32x16_layout_rs_b",
    "shared_16x32_to_mma_32x16_layout_sr_a", "shared_16x32_to_mma_32x16_layout_sr_b",
    "shared_16x32_to_mma_a_32x16_layout", "shared_32x16_to_mma_a_32x16_layout_trans",
    "shared_16x32_to_mma_b_32x16_layout", "shared_32x16_to_mma_b_32x16_layout_trans",
]


def _a_map(p: int):
    def fwd(i, j):
        reg = i // 8 + 2 * (j // (4 * p))
        return 4 * (i % 8) + (j % (4 * p)) // p, reg * p + j % p
    return fwd


def _b_map(p: int):
    def fwd(i, j):
        reg = 2 * (i // 8) + j // (4 * p)
        return 4 * (i % 8) + (j % (4 * p)) // p, reg * p + j % p
    return fwd


def _transposed(fwd):
    def trans(i, j):
        return fwd(j, i)
    return trans


def _named(fn, name: str):
    fn.__name__ = fn.__qualname__ = name
    return fn


shared_16x8_to_mma_a_32x4_layout = _named(_a_map(1), "shared_16x8_to_mma_a_32x4_layout")
shared_16x8_to_mma_b_32x4_layout = _named(_b_map(1), "shared_16x8_to_mma_b_32x4_layout")
shared_16x16_to_mma_a_32x8_layout = _named(_a_map(2), "shared_16x16_to_mma_a_32x8_layout")
shared_16x16_to_mma_b_32x8_layout = _named(_b_map(2), "shared_16x16_to_mma_b_32x8_layout")
shared_16x32_to_mma_a_32x16_layout = _named(_a_map(4), "shared_16x32_to_mma_a_32x16_layout")
shared_16x32_to_mma_b_32x16_layout = _named(_b_map(4), "shared_16x32_to_mma_b_32x16_layout")

shared_16x8_to_mma_a_32x4_layout_trans = _named(_transposed(shared_16x8_to_mma_a_32x4_layout),
                                               "shared_16x8_to_mma_a_32x4_layout_trans")
shared_16x8_to_mma_b_32x4_layout_trans = _named(_transposed(shared_16x8_to_mma_b_32x4_layout),
                                               "shared_16x8_to_mma_b_32x4_layout_trans")
shared_16x16_to_mma_a_32x8_layout_trans = _named(_transposed(shared_16x16_to_mma_a_32x8_layout),
                                                "shared_16x16_to_mma_a_32x8_layout_trans")
shared_16x16_to_mma_b_32x8_layout_trans = _named(_transposed(shared_16x16_to_mma_b_32x8_layout),
                                                "shared_16x16_to_mma_b_32x8_layout_trans")
shared_32x16_to_mma_a_32x16_layout_trans = _named(_transposed(shared_16x32_to_mma_a_32x16_layout),
                                                 "shared_32x16_to_mma_a_32x16_layout_trans")
shared_32x16_to_mma_b_32x16_layout_trans = _named(_transposed(shared_16x32_to_mma_b_32x16_layout),
                                                 "shared_32x16_to_mma_b_32x16_layout_trans")

shared_16x8_to_mma_32x4_layout_sr_a = shared_16x8_to_mma_a_32x4_layout
shared_16x8_to_mma_32x4_layout_sr_b = shared_16x8_to_mma_b_32x4_layout
shared_16x8_to_mma_32x4_layout_rs_a = shared_16x8_to_mma_a_32x4_layout_trans
shared_16x8_to_mma_32x4_layout_rs_b = shared_16x8_to_mma_b_32x4_layout_trans
shared_16x16_to_mma_32x8_layout_sr_a = shared_16x16_to_mma_a_32x8_layout
shared_16x16_to_mma_32x8_layout_sr_b = shared_16x16_to_mma_b_32x8_layout
shared_16x16_to_mma_32x8_layout_rs_a = shared_16x16_to_mma_a_32x8_layout_trans
shared_16x16_to_mma_32x8_layout_rs_b = shared_16x16_to_mma_b_32x8_layout_trans
shared_16x32_to_mma_32x16_layout_sr_a = shared_16x32_to_mma_a_32x16_layout
shared_16x32_to_mma_32x16_layout_sr_b = shared_16x32_to_mma_b_32x16_layout
shared_16x32_to_mma_32x16_layout_rs_a = shared_32x16_to_mma_a_32x16_layout_trans
shared_16x32_to_mma_32x16_layout_rs_b = shared_32x16_to_mma_b_32x16_layout_trans


def mma_load_a_32x32_to_shared_16x64_layout(thread_id, local_id):
    """(lane, local) -> (m, k) of the e2m1 m16n8k64 A operand (see the module docstring)."""
    reg, within = local_id // 8, local_id % 8
    return thread_id // 4 + 8 * (reg % 2), 32 * (reg // 2) + 8 * (thread_id % 4) + within


def mma_load_b_32x16_to_shared_8x64_layout(thread_id, local_id):
    """(lane, local) -> (n, k) of the e2m1 m16n8k64 B operand (``n8``)."""
    reg, within = local_id // 8, local_id % 8
    return thread_id // 4, 32 * reg + 8 * (thread_id % 4) + within
