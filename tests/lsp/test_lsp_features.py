"""Hover, completion, signature help, definitions, symbols and code lenses on a real server."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lsp_testing import Doc

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def gemm(server, lsp_dir):
    doc = Doc(server, lsp_dir / "gemm_kernel.py")
    assert doc.diagnostics() == []
    yield doc
    doc.close()


def hover_text(doc, needle, offset=0) -> str:
    found = doc.at("textDocument/hover", needle, offset)
    assert found is not None, f"no hover on {needle!r}"
    return found["contents"]["value"]


def test_hover_on_a_fragment_shows_its_layout(gemm):
    text = hover_text(gemm, "C_local = ", 2)
    assert "fragment `float32[128, 128]`" in text
    assert "128 registers/thread" in text
    assert "replication 1" in text
    assert "layout from T.gemm (line 19, wgmma)" in text   # the server's default target is sm_90a
    assert "| t0 | (0,0) | (0,1) | (8,0) | (8,1) |" in text
    assert "checked with matmul(M=1024, N=1024, K=1024)" in text


def test_hover_on_a_shared_buffer_shows_stages_swizzle_and_budget(gemm):
    text = hover_text(gemm, "B_shared = ", 1)
    assert "shared `float16[32, 128]`" in text
    # num_stages=3, and one buffer more for the wgmma group kept in flight (warp_specialize.plan_ring)
    assert "8 KiB × 4 pipeline stages = **32 KiB**" in text
    assert "wgmma operand layout: 128-byte swizzle, 2 slabs of 64 columns" in text
    # 64 KiB of tiles (the 32 KiB epilogue stage on their bytes: one tile per block), 64 bytes of mbarriers
    assert "64.1 KiB of 227 KiB per block on sm_90a" in text


def test_hover_on_gemm_shows_instruction_and_warps(gemm):
    text = hover_text(gemm, "T.gemm", 3)
    assert "wgmma.mma_async.sync.aligned.m64n128k16" in text
    assert "tl::wgmma_gemm_ss" in text
    assert "**1 warpgroup(s) along M**" in text


def test_hover_on_pipelined_and_kernel(gemm):
    assert "num_stages=3" in hover_text(gemm, "T.Pipelined", 3)
    # sm_90a (the server's default target): the GEMM main loop is warp-specialised with TMA.
    assert "TMA (sm_90a): a producer warpgroup" in hover_text(gemm, "T.Pipelined", 3)
    text = hover_text(gemm, "T.Kernel", 3)
    assert "grid 8 × 8 × 1" in text and "128 threads" in text
    assert "warp-specialised: the block runs **256 threads**" in text
    assert "blocks/SM" in text


def test_hover_on_use_swizzle_estimates_the_l2_bytes_of_a_wave(open_doc, lsp_dir):
    # the GEMM fixture with 128x256 tiles over 8192^3, rasterised in panels of 10 block rows
    text = (lsp_dir / "gemm_kernel.py").read_text()
    text = text.replace("block_N=128, block_K=32, num_stages=3, threads=128", "block_N=256, block_K=64, "
                        "num_stages=3, threads=256")
    text = text.replace("T.clear(C_local)", "T.use_swizzle(10)\n            T.clear(C_local)")
    doc = open_doc("gemm_kernel.py", text.replace("matmul(1024, 1024, 1024)", "matmul(8192, 8192, 8192)"),
                   as_name="swizzled.py")
    assert doc.diagnostics() == []
    text = hover_text(doc, "T.use_swizzle", 3)
    assert "panels of **10** block rows (blockIdx.y) · grid 32 x 64" in text
    assert "read **628 KiB** of A and B tiles per K step" in text
    assert "`T.use_swizzle(11)` would read 570 KiB (9 % less)" in text


def test_hover_on_other_members_shows_their_docs(gemm):
    assert "T.copy(src, dst" in hover_text(gemm, "T.copy", 3)


def test_completion_of_t_members_with_signatures(gemm, server):
    line, ch = gemm.position("T.gemm", 2)
    items = server.at("textDocument/completion", gemm.uri, line, ch)["items"]
    by_label = {i["label"]: i for i in items}
    assert "gemm" in by_label and "Pipelined" in by_label and "alloc_fragment" in by_label
    assert by_label["gemm"]["detail"].startswith("T.gemm(A, B, C, transpose_A=False")


def test_completion_of_keywords_and_buffers_inside_a_call(gemm, server):
    line, ch = gemm.position("B_shared, C_local)", len("B_shared, C_local"))
    labels = [i["label"] for i in server.at("textDocument/completion", gemm.uri, line, ch)["items"]]
    for keyword in ("transpose_A=", "transpose_B=", "policy=", "clear_accum="):
        assert keyword in labels
    assert {"A_shared", "B_shared", "C_local"} <= set(labels)
    line, ch = gemm.position("num_stages=num_stages")
    labels = [i["label"] for i in server.at("textDocument/completion", gemm.uri, line, ch)["items"]]
    assert "num_stages=" in labels


def test_signature_help_tracks_the_active_parameter(gemm, server):
    line, ch = gemm.position("B_shared, C_local)")
    found = server.at("textDocument/signatureHelp", gemm.uri, line, ch)
    assert found["signatures"][0]["label"].startswith("T.gemm(A, B, C,")
    assert found["activeParameter"] == 1


def test_definition_of_a_buffer_and_a_t_member(gemm, server):
    line, ch = gemm.position("A_shared)\n")
    found = server.at("textDocument/definition", gemm.uri, line, ch)
    target_line, target_ch = gemm.position("A_shared = ")
    assert found["uri"] == gemm.uri and found["range"]["start"] == {"line": target_line, "character": target_ch}
    line, ch = gemm.position("T.gemm", 3)
    found = server.at("textDocument/definition", gemm.uri, line, ch)
    assert found["uri"].endswith("/tilelang/language/tile.py")


def test_document_symbols_list_factories_kernels_and_buffers(gemm, server):
    symbols = server.request("textDocument/documentSymbol", {"textDocument": {"uri": gemm.uri}})
    factory = symbols[0]
    assert factory["name"] == "matmul"
    kernel = factory["children"][0]
    assert kernel["name"] == "kernel"
    assert [c["name"] for c in kernel["children"]] == ["A", "B", "C", "A_shared", "B_shared", "C_local"]


def test_code_lenses_over_each_factory(gemm, server):
    lenses = server.request("textDocument/codeLens", {"textDocument": {"uri": gemm.uri}})
    titles = [lens["command"]["title"] for lens in lenses]
    assert titles == ["▶ Compile for sm_90a", "▶ Run"]
    assert lenses[0]["command"]["arguments"] == [gemm.uri, "matmul"]


def _nvcc_available() -> bool:
    return bool(shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists())


@pytest.mark.skipif(not _nvcc_available(), reason="nvcc is not installed")
def test_compile_lens_reports_registers_and_ptx_instructions(gemm, server):
    result = server.request("workspace/executeCommand", {"command": "tilelang.compile",
                                                         "arguments": [gemm.uri, "matmul"]}, timeout=240)
    assert result["ok"], result["report"]
    data = result["data"]
    assert 0 < data["registers"] <= 255
    assert data["spill_stores"] == 0
    assert data["instructions"]["wgmma"] > 0       # sm_90a: warpgroup MMA reading shared memory
    assert data["instructions"]["mma.sync"] == 0
    assert data["instructions"]["cp.async.bulk (TMA)"] > 0   # warp-specialised TMA main loop
    # 3 stages of A and B and one more for the wgmma in flight (the 32 KiB epilogue stage on their
    # bytes: two such blocks fit on an SM, so one tile per block) and the mbarriers
    assert data["dynamic_smem"] == 64 * 1024 + 2 * 4 * 8
    assert data["instructions"]["cp.async.bulk (TMA)"] >= 3      # A and B loads, C stores
    assert result["language"] == "cuda" and "__global__" in result["cuda_source"]
    assert "registers: **" in result["report"]
    # The kernel hover now shows the ptxas register count and counts it in the occupancy.
    text = hover_text(gemm, "T.Kernel", 3)
    assert f"**{data['registers']}/thread** from ptxas" in text
    # ... and the shared memory the compiler really uses, with the epilogue stage and the grid
    assert "64.1 KiB" in text, text   # 4 buffers of A and B (3 stages + 1: warp_specialize.plan_ring), mbarriers
    assert "- persistent:" not in text and "- epilogue: the accumulator goes through a swizzled shared tile" in text
    assert "- one output tile per block, not a persistent grid: two blocks fit on an SM" in text


def _cuda_gpu() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - no usable torch: no GPU either
        return False


def test_run_lens_without_a_gpu_says_so(gemm, server):
    result = server.request("workspace/executeCommand", {"command": "tilelang.run",
                                                         "arguments": [gemm.uri, "matmul"]}, timeout=240)
    data = result["data"]
    if _cuda_gpu():
        assert data.get("ran"), result["report"]      # on a GPU machine the lens must really run
    if data.get("ran"):
        assert data["ms"] > 0 and "tflops" in data and data["matches_reference"] is True
    else:
        assert "No CUDA GPU" in result["report"]
