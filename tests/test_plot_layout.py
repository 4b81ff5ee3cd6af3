"""Layout pictures: ``tilelang.tools.plot_layout`` (PNG through matplotlib, SVG by hand), the
``layout_render`` grids they draw, and upstream's ``examples/plot_layout`` run unchanged."""

from __future__ import annotations

import re
import runpy
import struct
from pathlib import Path

import pytest

import tilelang.language as T
from tilelang.layout import make_full_bank_swizzled_layout, make_gemm_fragment_8x8
from tilelang.layout.axes import mma_accumulator
from tilelang.tools import layout_render, plot_layout
from tilelang.tools.plot_layout import cell_labels, layout_picture

UPSTREAM = Path("/work/shared/conformance/upstream/examples/plot_layout")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple:
    """(width, height) from the IHDR chunk, after checking the signature."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def svg_fills(text: str) -> list:
    return re.findall(r'<rect [^>]*fill="(#[0-9a-f]{6})"', text)


def test_png_is_a_valid_picture_matplotlib_reads_back(tmp_path):
    image = pytest.importorskip("matplotlib.image")
    (png,) = plot_layout(make_gemm_fragment_8x8(), save_directory=tmp_path, name="frag", formats="png")
    assert png == tmp_path / "frag.png"
    width, height = png_size(png)
    pixels = image.imread(png)
    assert pixels.shape[:2] == (height, width) and width >= 400 and height >= 400
    # not a blank page: many colours (one per thread of the warp)
    assert len({tuple(p) for p in pixels.reshape(-1, pixels.shape[2])[::97].tolist()}) > 16


def test_svg_has_one_rect_per_cell_coloured_by_thread(tmp_path):
    frag = make_gemm_fragment_8x8()
    (svg,) = plot_layout(frag, save_directory=tmp_path, name="frag", formats="svg")
    fills = svg_fills(svg.read_text())
    assert len(fills) == 64 == svg.read_text().count("<rect")
    _, threads = cell_labels(frag)
    by_thread = {}
    for colour, tid in zip(fills, [t for row in threads for t in row]):
        by_thread.setdefault(tid, set()).add(colour)
    assert len(by_thread) == 32 and all(len(c) == 1 for c in by_thread.values())   # one colour per thread
    assert len({c for cs in by_thread.values() for c in cs}) == 32                   # 32 lanes, 32 colours
    assert ">T31<" in svg.read_text() and ">L1<" in svg.read_text()


def test_axis_fragments_draw_the_threads_their_owners_table_gives():
    frag = mma_accumulator(32, 32, 2, 2, 128)
    cells = layout_render.fragment_cells(frag.shape, frag.num_threads,
                                         [(a.kind, a.extent, a.stride, a.dim, a.coef) for a in frag.axes])
    owners = frag.owners()
    for tid in (0, 5, 37, 127):
        for reg in range(frag.local_size):
            flat = int(owners[tid, reg])
            threads, local = cells[flat // 32][flat % 32]
            assert threads == (tid,) and local == reg
    grid = layout_picture(frag, "C_local")
    assert grid.rows == grid.cols == 32 and grid.labels[0][0] == "T0\nL0" and "128 threads" in grid.title
    by_warp = layout_picture(frag, "C_local", by_warp=True)
    assert by_warp.fills[0][0] != by_warp.fills[16][0]      # warp 0 above warp 1 (warp_m = 2)


def test_replicated_fragment_lists_every_thread():
    base = T.Fragment([4, 4], forward_thread_fn=lambda i, j: i * 4 + j, forward_index_fn=lambda i, j: 0)
    text, _ = cell_labels(base.replicate(2))
    assert text[0][1] == "T1/17\nL0" and text[3][3] == "T15/31\nL0"
    # no register map: each thread numbers its elements in row-major order (as the compiler does)
    text, _ = cell_labels(T.Fragment((4, 4), forward_thread_fn=lambda i, j: i))
    assert text[1] == ["T1\nL0", "T1\nL1", "T1\nL2", "T1\nL3"]


def test_layouts_draw_output_indices_and_swizzle_chunks(tmp_path):
    text, flat = cell_labels(T.Layout([4, 4], lambda i, j: (j, i)))
    assert text[0] == ["0", "4", "8", "12"] and flat[1][0] == 1
    grid = layout_picture(make_full_bank_swizzled_layout(8, 64, 16), "sw")
    # row 1 of a full-bank swizzle swaps neighbouring 8-element chunks: the colours follow the data
    assert grid.labels[1][0] == "72" and grid.fills[1][0] == grid.fills[0][8]
    (svg,) = plot_layout(make_full_bank_swizzled_layout(8, 64, 16), save_directory=tmp_path, name="sw", formats="svg")
    assert len(svg_fills(svg.read_text())) == 8 * 64


def test_without_matplotlib_png_becomes_svg_with_a_warning(tmp_path, monkeypatch):
    def missing(*args, **kwargs):
        raise ImportError("No module named 'matplotlib'")

    monkeypatch.setattr(layout_render, "save_matplotlib", missing)
    with pytest.warns(UserWarning, match="matplotlib"):
        written = plot_layout(make_gemm_fragment_8x8(), save_directory=tmp_path, name="p", formats="png")
    assert written == [tmp_path / "p.svg"] and written[0].read_text().startswith("<svg")


@pytest.mark.skipif(not UPSTREAM.is_dir(), reason="upstream's examples are not checked out here")
def test_upstream_layout_transform_example_runs_unchanged(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(UPSTREAM / "layout_transform.py"), run_name="__main__")
    names = sorted(p.name for p in (tmp_path / "tmp").iterdir())
    assert names == ["interleave_8x4.pdf", "reshape_3d_to_2d.pdf", "transpose_4x4.pdf", "transpose_8x8.pdf"]
    assert all((tmp_path / "tmp" / n).read_bytes()[:5] == b"%PDF-" for n in names)
    assert "Transpose 4x4:" in capsys.readouterr().out


def test_upstream_view_and_grid_shape_options():
    layout = T.Layout([2, 4, 8], lambda i, j, k: (k, i * 4 + j))
    out = layout_picture(layout, "r3", view="output")
    assert out.rows == out.cols == 8 and out.labels[2][5] == "[1,1,2]" and "output view" in out.title
    flat = layout_picture(T.Layout([4, 4], lambda i, j: (j, i)), "t", grid_shape=(2, 8))
    assert flat.labels == [["0", "4", "8", "12", "1", "5", "9", "13"], ["2", "6", "10", "14", "3", "7", "11", "15"]]
    with pytest.raises(ValueError, match="grid_shape 3x5 = 15 cells, the layout has 16 elements"):
        plot_layout(T.Layout([4, 4], lambda i, j: (j, i)), grid_shape=(3, 5))
    with pytest.raises(ValueError, match="unknown view 'sideways'"):
        plot_layout(T.Layout([4, 4], lambda i, j: (j, i)), view="sideways")
