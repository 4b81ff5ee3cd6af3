"""tilelang.layout.cute: CuTe layout algebra (pure Python, CPU)."""

import pytest
import tvm
from tvm import tirx

from tilelang.layout import Layout, cute, make_full_bank_swizzled_layout


def _same(a, b):
    return tvm.ir.structural_equal(a, b)


def test_layout_basics_and_str_parse():
    L = cute.make_layout((4, 8), stride=(8, 1))
    assert (L.shape, L.stride, cute.rank(L), cute.size(L)) == ((4, 8), (8, 1), 2, 32)
    assert str(L) == "(4,8):(8,1)" and _same(cute.Layout.parse(str(L)), L)
    assert L(5) == 9 and L((1, 1)) == 9 and isinstance(L(5), int)
    assert not _same(cute.make_layout(4, stride=1), cute.make_layout((4,), stride=(1,)))
    assert str(cute.Layout.parse("(128):(1)")) == "(128):(1)"
    assert str(cute.ScaledBasis(2, (1, 0))) == "2@0@1"
    assert cute.IntTuple.parse("2@0@1").value == cute.ScaledBasis(2, (1, 0))
    with pytest.raises(ValueError, match="cannot parse"):
        cute.Layout.parse("(4,8)")


def test_default_stride_is_compact_and_size1_modes_get_stride0():
    assert cute.make_layout((4, 8)).stride == (1, 4)
    assert cute.make_layout((1, 1, 2, 4)).stride == (0, 0, 1, 2)
    assert cute.make_row_major_layout((2, (2, 2))).stride == (4, (2, 1))


def test_int_tuple_arithmetic_and_basis_coordinates():
    assert cute.to_python(cute.from_python([2, 3]) + cute.from_python([10])) == (12, 3)
    assert cute.to_python(cute.from_python(cute.E(0)) + cute.from_python(cute.E(1))) == (1, 1)
    ident = cute.make_identity_layout((2, (2, 2)))
    assert [ident(c) for c in range(8)] == [(c % 2, (c // 2 % 2, c // 4)) for c in range(8)]


def test_dynamic_terms_stay_minimal_primexprs():
    n = tirx.Var("n", "int32")
    assert _same(cute.product((n, 4)), n * 4)
    assert _same(cute.make_layout((n, 4), stride=(1, n))((2, 1)), 2 + n)


@pytest.mark.parametrize("a,b", [(((4, 3), (3, 1)), ((6, 2), (2, 1))), (((4, 6, 8), (1, 4, 7)), ((6,), (1,))),
                                 (((8, 8), (8, 1)), (((2, 2, 2), (2, 2, 2)), ((1, 16, 4), (8, 2, 32))))])
def test_composition_is_function_composition(a, b):
    A, B = cute.make_layout(*a), cute.make_layout(*b)
    R = cute.composition(A, B)
    assert cute.size(R) == cute.size(B)
    assert all(R(i) == A(B(i)) for i in range(cute.size(B)))


def test_inverses_complement_and_products():
    assert str(cute.coalesce(cute.make_layout(((2, 2), (2, 2)), stride=((1, 4), (8, 32))))) == "(2,4,2):(1,4,32)"
    L = cute.make_layout((2, 4, 6), stride=(4, 1, 8))
    inv = cute.right_inverse(L)
    assert all(L(inv(i)) == i for i in range(cute.size(inv)))
    assert str(cute.left_inverse(cute.make_layout(8, stride=2))) == "(2,8):(0,1)"
    assert str(cute.complement(cute.make_layout(4, stride=1), 24)) == "6:4"
    assert str(cute.logical_divide(cute.make_layout(128, stride=4), cute.make_layout(8))) == "(8,16):(4,32)"
    assert str(cute.tiled_product(cute.make_layout(3, stride=32), cute.make_layout(128))) == "(3,32,4):(32,1,96)"
    assert str(cute.blocked_product(cute.make_layout((2, 5), stride=(5, 1)), cute.make_layout((3, 4)))) == \
        "((2,3),(5,4)):((5,10),(1,30))"
    with pytest.raises(ValueError, match="rank-1"):
        cute.complement(cute.make_layout((4, 8), stride=(tirx.Var("s", "int32"), 1)), 1024)


def test_restrict_and_coshape():
    off, sub = cute.restrict(cute.make_layout((64, 256), (256, 1)),
                             [tvm.ir.Range.from_min_extent(0, 64), tvm.ir.Range.from_min_extent(64, 64)])
    assert off == 64 and str(sub) == "(64,64):(256,1)"
    with pytest.raises(tvm.error.InternalError):
        cute.restrict(cute.make_layout((64, 256)), [tvm.ir.Range.from_min_extent(0, 64)])
    F = cute.Layout.parse("((16,4),32):((1@0,32@0),1@1)")
    assert cute.coshape(F) == (112, 32) and cute.cosize(F) == 112 * 32


def test_from_tilelang_decoders():
    assert str(cute.Layout.from_tilelang(Layout((16, 128), lambda i, j: i * 128 + j))) == "(16,128):(128,1)"
    assert cute.Layout.from_tilelang(Layout((8, 8), lambda i, j: i * j)) is None
    hier = cute.Layout.from_tilelang_hierarchical(Layout((8, 16), lambda i, j: [i, (j // 4) * 8 + j % 4]))
    assert str(hier) == "(8,(4,4)):(1@0,(1@1,8@1))"
    assert cute.Layout.from_tilelang_hierarchical(Layout((4, 4), lambda i, j: [i + j, j])) is None
    buf = tirx.decl_buffer((64, 512), "float16", name="A", scope="shared")
    mode = cute.ComposedLayout.from_tilelang(make_full_bank_swizzled_layout(buf), buf)
    assert str(mode.swizzle) == "Sw<3,4,3>" and mode.layout.shape == (64, (128, 8))
    elem = cute.ComposedLayout.from_tilelang(make_full_bank_swizzled_layout(buf))
    assert (elem.swizzle.b_bits, elem.swizzle.m_base, elem.swizzle.s_shift) == (3, 3, 3)
    n = tirx.Var("n", "int32")
    with pytest.raises(ValueError, match="must be constant"):
        cute.ComposedLayout.from_tilelang(Layout((n, 8), lambda i, j: i * 8 + j))


def test_composed_layout_reproduces_the_tilelang_addresses():
    def addr(i, j):
        return 4096 + (j % 8) + ((i % 8) ^ ((j // 8) % 8)) * 8 + i * 64

    mode = cute.ComposedLayout.from_tilelang(Layout((8, 64), addr))
    assert mode.offset == 4096
    assert all(mode((i, j)) == addr(i, j) for i in range(8) for j in range(64))
