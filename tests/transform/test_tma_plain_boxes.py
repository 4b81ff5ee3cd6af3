"""TMA boxes for staged tiles no wgmma reads (tma.box_layout): a warp-specialised loop's producer
loads a packed tile in ``make_swizzled_layout`` (rows of 32, 64 or 128 bytes: the one slab a box
of that swizzle writes) or a row-major tile (one unswizzled box) with TMA, so such a loop (the
dequantising GEMMs of upstream's dequantize_gemm examples) is warp-specialised."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.layout import SharedLayout
from tilelang.transform.tma import box_layout


@pytest.mark.parametrize("shape,elem,swizzle,slab,plain,want", [
    ((128, 64), 2, True, True, False, (64, True)),      # a wgmma operand: its slabs
    ((128, 192), 2, True, True, False, (64, True)),
    ((128, 64), 1, True, False, True, (64, True)),      # packed uint8, 64-byte rows, swizzled: one slab
    ((128, 128), 1, True, False, True, (128, True)),
    ((64, 32), 2, False, False, True, (32, False)),     # row-major: one plain box
    ((128, 64), 1, True, False, False, None),           # not for a store or a head (plain=False)
    ((128, 256), 1, True, False, True, None),           # 256-byte swizzled rows: not one slab
    ((64, 512), 1, False, False, True, None),           # wider than a box
    ((64, 12), 1, False, False, True, None),            # rows not a multiple of 16 bytes
])
def test_box_layout(shape, elem, swizzle, slab, plain, want):
    got = box_layout(SharedLayout(shape, elem, swizzle, slab), "X", plain)
    if want is None:
        assert isinstance(got, str) and "'X'" in got
    else:
        assert got == want


def dequant_gemm(M=512, N=512, K=512, bm=128, bn=128, bk=128, swizzled=True):
    """C = A @ dequant(B)^T with B packed two 4-bit values per byte (a toy dequantisation)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((N, K // 2), T.uint8), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.bfloat16)
            B_s = T.alloc_shared((bn, bk // 2), T.uint8)
            B_dq = T.alloc_shared((bn, bk), T.bfloat16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            if swizzled:
                T.annotate_layout({B_s: tilelang.layout.make_swizzled_layout(B_s)})
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk // 2], B_s)
                for i, j in T.Parallel(bn, bk):
                    B_dq[i, j] = T.Cast(T.bfloat16, (B_s[i, j // 2] >> ((j % 2) * 4)) & 15)
                T.gemm(A_s, B_dq, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("swizzled", [True, False], ids=["swizzled", "row_major"])
def test_packed_tile_loop_is_warp_specialised_with_tma(swizzled):
    art = tilelang.lower(dequant_gemm(swizzled=swizzled), "sm_90a")
    src = art.source
    assert "tl::setmaxnreg_dec" in src and src.count("tl::tma_load_2d") == 3   # A: two slabs, B_s: one box
    maps = {m["dtype"]: m for m in art.tensormaps}
    assert maps["uint8"]["box"] == [64, 128] and maps["uint8"]["swizzle"] == (64 if swizzled else 0)
    assert maps["bfloat16"]["swizzle"] == 128
