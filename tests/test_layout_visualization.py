"""``TL_LAYOUT_VISUALIZATION_ENABLE`` / ``_FORMATS``: a compile prints its inferred fragment layouts
and draws them (and its swizzled shared tiles) into ./tmp (tilelang/analysis/layout_visual.py)."""

from __future__ import annotations

import pytest

import tilelang
import tilelang.language as T
from tilelang.analysis import layout_visual

VIS = {tilelang.PassConfigKey.TL_LAYOUT_VISUALIZATION_ENABLE: True}


def gemm(bm, bn, bk=32):
    @T.prim_func
    def matmul(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
               C: T.Tensor((256, 256), "float16")):
        with T.Kernel(256 // bn, 256 // bm, threads=128) as (bx, by):
            A_shared = T.alloc_shared((bm, bk), "float16")
            B_shared = T.alloc_shared((bk, bn), "float16")
            C_local = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_local)
            for k in T.Pipelined(256 // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_shared)
                T.copy(B[k * bk, bx * bn], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * bm, bx * bn])

    return matmul


def test_formats_parse_like_upstream():
    assert layout_visual.formats_of({}) == ["txt"]
    assert layout_visual.formats_of({layout_visual.FORMATS: " PNG, svg "}) == ["png", "svg"]
    assert layout_visual.formats_of({layout_visual.FORMATS: "all"}) == ["txt", "png", "pdf", "svg"]
    with pytest.raises(ValueError, match=r"TL_LAYOUT_VISUALIZATION_FORMATS.*\['gif'\]"):
        layout_visual.formats_of({layout_visual.FORMATS: "png,gif"})


def test_compiling_a_gemm_prints_and_draws_its_layouts(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    configs = {**VIS, tilelang.PassConfigKey.TL_LAYOUT_VISUALIZATION_FORMATS: "png,svg"}
    source = tilelang.lower(gemm(32, 32), "sm_80", pass_configs=configs).source
    out = capsys.readouterr().out
    # upstream's example kernel and its documented printout (32x32 accumulator, 4 warps)
    assert "C_local inferred layout:\n  Shape: [32, 32] -> [8]\n" in out
    assert "  Thread: _j // 16 * 64 + _i // 16 * 32 + _i % 8 * 4 + _j % 8 // 2\n" in out
    assert "  Replicate:  1" in out
    written = sorted(p.name for p in (tmp_path / "tmp").iterdir())
    assert written == ["A_shared_layout.png", "A_shared_layout.svg", "B_shared_layout.png",
                       "B_shared_layout.svg", "C_local_layout.png", "C_local_layout.svg"]
    assert (tmp_path / "tmp" / "C_local_layout.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (tmp_path / "tmp" / "C_local_layout.svg").read_text()
    assert svg.count("<rect") == 32 * 32 and ">T127<" in svg
    assert (tmp_path / "tmp" / "A_shared_layout.svg").read_text().count("<rect") == 8 * 32   # one swizzle period
    # drawing changes nothing in the kernel
    assert source == tilelang.lower(gemm(32, 32), "sm_80").source


def test_text_only_by_default_and_nothing_when_disabled(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    tilelang.lower(gemm(32, 32), "sm_80", pass_configs=VIS)
    assert "C_local inferred layout:" in capsys.readouterr().out and not (tmp_path / "tmp").exists()
    tilelang.lower(gemm(32, 32), "sm_80",
                   pass_configs={tilelang.PassConfigKey.TL_LAYOUT_VISUALIZATION_FORMATS: "png"})
    assert "inferred layout" not in capsys.readouterr().out and not (tmp_path / "tmp").exists()


def test_big_fragments_are_drawn_by_warp_without_labels_in_png(tmp_path):
    from tilelang.layout.axes import mma_accumulator
    from tilelang.transform.layout_inference import Layouts

    class Buf:
        name = "C_big"

    layouts = Layouts(fragments={Buf(): mma_accumulator(128, 128, 2, 2, 128)})
    configs = {layout_visual.ENABLE: True, layout_visual.FORMATS: "svg,png"}
    written = layout_visual.visualize(layouts, configs, save_directory=tmp_path)
    assert sorted(p.name for p in written) == ["C_big_layout.png", "C_big_layout.svg"]
    assert (tmp_path / "C_big_layout.svg").read_text().count(">T127<") > 0      # the SVG keeps its labels
    assert (tmp_path / "C_big_layout.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_cached_kernel_is_lowered_again_to_draw_its_layouts(tmp_path, monkeypatch, capsys):
    import sys

    from tilelang.jit import cache

    jit = sys.modules["tilelang.jit"]         # the package (``tilelang.jit`` the attribute is the decorator)

    cached = object()
    monkeypatch.setattr(cache, "enabled", lambda: True)
    monkeypatch.setattr(cache, "load", lambda key: cached)
    monkeypatch.chdir(tmp_path)
    assert jit.lower_for_compile(gemm(32, 32), target="sm_80")[1] is cached
    _, artifact = jit.lower_for_compile(gemm(32, 32), target="sm_80", pass_configs=VIS)
    assert artifact is not cached and "C_local inferred layout:" in capsys.readouterr().out
