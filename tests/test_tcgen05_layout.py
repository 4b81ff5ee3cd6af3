"""tcgen05 TMEM fragments and UMMA descriptors (pure layout algebra, no GPU).

Checks ``tilelang.cuda.intrinsics.layout.mma_sm100_layout`` against the PTX data-path layouts
written out by hand, and ``compute_umma_descriptor`` against the canonical K-/MN-major UMMA
offsets of the bank-swizzled shared layouts.
"""

import pytest
import tvm

import tilelang.language as T
from tilelang.cuda.intrinsics.layout.mma_sm100_layout import (TCGEN05Meta, TCGEN05TmemAllocMode, make_tmem_frg_atom,
                                                              make_tmem_frg_c, validate_tcgen05_ts_instruction)
from tilelang.cuda.intrinsics.macro.tcgen05_macro_generator import TensorCoreIntrinEmitter, compute_umma_descriptor
from tilelang.layout import SwizzleMode
from tilelang.layout.swizzle import make_full_bank_swizzled_layout, make_half_bank_swizzled_layout


def _tmem(shape, dtype="float32"):
    return tvm.tirx.decl_buffer(shape, dtype, scope="shared.tmem")


def test_layout_d_is_row_per_datapath():
    frag = make_tmem_frg_c(_tmem((128, 64)), TCGEN05Meta(128, 64, 16, False, False), is_ts=False)
    for m, n in [(0, 0), (5, 7), (127, 63)]:
        assert frag((m, n)) == (m, n)


def test_layout_f_interleaves_16_datapath_groups():
    # 1SM M64: rows 0-15 on datapaths 0-15, rows 16-31 on 32-47, ...; the second M tile of an
    # interleaved allocation fills datapaths 16-31, 48-63, ... of the same columns
    frag = make_tmem_frg_c(_tmem((128, 32)), TCGEN05Meta(64, 32, 16, False, False), is_ts=False)
    assert frag((16, 0)) == (32, 0)
    assert frag((63, 5)) == (111, 5)
    assert frag((64, 0)) == (16, 0)


def test_non_interleaved_second_tile_takes_new_columns():
    atom, stride = make_tmem_frg_atom(1, TCGEN05TmemAllocMode.NON_INTERLEAVED, 64, 32)
    assert stride == 2 and atom.shape == ((16, 4), 32)


def test_half_accumulator_occupies_32_bit_columns():
    frag = make_tmem_frg_c(_tmem((128, 64), "float16"), TCGEN05Meta(128, 64, 16, False, False), is_ts=True)
    assert frag((3, 1)) == (3, 2)


def test_duplicated_2sm_m64_is_rejected():
    from tilelang.cuda.intrinsics.layout.mma_sm100_layout import make_tmem_frg_a

    with pytest.raises(ValueError, match="duplicated 2SM M64"):
        make_tmem_frg_a(_tmem((64, 64), "bfloat16"), TCGEN05Meta(128, 64, 16, False, True))


@pytest.mark.parametrize("meta,ok", [((64, 8, 16, 0, 0), True), ((128, 8, 16, 0, 0), False),
                                     ((256, 64, 16, 0, 1), True), ((256, 48, 16, 0, 1), False)])
def test_ts_instruction_shapes(meta, ok):
    if ok:
        validate_tcgen05_ts_instruction(TCGEN05Meta.from_ffi(meta), T.bfloat16, False)
    else:
        with pytest.raises(ValueError, match="must be a multiple of"):
            validate_tcgen05_ts_instruction(TCGEN05Meta.from_ffi(meta), T.bfloat16, False)


@pytest.mark.parametrize("maker,mode,sbo", [(make_full_bank_swizzled_layout, SwizzleMode.SWIZZLE_128B, 64),
                                            (make_half_bank_swizzled_layout, SwizzleMode.SWIZZLE_64B, 32)])
def test_umma_descriptor_k_major(maker, mode, sbo):
    buf = tvm.tirx.decl_buffer((128, 64), "float16", scope="shared")
    p = compute_umma_descriptor(maker(buf), buf, transposed=False)
    assert (p.swizzle_mode, p.stride_byte_offset, p.is_k_major) == (mode, sbo, True)


def test_umma_descriptor_slice_offset():
    buf = tvm.tirx.decl_buffer((128, 128), "float16", scope="shared")
    region = [tvm.ir.Range.from_min_extent(0, 128), tvm.ir.Range.from_min_extent(64, 64)]
    p = compute_umma_descriptor(make_full_bank_swizzled_layout(buf), buf, False, region=region)
    assert p.slice_byte_offset == 128 * 128     # the second 64-column slab of 128 rows x 128 bytes


def test_operand_regions_reject_partial_atoms():
    em = TensorCoreIntrinEmitter(a_dtype=T.bfloat16, b_dtype=T.bfloat16, accum_dtype=T.float32,
                                 block_row_warps=1, block_col_warps=1, warp_row_tiles=128, warp_col_tiles=64,
                                 chunk=32)
    em.meta = (128, 64, 16, 0, 0)

    def reg(shape, extents, dtype="bfloat16", scope="shared"):
        buf = tvm.tirx.decl_buffer(shape, dtype, scope=scope)
        return tvm.tirx.BufferRegion(buf, [tvm.ir.Range.from_min_extent(0, e) for e in extents])

    a, b, c = reg((128, 32), (128, 32)), reg((32, 64), (32, 64)), reg((128, 64), (128, 64), "float32", "shared.tmem")
    em.validate_tcgen05_operand_regions(a, b, c, is_ts=False)
    with pytest.raises(AssertionError, match="A K extent 24"):
        em.validate_tcgen05_operand_regions(reg((128, 32), (128, 24)), b, c, is_ts=False)
