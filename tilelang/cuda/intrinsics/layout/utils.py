"""Per-lane element maps of the mma.sync register fragments (PTX ISA "Matrix fragments for
mma.m16n8k*"), the arithmetic the ``TensorCoreIntrinEmitter`` family builds its addresses from.

Contract (``g = lane // 4``, ``t = lane % 4``, ``P = 32 // bits`` elements per 32-bit register,
``W = 128 // bits`` elements per 16-byte ldmatrix row):
- ``mma_store_index_map(lane, e)`` -> ``(row, col)`` of accumulator element ``e`` (0..7) of a
  16x16 warp tile held as two m16n8 halves: ``e // 4`` picks the 8 columns, ``e % 4`` is the
  m16n8 register order (rows ``g`` / ``g + 8``, columns ``2t``, ``2t + 1``).
- ``mma_store_index_map_fp64(lane, e)`` -> the same for an 8x8 tile of two registers (m8n8).
- ``get_ldmatrix_offset(matrix, lane, col, stride, dtype, transposed)`` -> ``(row, col)`` in the
  stored operand tile of the 16-byte row lane ``lane`` hands to ``ldmatrix.x4`` so that register
  ``r`` of the result is the mma fragment's register ``r`` (A: rows ``8 * (r % 2)``, K block
  ``r // 2``; B (two n8 halves): N block ``r // 2``, K block ``r % 2``). Transposed storage uses
  ``ldmatrix.trans`` (16-bit elements only).
- ``mma_load_a_index(lane, e, bits)`` / ``mma_load_b_index(lane, e, bits, n_dim)`` -> ``(s, k)``
  of operand element ``e`` (spatial row, reduction column) for the lane: the per-element loads
  used where ldmatrix cannot be (8/32-bit transposed operands) and the T.Fragment layouts.
- ``get_mma_micro_size(dtype)`` -> ``(16, 16, 16)``, or ``(16, 16, 32)`` for 8-bit inputs.
"""

from __future__ import annotations

__all__ = ["get_ldmatrix_offset", "get_mma_micro_size", "mma_load_a_index", "mma_load_b_index",
           "mma_store_index_map", "mma_store_index_map_fp64"]


def _bits(dtype) -> int:
    from tvm import DataType

    return DataType(str(dtype)).bits


def mma_store_index_map(lane, e):
    g, t = lane // 4, lane % 4
    return g + 8 * ((e % 4) // 2), 8 * (e // 4) + 2 * t + e % 2


def mma_store_index_map_fp64(lane, e):
    return lane // 4, 2 * (lane % 4) + e % 2


def get_ldmatrix_offset(matrix: str, row_idx, col_idx, stride, dtype="float16", transposed: bool = False):
    """Where lane ``row_idx`` points its ldmatrix row (``col_idx`` is added to the column;
    ``stride`` is accepted for upstream's signature: offsets are returned as (row, col))."""
    del stride
    lane = row_idx
    w = 128 // _bits(dtype)
    if matrix not in ("A", "B"):
        raise ValueError(f"matrix must be 'A' or 'B', got {matrix!r}")
    if transposed == (matrix == "A") and _bits(dtype) != 16:
        raise ValueError(f"ldmatrix can transpose only 16-bit elements, got {dtype}")
    lo, mid, hi = lane % 8, (lane // 8) % 2, lane // 16
    if matrix == "A":
        if not transposed:               # (M, K) storage: row = lane % 16, K block = lane // 16
            return lane % 16, hi * w + col_idx
        return lo + 8 * hi, 8 * mid + col_idx        # (K, M) storage, .trans
    if transposed:                       # (N, K) storage: N block = lane // 16, K block = mid
        return lo + 8 * hi, mid * w + col_idx
    return lo + 8 * mid, 8 * hi + col_idx            # (K, N) storage, .trans


def mma_load_a_index(lane, e, bits):
    p = 32 // bits
    reg, within = e // p, e % p
    return lane // 4 + 8 * (reg % 2), (reg // 2) * 4 * p + (lane % 4) * p + within


def mma_load_b_index(lane, e, bits, n_dim=16):
    p = 32 // bits
    half, rest = e // (2 * p), e % (2 * p)
    reg, within = rest // p, rest % p
    return 8 * half + lane // 4, reg * 4 * p + (lane % 4) * p + within


def get_mma_micro_size(dtype="float16"):
    """``(micro_size_x, micro_size_y, micro_size_k)`` of the emitter's mma tile for ``dtype``."""
    return (16, 16, 32) if _bits(dtype) == 8 else (16, 16, 16)
