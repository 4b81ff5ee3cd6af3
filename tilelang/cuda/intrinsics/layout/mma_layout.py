"""The bank-conflict-free shared-memory swizzle of mma operand tiles, upstream's way.

Contract:
- ``get_swizzle_layout(row, col, row_size, dtype, swizzle_bytes=None)`` -> ``(col_tile, row,
  swizzled_col)``: element ``(row, col)`` of a tile whose rows hold ``row_size`` elements of
  ``dtype`` (a multiple of 32 bytes). Rows are cut into 16-byte chunks; within each
  ``swizzle_bytes``-wide column tile (default ``min(128, row bytes)``), chunk ``c`` of row ``r``
  moves to chunk ``c ^ ((r % 8) / (8 / chunks))``, so the 8 rows a warp's ldmatrix reads hit 8
  different bank groups. Works on Python ints and on TIR expressions alike.
- ``make_mma_swizzle_layout(shared_buf, is_smooth=False)``: a layout for ``T.annotate_layout``
  with the same purpose: when a row is a multiple of 64 bytes, a swizzled layout whose index map
  is upstream's, ``[*lead, col_tile, row, swizzled_col]`` from ``get_swizzle_layout`` (the CuTe
  form ``Sw<b,4,3>`` over 128-byte column tiles, what ``tilelang.layout.cute`` decodes), else (or
  with ``is_smooth``) row-major. Annotated on a buffer, it asks the compiler for its own mma
  operand swizzle (``tilelang.layout.make_swizzled_layout``: conflict-free for ldmatrix and
  cp.async, lowered natively with 16-byte vectors). For rows of at most 128 bytes both are the
  same physical layout; for wider rows the compiler keeps its whole-row XOR of 16-byte chunks
  (equally conflict-free) rather than upstream's 128-byte column tiles.
"""

from __future__ import annotations

__all__ = ["get_swizzle_layout", "make_mma_swizzle_layout"]

from tilelang.cuda.intrinsics.layout.mma_lane_maps import *  # noqa: E402,F401,F403 - upstream's lane maps live here too
from tilelang.cuda.intrinsics.layout import mma_lane_maps as _lane_maps  # noqa: E402

__all__ += _lane_maps.__all__


def _bits(dtype) -> int:
    from tvm import DataType

    return DataType(str(dtype)).bits


def get_swizzle_layout(row_idx, col_idx, row_size, dtype, swizzle_bytes=None):
    """``(col_tile, row, swizzled_col)`` of element ``(row_idx, col_idx)`` (see the module docstring)."""
    bits = _bits(dtype)
    row_bytes = bits * int(row_size) // 8
    if row_bytes % 32:
        raise ValueError(f"a swizzled row must be a multiple of 32 bytes, got {row_size} x {bits}-bit = {row_bytes} B")
    width = min(128, row_bytes) if swizzle_bytes is None else int(swizzle_bytes)
    vec = 128 // bits                 # elements per 16-byte chunk
    chunks = width // 16              # chunks per swizzle row
    chunk = col_idx // vec
    within = col_idx % vec
    col_tile = chunk // chunks
    swizzled = ((chunk % chunks) ^ ((row_idx % 8) // (8 // chunks))) * vec + within
    return col_tile, row_idx, swizzled


def make_mma_swizzle_layout(shared_buf, is_smooth: bool = False):
    """The swizzled (or, with ``is_smooth``, row-major) layout of ``shared_buf``."""
    from tilelang.layout import SwizzledLayout, make_linear_layout
    from tilelang.layout.layout import placeholders

    shape = list(shared_buf.shape)
    row_bits = int(shape[-1]) * _bits(shared_buf.dtype)
    if is_smooth or row_bits % 512:
        return make_linear_layout(shared_buf)
    variables = placeholders(len(shape))
    i, j = variables[-2:]
    index = [*variables[:-2], *get_swizzle_layout(i, j, int(shape[-1]), shared_buf.dtype)]
    return SwizzledLayout.from_index(shape, index)
