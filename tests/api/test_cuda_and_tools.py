"""``tilelang.cuda.intrinsics`` (upstream's mma swizzle helpers) and ``tilelang.tools.plot_layout``
(issue 17)."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.cuda.intrinsics import get_swizzle_layout, make_mma_swizzle_layout
from tilelang.tools import plot_layout
from tilelang.tools.plot_layout import cell_labels


def test_get_swizzle_layout_is_the_xor_chunk_swizzle():
    # 64 fp16 per row = 128 bytes: 8 chunks of 8 elements; chunk c of row r goes to c ^ (r % 8)
    assert [get_swizzle_layout(r, 24, 64, "float16")[2] for r in range(8)] == [24, 16, 8, 0, 56, 48, 40, 32]
    assert get_swizzle_layout(9, 3, 64, "float16") == (0, 9, 11)
    # 32 fp16 = 64 bytes: 4 chunks, rows pair up; columns past one swizzle width form tiles
    assert [get_swizzle_layout(r, 0, 32, "float16")[2] for r in range(8)] == [0, 0, 8, 8, 16, 16, 24, 24]
    assert get_swizzle_layout(0, 40, 64, "float16", swizzle_bytes=64) == (1, 0, 8)
    for row in range(8):   # a bijection on every row
        assert sorted(get_swizzle_layout(row, c, 64, "int8")[2] for c in range(64)) == list(range(64))
    with pytest.raises(ValueError, match="32 bytes"):
        get_swizzle_layout(0, 0, 8, "float16")


def _copy_through_shared(n, smooth):
    @T.prim_func
    def kernel(A: T.Tensor((128, n), "float16"), B: T.Tensor((128, n), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((128, n), "float16")
            T.annotate_layout({s: make_mma_swizzle_layout(s, is_smooth=smooth)})
            T.copy(A, s)
            T.copy(s, B)

    return kernel


@pytest.mark.parametrize(("n", "smooth", "swizzled"), [(64, False, True), (64, True, False), (16, False, False)])
def test_make_mma_swizzle_layout_annotates_a_shared_tile(n, smooth, swizzled):
    from tilelang.layout import make_linear_layout, make_swizzled_layout

    layout = make_mma_swizzle_layout(_buffer(n), is_smooth=smooth)
    if swizzled:
        # upstream's index map [col_tile, row, col]; for 128-byte rows the same physical layout as
        # the compiler's own mma swizzle, which the annotation asks for
        assert layout.kind == "swizzle"
        ours, width = make_swizzled_layout(_buffer(n)), layout.get_output_shape()[-1]
        for i in range(16):
            for j in range(n):
                tile, row, col = (int(x) for x in layout(i, j))
                assert int(ours(i, j)[0]) == (tile * 128 + row) * width + col
    else:
        assert layout.is_equal(make_linear_layout(_buffer(n)))
    assert "B" in tilelang.lower(_copy_through_shared(n, smooth), "sm_80").source


def _buffer(n):
    from tvm import tirx

    return tirx.decl_buffer((128, n), "float16", name="s", scope="shared.dyn")


def test_plot_layout_labels_and_svg(tmp_path):
    from tilelang.layout import make_gemm_fragment_8x8, make_quarter_bank_swizzled_layout

    text, _ = cell_labels(make_gemm_fragment_8x8())
    assert text[0][:3] == ["T0\nL0", "T0\nL1", "T1\nL0"] and text[1][0] == "T4\nL0"
    text, _ = cell_labels(make_quarter_bank_swizzled_layout(8, 16, 16))
    assert text[0][0] == "0" and text[4][0] == "72" and text[4][8] == "64"   # rows 4-7 swap their halves
    (svg,) = plot_layout(make_gemm_fragment_8x8(), save_directory=tmp_path, name="frag", formats="svg")
    assert svg == tmp_path / "frag.svg" and svg.read_text().count("<rect") == 64 and ">T31<" in svg.read_text()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        with pytest.warns(UserWarning, match="matplotlib"):
            assert plot_layout(make_gemm_fragment_8x8(), save_directory=tmp_path, name="p") == [tmp_path / "p.svg"]
    with pytest.raises(ValueError, match="plot format"):
        plot_layout(make_gemm_fragment_8x8(), save_directory=tmp_path, formats="gif")
