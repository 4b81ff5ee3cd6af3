"""Blackwell tcgen05 MMA helpers of upstream's ``tcgen05_macro_generator``: the UMMA shared-memory
descriptor of an operand layout and the operand contract of the emitter.

Contract:
- ``compute_umma_descriptor(layout, buffer, transposed, micro_size_k=16, region=None)`` ->
  ``TCGEN05DescriptorParams``: CuTe's ``make_umma_desc`` for an operand whose TileLang layout is
  (a swizzle of) an affine map. The layout is decoded once (``cute.ComposedLayout.from_tilelang``);
  ``region`` (one Range per buffer mode; leading modes of extent 1, e.g. a pipeline stage) gives
  ``slice_byte_offset``, the byte offset of the slice origin, and the (MN, K) tile read for the
  offsets. The operand is ``[MN, K]`` (K-major) or with ``transposed`` ``[K, MN]``; LBO / SBO
  are in 16-byte units. A layout that is not UMMA-canonical fails an ``AssertionError`` naming
  the stride at fault.
- ``TensorCoreIntrinEmitter`` (the mma.sync emitter's constructor) with ``meta`` = the instruction
  atom ``(atom_m, atom_n, atom_k, enable_ws, enable_2cta)``: ``tcgen05_meta``,
  ``tcgen05_num_inst_m/n``, ``tcgen05_num_k_atoms``, ``make_mma_store_layout`` (TMEM fragments of
  ``mma_sm100_layout``), and ``validate_tcgen05_operand_regions(A, B, C, is_ts=...)``, which
  asserts that each region's leading modes have extent 1 and its two matrix modes are whole
  atoms at atom-aligned origins. Code generation for sm_100 is not part of this tree.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm

from tilelang.cuda.intrinsics.layout.mma_sm100_layout import (TCGEN05Meta, make_tmem_frg_a, make_tmem_frg_c,
                                                              validate_tcgen05_ts_instruction)
from tilelang.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter as _MMAEmitter
from tilelang.language.dtypes import get_tvm_dtype
from tilelang.layout import SwizzleMode, cute

__all__ = ["TCGEN05DescriptorParams", "TensorCoreIntrinEmitter", "compute_umma_descriptor"]


@dataclass(frozen=True)
class TCGEN05DescriptorParams:
    """UMMA descriptor fields of one shared-memory operand (offsets in 16-byte units)."""

    swizzle_mode: SwizzleMode
    leading_byte_offset: int
    stride_byte_offset: int
    swizzle_atom_elems: int     # elements of one swizzle atom along MN (the whole MN without swizzle)
    k_atom_size: int
    elem_bits: int
    is_k_major: bool
    slice_byte_offset: object = 0


def _leaf_strides(stride) -> list:
    if isinstance(stride, tuple):
        return [x for s in stride for x in _leaf_strides(s)]
    return [stride]


def _drop_unit_leading(tile: cute.Layout) -> cute.Layout:
    """The last two modes of ``tile`` once its leading modes (extent 1) are gone."""
    r = cute.rank(tile)
    if r <= 2:
        return tile
    for i in range(r - 2):
        assert cute.size(tile[i]) == 1, f"UMMA operand leading mode {i} has extent {cute.size(tile[i])}, not 1"
    return cute.make_layout([tile[r - 2], tile[r - 1]])


def compute_umma_descriptor(tl_layout, buffer, transposed: bool, micro_size_k: int = 16,
                            region=None) -> TCGEN05DescriptorParams:
    """UMMA descriptor fields of ``buffer`` laid out by ``tl_layout`` (see the module docstring)."""
    bits = get_tvm_dtype(buffer.dtype).bits
    decoded = cute.ComposedLayout.from_tilelang(tl_layout)
    assert decoded is not None, f"the UMMA operand layout of {buffer.name} is no swizzled affine map: {tl_layout}"
    byte_swizzle = decoded.recast(bits, 8).swizzle
    mode = byte_swizzle.to_swizzle_mode()

    tile, slice_bytes = decoded.layout, 0
    if region is not None:
        origin, tile = cute.restrict(decoded.layout, list(region))
        slice_bytes = origin * bits // 8
        if not isinstance(slice_bytes, int):
            slice_bytes = tvm.arith.Analyzer().simplify(slice_bytes)
    tile = _drop_unit_leading(tile)
    assert cute.rank(tile) == 2, f"the UMMA operand tile of {buffer.name} must be (MN, K), got rank {cute.rank(tile)}"

    mn_i, k_i = (1, 0) if transposed else (0, 1)
    mn_extent = int(cute.size(tile[mn_i]))
    ordered = cute.make_layout([tile[mn_i], tile[k_i]])
    # the (MN, K) map in 16-byte units, as CuTe recasts the tensor to uint128_t
    u128 = cute.ComposedLayout(decoded.swizzle, decoded.offset, ordered).recast(bits, 128)
    mn_mode, k_mode = u128.layout[0], u128.layout[1]

    k_major = not transposed
    found_k_major = min(int(s) for s in _leaf_strides(k_mode.stride)) == 1
    assert found_k_major == k_major, (
        f"the UMMA operand {buffer.name} is {'K' if found_k_major else 'MN'}-major in memory, but "
        f"transposed={transposed} says {'K' if k_major else 'MN'}-major (operands are row-major)")

    atoms = 1 << byte_swizzle.b_bits       # 16-byte units of one swizzle row (1, 2, 4, 8)
    swizzled = mode != SwizzleMode.NONE
    if k_major:     # ((8, m), (2, k)) : ((atoms, SBO), (1, 2))
        mn_div = cute.logical_divide(mn_mode, cute.make_layout(8, 1))
        k_div = cute.logical_divide(k_mode, cute.make_layout(2, 1))
    else:           # ((atoms, m), (8, k)) : ((1, LBO), (atoms, SBO))
        mn_div = cute.logical_divide(mn_mode, cute.make_layout(atoms, 1))
        k_div = cute.logical_divide(k_mode, cute.make_layout(8, 1))
    assert cute.congruent(mn_div.shape, (1, 1)) and cute.congruent(k_div[0].shape, 1), \
        f"the UMMA operand {buffer.name} is not canonical: MN divides as {mn_div.shape}, K as {k_div.shape}"
    mn_inner, mn_outer = (int(s) for s in mn_div.stride)
    k_inner = int(k_div.stride[0])
    if k_major:
        assert mn_inner == atoms, f"not a canonical K-major UMMA layout: 8-row stride {mn_inner} != {atoms}"
        assert not (swizzled and k_inner != 1), f"not a canonical K-major UMMA layout: K stride {k_inner} != 1"
        lbo, sbo = k_inner, mn_outer
    else:
        assert cute.congruent(k_div.shape, (1, 1)), f"the UMMA operand {buffer.name} is not canonical: K divides as {k_div.shape}"
        k_outer = int(k_div.stride[1])
        assert not (swizzled and mn_inner != 1), f"not a canonical MN-major UMMA layout: MN stride {mn_inner} != 1"
        assert k_inner == atoms, f"not a canonical MN-major UMMA layout: K stride {k_inner} != {atoms}"
        lbo, sbo = (mn_outer, k_outer) if swizzled else (k_outer, mn_outer)

    if swizzled:
        atom_elems = mode.swizzle_byte_size() * 8 // bits
    else:
        atom_elems = mn_extent
    return TCGEN05DescriptorParams(
        swizzle_mode=mode, leading_byte_offset=int(lbo), stride_byte_offset=int(sbo), swizzle_atom_elems=atom_elems,
        k_atom_size=max(atom_elems // int(micro_size_k), 1), elem_bits=bits, is_k_major=k_major,
        slice_byte_offset=slice_bytes)


class TensorCoreIntrinEmitter(_MMAEmitter):
    """The tcgen05 emitter's layout and operand-contract half (see the module docstring)."""

    meta: tuple = ()
    a_shared_layout = None
    b_shared_layout = None

    def _assign_a_shared_layout(self, layout):
        self.a_shared_layout = layout
        return self

    def _assign_b_shared_layout(self, layout):
        self.b_shared_layout = layout
        return self

    @property
    def tcgen05_meta(self) -> TCGEN05Meta:
        assert len(self.meta) == 5, "the tcgen05 instruction atom is not chosen yet (set emitter.meta)"
        return TCGEN05Meta.from_ffi(self.meta)

    @property
    def tcgen05_num_inst_m(self) -> int:
        return self.block_row_warps * self.warp_row_tiles // self.tcgen05_meta.atom_m_per_cta

    @property
    def tcgen05_num_inst_n(self) -> int:
        return self.block_col_warps * self.warp_col_tiles // self.tcgen05_meta.atom_n

    @property
    def tcgen05_num_k_atoms(self) -> int:
        return self.chunk // self.micro_size_k

    def make_mma_store_layout(self, tmem_buf, *, operand: str = "C", is_ts: bool = False):
        """The TMEM layout (``[datapath, column]`` form) of operand ``A`` (TS) or ``C``."""
        assert str(tmem_buf.scope()) == "shared.tmem", f"{tmem_buf.name} must live in tensor memory (shared.tmem)"
        assert operand in ("A", "C"), f"a tcgen05 TMEM operand is A or C, got {operand}"
        if operand == "A" or is_ts:
            validate_tcgen05_ts_instruction(self.tcgen05_meta, self.a_dtype, self.a_transposed)
        if operand == "A":
            return make_tmem_frg_a(tmem_buf, self.tcgen05_meta).to_tilelang()
        return make_tmem_frg_c(tmem_buf, self.tcgen05_meta, is_ts=is_ts).to_tilelang()

    def validate_tcgen05_operand_regions(self, A_region, B_region, C_region, *, is_ts: bool) -> None:
        """Assert the operand contract (see the module docstring) before any address math."""
        meta = self.tcgen05_meta
        if is_ts:
            validate_tcgen05_ts_instruction(meta, self.a_dtype, self.a_transposed)
        if meta.enable_2cta:
            assert self.tcgen05_num_inst_n == 1, (
                f"2CTA tcgen05 MMA supports one instruction along N; got N="
                f"{self.block_col_warps * self.warp_col_tiles} with instruction N={meta.atom_n}")
        an = tvm.arith.Analyzer()

        def check(region, operand, transposed, mn_atom, k_atom, mn_name, k_name):
            ranges = list(region.region)
            assert len(ranges) >= 2, f"tcgen05 MMA {operand} needs at least two modes, got rank {len(ranges)}"
            for axis, r in enumerate(ranges[:-2]):
                assert an.can_prove_equal(r.extent, 1), (
                    f"tcgen05 MMA {operand} leading mode {axis} must have unit extent; the last two modes are "
                    "the matrix modes")
            rows, cols = ranges[-2:]
            mn, k = (cols, rows) if transposed else (rows, cols)
            for name, r, atom in ((mn_name, mn, mn_atom), (k_name, k, k_atom)):
                assert an.can_prove_equal(r.min % atom, 0), (
                    f"tcgen05 MMA {operand} {name} origin {r.min} must be aligned to the selected atom {atom}")
                assert an.can_prove_equal(r.extent % atom, 0), (
                    f"tcgen05 MMA {operand} {name} extent {r.extent} must be a multiple of the selected atom {atom}")

        check(A_region, "A", self.a_transposed, meta.atom_m_per_cta, meta.atom_k, "M", "K")
        # B is [K, N] unless transpose_B; a two-CTA instruction reads N/2 of it per CTA
        check(B_region, "B", not self.b_transposed, meta.b_atom_n_per_cta, meta.atom_k, "N", "K")
        check(C_region, "C", False, meta.atom_m_per_cta, meta.atom_n, "M", "N")
