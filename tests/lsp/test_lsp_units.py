"""Unit tests of the server's pure parts: positions, settings, source model, completion context,
build-cache keys, PTX counting, occupancy and fix builders. No server process, no tvm."""

from __future__ import annotations

import pytest

from lsp_testing import FIXTURES
from tilelang_lsp import completion, convert, hover, lenses
from tilelang_lsp.handlers.code_action import add_missing_fixes
from tilelang_lsp.worker_check import BuildKeys
from tilelang_lsp.server_source import SourceModel, parse_tolerant
from tilelang_lsp.server_state import Result, Settings, syntax_result
from tilelang_lsp.worker_tools import count_ptx


def test_positions_count_utf16_units_and_clamp():
    index = convert.LineIndex("x = '😋é'\nabc")
    assert index.position(1, 7) == convert.lsp.Position(0, 7)   # after the emoji (2 units) and é
    assert index.position(1, 99) == convert.lsp.Position(0, 9)  # clamped to the line's end
    assert index.position(9, 1) == convert.lsp.Position(1, 3)   # past the last line
    assert index.from_position(convert.lsp.Position(0, 7)) == (1, 6)
    assert index.from_position(convert.lsp.Position(5, 0)) == (2, 0)


def test_diagnostic_conversion_keeps_code_link_notes_and_fix():
    span = {"file": "/k.py", "line": 2, "column": 5, "end_line": 2, "end_column": 9}
    data = {"code": "TL0401", "severity": "warning", "message": "m", "span": span, "binding": "f(M=1)",
            "url": "https://tilelang.dev/diagnostics#tl0401", "fix": {"title": "t", "edits": []},
            "notes": [{"message": "here", "span": span}, {"message": "plain", "span": None}]}
    d = convert.to_lsp_diagnostic(data, convert.LineIndex("a\nbbbbbbbbbb\n"), "/k.py", "file:///k.py")
    assert (d.range.start.line, d.range.start.character, d.range.end.character) == (1, 4, 8)
    assert d.code == "TL0401" and d.code_description.href.endswith("#tl0401") and d.source == "tilelang"
    assert d.message == "m\nnote: plain\nchecked with f(M=1)"
    assert d.related_information[0].message == "here"
    assert d.data == {"fix": {"title": "t", "edits": []}}


def test_settings_accept_both_shapes_and_report_bad_values():
    s = Settings()
    assert s.update({"tilelang": {"allowExecution": False, "target": "sm_80"}}) == []
    assert (s.allow_execution, s.target) == (False, "sm_80")
    problems = s.update({"target": "gfx90a", "timeout": -1, "diagnosticMode": "sometimes"})
    assert len(problems) == 3 and s.target == "sm_80"


def test_syntax_errors_point_at_the_error():
    r = syntax_result("/k.py", "x = (1,\ny = 2\n", 3)
    d = r.diagnostics[0]
    assert d["code"] == "TL0001" and r.version == 3
    assert d["span"]["line"] == 1 and d["span"]["column"] == 5
    assert syntax_result("/k.py", "a\x00b", 1).diagnostics[0]["code"] == "TL0001"
    assert syntax_result("/k.py", "x = 1\n", 1) is None


def test_tolerant_parse_blanks_the_broken_line():
    tree, repaired = parse_tolerant("def f():\n    x = T.\n    return 1\n")
    assert tree is not None and repaired
    model = SourceModel((FIXTURES / "gemm_kernel.py").read_text().replace("T.clear(C_local)", "T."))
    assert model.ok and [f.name for f in model.factories] == ["matmul"]
    assert set(model.factories[0].buffers()) == {"A", "B", "C", "A_shared", "B_shared", "C_local"}


def test_call_context_on_half_typed_code():
    ctx = completion.call_context("x = f(1)\nT.gemm(A_s, B_s[0, (1, 2)], 'a,b', transpose_B=True, po")
    assert ctx.callee == "T.gemm" and ctx.arg_index == 4 and ctx.keywords == ["transpose_B"]
    assert completion.call_context("T.gemm(A, B)\n") is None
    ctx = completion.call_context("for k in T.Pipelined(n, num_stages=")
    assert ctx.callee == "T.Pipelined" and ctx.current_keyword == "num_stages"


def test_keyword_items_fall_back_to_the_built_in_list():
    ctx = completion.CallContext("T.Pipelined", 1, [])
    labels = [i["label"] for i in completion.keyword_items(ctx, None)]
    assert labels[0] == "num_stages="


def test_build_keys_change_only_for_the_edited_factory():
    text = (FIXTURES / "gemm_kernel.py").read_text() + "\n\ndef other(n):\n    return n\n"
    msg = {"factory": "matmul", "args": ["1024", "1024", "1024"], "kwargs": [], "binding": "b", "target": "sm_90a"}
    before = BuildKeys("/k.py", text).key(msg)
    assert BuildKeys("/k.py", text.replace("return n", "return n + 1")).key(msg) == before
    assert BuildKeys("/k.py", text.replace("block_K=32", "block_K=64")).key(msg) != before
    assert BuildKeys("/k.py", "\n" + text).key(msg) != before   # lines moved: spans would be stale


def test_the_check_service_changes_nothing_in_the_checker():
    import tilelang.analysis.source as source
    import tilelang.analysis.suppress as suppress
    from tilelang_lsp import binding
    from tilelang_lsp import worker_build as worker
    from tilelang_lsp.worker_check import CheckService

    before = (source.parse_file, suppress.find_ignores, binding.find_pragmas, worker.load_module,
              worker.build_kernel)
    CheckService()
    assert (source.parse_file, suppress.find_ignores, binding.find_pragmas, worker.load_module,
            worker.build_kernel) == before


def test_ptx_instruction_counts():
    ptx = """
    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1}, {%r1}, {%r2}, {%f2};
    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1}, [%r2];
    @%p1 cp.async.cg.shared.global [%r3], [%rd1], 16;
    cp.async.commit_group;
    // mma.sync in a comment
    bar.sync 0;
    """
    counts = count_ptx(ptx)
    assert counts["mma.sync"] == 1 and counts["ldmatrix"] == 1 and counts["cp.async"] == 1
    assert counts["cp.async.commit/wait"] == 1 and counts["bar.sync"] == 1 and counts["wgmma"] == 0


def test_occupancy_estimate_names_the_limit():
    occ = hover.occupancy("sm_90a", 128, 48 * 1024, 202)
    assert occ["blocks"] == 2 and occ["limited_by"] == ["registers"]
    assert hover.occupancy("sm_90a", 128, 48 * 1024, None)["limited_by"] == ["shared memory"]
    assert hover.occupancy("sm_80", 1024, None, None)["blocks"] == 2


def _budget_summary(stages: int) -> dict:
    shared = {"scope": "shared.dyn", "bytes": 32768, "stages": stages}
    return {"arch": "sm_90a", "smem_limit": 232448, "smem_total": 2 * 32768 * stages,
            "buffers": {"A_shared": dict(shared), "B_shared": dict(shared)},
            "pipelines": [{"line": 16, "stages": stages, "producers": ["A_shared", "B_shared"]}]}


def test_the_worker_counts_the_stages_that_fit_with_the_compilers_placement():
    from tilelang.analysis.summary import fitting_stages

    assert fitting_stages(_budget_summary(4)) == 3          # 2 x 32 KiB x 3 = 192 KiB <= 227 KiB
    assert fitting_stages(_budget_summary(3)) is None       # already fits: no fix
    tight = {**_budget_summary(4), "smem_limit": 40000}
    assert fitting_stages(tight) is None                    # not even one stage fits


def test_stages_fix_edits_the_default_of_the_factory_parameter():
    text = (FIXTURES / "smem_budget.py").read_text()
    span = {"file": "/k.py", "line": 12, "column": 13, "end_line": 12, "end_column": 21}
    diag = {"code": "TL0501", "message": "m", "span": span, "fix": None, "binding": "deep_pipeline(M=4096)"}
    summary = {**_budget_summary(4), "stages_fit": 3}    # the worker's count (``fitting_stages``)
    result = Result(1, [diag], {"deep_pipeline": [{"binding": "deep_pipeline(M=4096)", "summary": summary}]})
    add_missing_fixes(result, text, "/k.py")
    edit = diag["fix"]["edits"][0]
    assert diag["fix"]["title"].startswith("lower num_stages from 4 to 3")
    assert edit["new_text"] == "3" and edit["span"]["line"] == 8


def test_clear_fix_lands_before_the_loop_that_accumulates():
    text = (FIXTURES / "no_clear.py").read_text()
    span = {"file": "/k.py", "line": 18, "column": 44, "end_line": 18, "end_column": 51}
    diag = {"code": "TL0401", "message": "T.gemm accumulates into fragment 'C_local'", "span": span, "fix": None}
    add_missing_fixes(Result(1, [diag], {}), text, "/k.py")
    assert diag["fix"]["title"] == "add `T.clear(C_local)` before line 15"
    assert diag["fix"]["edits"][0]["new_text"] == "            T.clear(C_local)\n"


@pytest.mark.parametrize("data, expected", [
    ({"error": "boom"}, "**Compile failed**: boom"),
    ({"factory": "f", "target": "sm_90a", "compile_ms": 1500, "registers": 90, "spill_stores": 0,
      "spill_loads": 0, "dynamic_smem": 1024, "static_smem": 0, "grid": ["1"], "block": [128],
      "instructions": {"mma.sync": 4}, "binding": "f()"}, "registers: **90**/thread, spills: none"),
])
def test_compile_report(data, expected):
    assert expected in lenses.compile_report(data)


def test_command_result_offers_the_cuda_source():
    out = lenses.command_result("compile", {"ok": True, "error": "x", "cuda_source": "__global__"})
    assert out["ok"] is False and out["cuda_source"] == "__global__" and "cuda_source" not in out["data"]


class _FakeServer:
    """What ``Checks._compute`` uses of the server; the worker's replies are scripted."""

    def __init__(self, reply, idle=True):
        from types import SimpleNamespace

        self.settings, self.reply, self.idle = Settings(), reply, idle
        self.check_worker = SimpleNamespace(ready=True)
        self.sent = []

    def path_of(self, uri):
        return "/k.py"

    def check_worker_idle(self):
        return self.idle

    async def request_check(self, message, timeout):
        import asyncio

        self.sent.append(message["text"])
        if self.reply is None:          # a busy worker: never answers within the test
            await asyncio.sleep(3600)
        return self.reply


def _compute(server, text):
    import asyncio

    from tilelang_lsp.server_state import Checks

    return asyncio.run(Checks(server)._compute("file:///k.py", 7, text))


def test_an_idle_worker_gets_the_text_and_the_server_parses_only_for_its_tl0001():
    clean = {"ok": True, "diagnostics": [{"code": "TL0301"}], "kernels": {}}
    result = _compute(_FakeServer(clean), "import tilelang\nx = 1\n")
    assert result.origin == "worker" and result.diagnostics == [{"code": "TL0301"}]
    point = {"file": "/k.py", "line": 2, "column": 5, "end_line": 2, "end_column": 5}
    broken = {"ok": True, "diagnostics": [{"code": "TL0001", "span": point}], "kernels": {}}
    result = _compute(_FakeServer(broken), "import tilelang\nx = (1,\n")
    assert result.origin == "syntax" and result.diagnostics[0]["span"]["end_column"] > 5
    failed = {"ok": False, "internal": "ValueError: source code string cannot contain null bytes"}
    result = _compute(_FakeServer(failed), "import tilelang\na\x00b\n")
    assert result.origin == "syntax" and result.diagnostics[0]["code"] == "TL0001"
    assert _compute(_FakeServer(failed), "import tilelang\n").origin == "failure"


def test_with_a_busy_worker_a_syntax_error_does_not_wait_for_it():
    server = _FakeServer(None, idle=False)
    result = _compute(server, "import tilelang\nx = (1,\n")
    assert result.origin == "syntax" and result.diagnostics[0]["code"] == "TL0001"


def _small_gemm(threads, block=64, stages=3):
    import tilelang.language as T

    @T.prim_func
    def kernel(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
               C: T.Tensor((256, 256), "float32")):
        with T.Kernel(256 // block, 256 // block, threads=threads) as (bx, by):
            A_s = T.alloc_shared((block, 32), "float16")
            B_s = T.alloc_shared((32, block), "float16")
            C_l = T.alloc_fragment((block, block), "float32")
            T.clear(C_l)
            for k in T.Pipelined(8, num_stages=stages):
                T.copy(A[by * block, k * 32], A_s)
                T.copy(B[k * 32, bx * block], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block, bx * block])

    return kernel


def test_gemm_hover_says_why_sm90a_falls_back_to_mma_sync():
    from tilelang.analysis.summary import summarize

    # M=64 over 2 warpgroups: they split N into 32 columns, which wgmma takes in 64-byte slabs of
    # B unless tl.disable_wgmma_narrow_slabs is set; then mma.sync, and the hover says why
    assert summarize(_small_gemm(threads=256), "sm_90a")["gemms"][0]["kind"] == "wgmma"
    summary = summarize(_small_gemm(threads=256), "sm_90a", {"tl.disable_wgmma_narrow_slabs": True})
    text = hover.gemm_markdown(summary["gemms"][0], None)
    assert "mma.sync.aligned.m16n8k16" in text
    assert "not wgmma on sm_90a: M=64 does not split into 64-row blocks over 2 warpgroup(s)" in text
    assert "tl.disable_wgmma_narrow_slabs is set" in text
    # On sm_80 there is nothing to explain.
    assert "not wgmma" not in hover.gemm_markdown(summarize(_small_gemm(threads=256), "sm_80")["gemms"][0], None)


def test_pipeline_hover_says_why_a_wgmma_loop_is_not_warp_specialised():
    from tilelang.analysis.summary import summarize

    ws = summarize(_small_gemm(threads=128), "sm_90a")["pipelines"][0]
    assert ws["warp_specialized"] and ws["mechanism"].startswith("TMA (sm_90a)")
    one_stage = summarize(_small_gemm(threads=128, stages=1), "sm_90a")["pipelines"][0]
    assert not one_stage["warp_specialized"] and "not pipelined" in one_stage["mechanism"]
    big = summarize(_small_gemm(threads=384, block=192), "sm_90a")["pipelines"][0]
    assert "Not warp-specialised with TMA on sm_90a: 384 threads" in big["mechanism"]


def test_pipeline_hover_describes_the_cp_async_fed_wgmma_loop():
    from tilelang.analysis.summary import summarize

    # 384 threads: no warp specialisation, but wgmma (3 warpgroups x 64 rows) with 4 stages.
    p = summarize(_small_gemm(threads=384, block=192, stages=4), "sm_90a")["pipelines"][0]
    assert "issued 2 iterations ahead, feeding asynchronous wgmma" in p["mechanism"]
    assert "Not warp-specialised with TMA on sm_90a: 384 threads" in p["mechanism"]


def test_pipeline_hover_describes_the_warp_specialised_attention_loop():
    import sys
    from pathlib import Path

    from tilelang.analysis.summary import summarize

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import flash_attention as fa

    func = fa.flashattn.get_prim_func(2, 4, 512, 128, False, 1, "bshd", block_M=128, block_N=128, num_stages=2)
    summary = summarize(func, "sm_90a")
    (p,) = summary["pipelines"]
    assert p["warp_specialized"] and p["producers"] == ["K_shared", "V_shared"]
    assert "run the loop body" in p["mechanism"] and "do not wait for each other" in p["mechanism"]
    # P V runs one iteration late under S = Q K^T; the lines of the example's macro calls
    source = Path(fa.__file__).read_text().splitlines()
    line = {name: next(i for i, t in enumerate(source, 1) if t.strip().startswith(name + "("))
            for name in ("mma0", "rescale", "mma1")}
    assert (f"the gemm of line {line['mma1']} issued asynchronously one iteration late, right after the gemm "
            f"of line {line['mma0']}") in p["mechanism"]
    assert f"line {line['rescale']} moves to the next iteration" in p["mechanism"]
    assert "V_shared waits on mbarriers of its own, so K_shared goes back" in p["mechanism"]
    assert summary["persistent"] is True
    assert "also loads `Q_shared` (copied in front of the loop) with TMA" in p["mechanism"]
    assert "the next tile's while the consumers finish this one" in p["mechanism"]
    causal = summarize(fa.flashattn.get_prim_func(2, 4, 512, 128, True, 1, "bshd", block_M=128, block_N=128,
                                                  num_stages=2), "sm_90a")
    # causal: its loop runs bx + 1 times; row blocks x and 3 - x go together (equal work)
    assert causal["persistent"] is True and causal["persistent_pairs"] == 4
    assert "row blocks x and 3 - x together" in hover.kernel_markdown(causal, None, None)
    assert causal["persistent_tail_split"] is True
    assert "the last rounds' pairs go out as single row blocks, longest first" in \
        hover.kernel_markdown(causal, None, None)
    # (two tiles a block, so Q has two buffers: warp_specialize.plan_heads)
    assert "the next tile's into a second buffer as soon as this tile's loads are issued" in \
        causal["pipelines"][0]["mechanism"]
    odd = summarize(fa.flashattn.get_prim_func(2, 4, 384, 128, True, 1, "bshd", block_M=128, block_N=128,
                                               num_stages=2), "sm_90a")
    assert odd["persistent"] is False and "no pairing of row blocks evens it out" in odd["persistent_why"]
    assert "also loads `Q_shared`" in odd["pipelines"][0]["mechanism"]
    assert "the next tile's" not in odd["pipelines"][0]["mechanism"]
    three = summarize(fa.flashattn.get_prim_func(2, 4, 512, 128, False, 1, "bshd", block_M=128, block_N=128,
                                                 num_stages=3), "sm_90a")
    assert three["persistent"] is True
    assert "the next tile's once this tile's epilogue is done" in three["pipelines"][0]["mechanism"]
    (cp,) = summarize(func, "sm_80")["pipelines"]
    assert not cp["warp_specialized"] and cp["mechanism"].startswith("cp.async")


def test_kernel_hover_says_why_an_epilogue_stores_from_registers():
    from tilelang.analysis.summary import summarize

    summary = summarize(_small_gemm(threads=128), "sm_90a")      # C is float32
    (line, why), = summary["epilogue_registers"]
    assert why == "'C' is not a 16- or 8-bit tensor with a static shape" and line is not None
    text = hover.kernel_markdown(summary, None, None)
    assert f"- epilogue (line {line}): stored from registers, because 'C' is not a 16- or 8-bit tensor" in text
    assert not summary["epilogue_stage"]
    # on sm_80 there is no stage to explain
    assert not summarize(_small_gemm(threads=128), "sm_80").get("epilogue_registers")


def test_kernel_hover_says_when_the_compile_bounded_the_kernel_for_one_block_more():
    from tilelang.analysis.summary import summarize

    summary = summarize(_small_gemm(threads=128), "sm_90a")
    compiled = {"registers": 80, "spill_stores": 0, "target": "sm_90a", "min_blocks_per_sm": 6}
    text = hover.kernel_markdown(summary, None, compiled)
    assert "**80/thread** from ptxas (sm_90a), no spills; compiled under __launch_bounds__(T, 6)" in text
    assert "__launch_bounds__" not in hover.kernel_markdown(summary, None, dict(compiled, min_blocks_per_sm=None))


def test_swizzle_hover_estimates_the_l2_bytes_of_a_wave_and_names_the_best_panel():
    import sys
    from pathlib import Path

    from tilelang.analysis.summary import summarize

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import gemm

    # 128x256 tiles: the example's panel is the best (16 block rows of 16 KiB A tiles, 8-9 columns
    # of 32 KiB B tiles per wave of 132 blocks)
    func = gemm.matmul.get_prim_func(8192, 8192, 8192, block_M=128, block_N=256, block_K=64)
    summary = summarize(func, "sm_90a")
    r = summary["raster"]
    assert (r["panel"], r["best_panel"], r["wave"], r["grid"]) == (16, 16, 132, [32, 64])
    assert r["bytes"] < 0.6 * r["plain_bytes"]
    text = hover.raster_markdown(r, summary, None)
    assert "panels of **16** block rows (blockIdx.y) · grid 32 x 64" in text
    assert "132 blocks in flight (one per SM of sm_90a (H100 / H200))" in text and "the fewest bytes" in text
    # a panel of 10 (upstream's examples) reads more, and the hover says which panel reads fewest
    from tilelang.analysis import raster as est

    ten = {**est.raster_estimate(10, 32, 64, 132, 128 * 64 * 2, 64 * 256 * 2), "grid": [32, 64]}
    text = hover.raster_markdown(ten, summary, None)
    assert "read **628 KiB**" in text and "`T.use_swizzle(11)` would read 570 KiB (9 % less)" in text


def test_raster_order_visits_every_block_once_and_prefers_balanced_panels():
    from tilelang.analysis import raster

    for gx, gy, panel in ((32, 64, 10), (7, 5, 3), (6, 9, 4), (1, 3, 8)):
        seen = {raster.block_of(i, panel, gx, gy) for i in range(gx * gy)}
        assert seen == {(r, c) for r in range(gy) for c in range(gx)}
    # odd panels walk their columns backwards (upstream's rasterization2DRow)
    assert [raster.block_of(i, 2, 3, 4) for i in range(12)] == [
        (0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2), (3, 2), (2, 1), (3, 1), (2, 0), (3, 0)]
    est = raster.raster_estimate(10, 32, 64, 132, 128 * 64 * 2, 64 * 256 * 2)
    assert est["best_panel"] == 11 and est["bytes"] > est["best_bytes"] and est["plain_bytes"] > est["bytes"]
    # square tiles: about sqrt(132) block rows
    assert raster.raster_estimate(10, 64, 64, 132, 128 * 64 * 2, 64 * 128 * 2)["best_panel"] == 11


def test_compile_lens_ptxas_gets_the_kernels_ptxas_options():
    """The Compile lens assembles its PTX with ptxas itself: the register options the kernel's
    nvcc flags carry (tl.ptxas_register_usage_level, -maxrregcount) must reach it, or it would
    report other registers than the real build."""
    from tilelang_lsp.worker_tools import _ptxas_flags

    flags = ["--use_fast_math", "--ptxas-options=--register-usage-level=5", "-maxrregcount=128",
             "--ptxas-options=--verbose"]
    assert _ptxas_flags(flags) == ["--register-usage-level=5", "--maxrregcount=128", "--verbose"]
    assert _ptxas_flags([]) == [] and _ptxas_flags(None) == []
