"""Hopper wgmma helpers of upstream's ``wgmma_macro_generator``: the instruction-width choice and
the shared-memory matrix descriptor fields of an operand layout.

Contract:
- ``select_wgmma_inst_n(warp_col_tiles)``: the widest legal wgmma ``N`` (a multiple of 8 in
  ``[8, 256]``) dividing ``warp_col_tiles``, widening past ``gcd(warp_col_tiles, 256)`` only in
  steps of 16 (an ``N % 16 == 8`` extent keeps the gcd, which the integer tables instantiate).
- ``compute_gmma_descriptor(layout, buffer, transposed, micro_size_k=16, region=None)`` ->
  ``WGMMADescriptorParams``: which bank swizzle ``layout`` is (one of
  ``tilelang.layout.make_{full,half,quarter}_bank_swizzled_layout`` of ``buffer``, compared
  structurally) and the descriptor's byte offsets in 16-byte units. The operand is ``[MN, K]``
  (K-major) or, with ``transposed``, ``[K, MN]`` (MN-major). For a swizzle of ``S`` bytes:
  K-major: LBO 1 (unused), SBO = 8 rows x S; MN-major: SBO = 8 K rows x S, LBO = the stride
  between ``S``-byte column slabs (0 when the operand is a single slab). ``region`` (one Range
  per buffer dimension) gives ``slice_byte_offset``, the byte offset of the slice origin.
  A layout that is no bank swizzle raises ``ValueError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from tvm import DataType

from tilelang.layout import SwizzleMode

__all__ = ["WGMMADescriptorParams", "compute_gmma_descriptor", "select_wgmma_inst_n"]


def select_wgmma_inst_n(warp_col_tiles: int) -> int:
    """Widest legal wgmma N tiling ``warp_col_tiles`` (see the module docstring)."""
    n = int(warp_col_tiles)
    floor = gcd(n, 256)
    if n % 16:
        return floor
    for cand in range(256, floor, -16):
        if n % cand == 0:
            return cand
    return floor


@dataclass(frozen=True)
class WGMMADescriptorParams:
    """Descriptor fields of one wgmma shared-memory operand (offsets in 16-byte units)."""

    swizzle_mode: SwizzleMode
    leading_byte_offset: int
    stride_byte_offset: int
    swizzle_atom_elems: int
    k_atom_size: int
    elems_in_bytes: int
    is_k_major: bool
    slice_byte_offset: object = 0


_MAKERS = (("make_full_bank_swizzled_layout", SwizzleMode.SWIZZLE_128B),
           ("make_half_bank_swizzled_layout", SwizzleMode.SWIZZLE_64B),
           ("make_quarter_bank_swizzled_layout", SwizzleMode.SWIZZLE_32B))


def _swizzle_mode(layout, buffer) -> SwizzleMode:
    from tilelang.layout import swizzle

    for name, mode in _MAKERS:
        try:
            reference = getattr(swizzle, name)(buffer)
        except ValueError:
            continue
        if reference.is_equal(layout):
            return mode
    raise ValueError(f"the wgmma operand layout of {buffer.name} is not a 128/64/32-byte bank swizzle of the "
                     f"buffer: {layout}")


def _slice_offset(layout, buffer, region, bits):
    if region is None:
        return 0
    from tilelang.layout.layout import Layout  # noqa: F401 - layouts come from here

    origin = [r.min for r in region]
    physical = layout.map_forward_index(origin)
    extents = layout.get_output_shape()
    flat = 0
    for index, extent in zip(physical[len(physical) - len(extents):], extents):
        flat = flat * extent + index
    offset = flat * bits // 8
    try:
        return int(offset)
    except TypeError:
        import tvm

        return tvm.arith.Analyzer().simplify(offset)


def compute_gmma_descriptor(tl_layout, buffer, transposed: bool, micro_size_k: int = 16,
                            region=None) -> WGMMADescriptorParams:
    """Descriptor fields of ``buffer`` laid out by ``tl_layout`` (see the module docstring)."""
    bits = DataType(str(buffer.dtype)).bits
    elem_bytes = max(bits // 8, 1)
    mode = _swizzle_mode(tl_layout, buffer)
    width = mode.swizzle_byte_size()            # bytes of one swizzled row
    shape = [int(s) for s in buffer.shape[-2:]]
    if region is not None:
        shape = [int(r.extent) for r in region][-2:]
    k_major = not transposed
    group = 8 * width // 16                     # 8 rows of one swizzle atom, in 16-byte units
    atom_elems = width // elem_bytes
    if k_major:
        lbo, sbo = 1, group
    else:
        k_rows, mn = shape
        slabs = -(-mn // atom_elems)
        full_k = int(buffer.shape[-2])
        lbo = 0 if slabs <= 1 else full_k * width // 16
        sbo = group
        del k_rows
    return WGMMADescriptorParams(
        swizzle_mode=mode, leading_byte_offset=int(lbo), stride_byte_offset=int(sbo),
        swizzle_atom_elems=atom_elems, k_atom_size=max(atom_elems // int(micro_size_k), 1),
        elems_in_bytes=elem_bytes, is_k_major=k_major,
        slice_byte_offset=_slice_offset(tl_layout, buffer, region, bits))
