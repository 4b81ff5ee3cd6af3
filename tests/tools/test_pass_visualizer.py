"""tilelang.tools.pass_visualizer: structure trees recorded around our real lowering stages."""

import os

import pytest
import tvm

import tilelang
from tilelang.tools.pass_visualizer import (PassStructureRecord, StructureTreePassInstrument, build_module,
                                            capture_structure, parse_assignments)
from tilelang.tools.pass_visualizer.viewer import build_pass_data, emit_html, emit_txt, main

EXAMPLE = os.path.join(os.path.dirname(tilelang.tools.pass_visualizer.__file__), "examples", "gemm_relu.py")
SIZES = {"M": 128, "N": 128, "K": 128, "block_M": 64, "block_N": 64, "block_K": 32}


def _module():
    from tilelang.tools.pass_visualizer.core import load_user_module

    func = load_user_module(EXAMPLE).gemm_relu.get_tir(**SIZES)
    return build_module(func, target="sm_90a")


def test_tree_expands_tile_ops_by_field():
    mod, target = _module()
    assert target.kind.name == "cuda" and str(target.attrs["arch"]) == "sm_90a"
    lines = capture_structure(mod)
    text = "\n".join(lines)
    assert lines[0] == "PrimFunc `main`"
    assert "AttrStmt[launch_thread threadIdx.x (extent=128)]" in text
    assert "For(k in 0..4, kind=serial)" in text and "@ann tl.num_stages = 3" in text
    gemm = lines.index(next(line for line in lines if line.strip() == "Evaluate: T.gemm"))
    assert lines[gemm + 1].split("=")[0].strip().endswith("a_region")
    assert "A_shared[0, 0] extent=['64', '32'] (r)" in lines[gemm + 1]
    assert "C_local[0, 0] extent=['64', '64'] (rw)" in lines[gemm + 3]


def test_instrument_records_top_level_passes_only_and_failures():
    mod, _ = _module()
    inst = StructureTreePassInstrument()

    @tvm.transform.module_pass(opt_level=0, name="test.Outer")
    def outer(m, _ctx):
        return tvm.tirx.transform.Simplify()(m)

    @tvm.transform.module_pass(opt_level=0, name="test.Fail")
    def fail(_m, _ctx):
        raise RuntimeError("boom")

    with tvm.transform.PassContext(instruments=[inst]):
        outer(mod)
        tvm.tirx.transform.Simplify()(mod)
    assert [r.name for r in inst.ordered_records()] == ["test.Outer", "tirx.Simplify"]
    assert [r.sequence for r in inst.ordered_records()] == [0, 1]
    assert inst.input_lines[0] == "PrimFunc `main`"
    with pytest.raises(RuntimeError, match="boom"), tvm.transform.PassContext(instruments=[inst]):
        fail(mod)
    assert inst.records == [] and inst.incomplete_passes == ["test.Fail"]
    assert PassStructureRecord("x", 0, ["a"], ["b"]).changed and not PassStructureRecord("x", 0, ["a"], ["a"]).changed


def test_build_pass_data_observes_our_stages(tmp_path):
    source = open(EXAMPLE).read()
    name, stages = build_pass_data(EXAMPLE, None, "sm_90a", SIZES, source)
    assert name == "gemm_relu"
    assert [s["name"] for s in stages] == ["source code", "(input)", "[01] analyze_kernel", "[02] infer_layouts",
                                           "[03] stage_epilogues", "[04] lower_tile_ops"]
    layouts = [r["s"] for r in stages[3]["rows"] if r["t"] == "add"]
    assert stages[3]["flag"] == "changed" and any("fragment C_local: " in line for line in layouts)
    lowered = stages[-1]
    assert lowered["flag"] == "changed"
    removed = [r["s"].strip() for r in lowered["rows"] if r["t"] == "del"]
    assert "Evaluate: T.gemm" in removed          # the tile op is gone once lowered
    assert any(r["op"] for r in stages[1]["rows"])
    page = emit_html(name, stages)
    assert page.startswith("<!DOCTYPE html>") and "Pass browser - gemm_relu" in page and "</script>" in page
    txt = emit_txt(name, stages)
    assert txt.startswith("kernel: gemm_relu") and "===== [04] lower_tile_ops  (changed)" in txt


def test_viewer_refuses_other_targets_and_cli_writes_both_files(tmp_path, capsys):
    with pytest.raises(ValueError, match="currently supports only CUDA targets, got 'llvm'"):
        build_pass_data(EXAMPLE, None, "llvm", SIZES, "")
    out = tmp_path / "g.html"
    argv = [EXAMPLE, "--target", "sm_90a", "--out", str(out)] + [f"--set={k}={v}" for k, v in SIZES.items()]
    assert main(argv) == 0
    assert out.exists() and (tmp_path / "g.txt").read_text().startswith("kernel: gemm_relu")
    assert parse_assignments(["M=8", "dtype=float16"]) == {"M": 8, "dtype": "float16"}
