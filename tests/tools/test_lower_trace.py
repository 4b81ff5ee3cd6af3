"""tilelang.tools.lower_trace: traces of real compiles, the HTML report, edit-and-recompile."""

import os

import pytest
import tvm

import tilelang
import tilelang.language as T
from tilelang.tools.lower_trace import STATUS_CODEGEN, disable, enable, lower_trace
from tilelang.tools.lower_trace import core
from tilelang.tools.lower_trace.diff import _make_diff_html


@T.prim_func
def copy_kernel(A: T.Tensor((128, 128), "float16"), B: T.Tensor((128, 128), "float16")):
    with T.Kernel(2, threads=128) as bx:
        S = T.alloc_shared((64, 128), "float16")
        T.copy(A[bx * 64, 0], S)
        T.copy(S, B[bx * 64, 0])


@T.prim_func
def add_one(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
    with T.Kernel(1, threads=32):
        tid = T.get_thread_binding()
        B[tid] = A[tid] + 1.0


@pytest.fixture(autouse=True)
def _off(monkeypatch):
    monkeypatch.delenv("TL_LOWER_TRACE", raising=False)
    monkeypatch.delenv("TL_LOWER_TRACE_DIR", raising=False)
    disable()
    yield
    disable()


def test_html_trace_of_a_compile(tmp_path, capsys):
    enable(mode="html", trace_dir=str(tmp_path))
    artifact = tilelang.lower(copy_kernel, target="sm_90a")
    trace = core.get_last_session()
    names = [r.name for r in trace.records]
    assert names[:6] == ["check", "analyze_kernel", "infer_layouts", "stage_epilogues", "lower_tile_ops",
                         "emit_cuda"]
    assert "StmtSimplify" in names and names.count("codegen") == 1
    indices = [r.index for r in trace.records]
    assert indices == sorted(indices) == list(range(len(indices)))
    lowered = trace.records[4]
    assert lowered.changed and lowered.phase == "pipeline_cuda" and "T.copy" not in lowered.after_text
    (codegen,) = [r for r in trace.records if r.status == STATUS_CODEGEN]
    assert "__global__" in codegen.after_text and codegen.phase == "codegen"
    report = open(os.path.join(trace.script_dir, "report.html")).read()
    assert "lower_tile_ops" in report and 'id="theme-btn"' in report and 'data-depth="1"' in report
    assert os.path.isfile(os.path.join(trace.script_dir, "codegen.cpp"))
    assert os.listdir(os.path.join(trace.run_dir, "pipeline_cuda"))
    assert "pipeline_cuda/04_lower_tile_ops: " in capsys.readouterr().out
    disable()
    assert tilelang.lower(copy_kernel, target="sm_90a").source == artifact.source


def test_edited_generated_source_is_compiled(tmp_path):
    enable(mode="terminal", trace_dir=str(tmp_path), codegen_output=str(tmp_path / "k.cu"))
    first = tilelang.lower(add_one, target="sm_90a")
    assert core.get_last_session().run_dir and not os.path.exists(
        os.path.join(core.get_last_session().script_dir, "report.html"))   # terminal mode: no report
    source = (tmp_path / "k.cu").read_text()
    assert "0x1p+0f" in source
    (tmp_path / "k.cu").write_text(source.replace("0x1p+0f", "0x1p+1f"))
    second = tilelang.lower(add_one, target="sm_90a")
    assert "0x1p+1f" in second.source and "0x1p+1f" not in first.source
    (tmp_path / "k.cu").write_text(source)   # back to the baseline: the generated source again
    assert tilelang.lower(add_one, target="sm_90a").source == first.source


def test_lower_trace_api_on_a_pass_chain(tmp_path, capsys):
    html_path = str(tmp_path / "chain.html")
    mod = tvm.IRModule({"main": copy_kernel})
    results = lower_trace(mod, [("simplify", tvm.tirx.transform.StmtSimplify()),
                                tvm.tirx.transform.Simplify()], mode="both", html_path=html_path)
    assert [r["name"] for r in results] == ["simplify", "Simplify"]
    assert all(set(r) >= {"before_script", "after_script", "diff_lines", "changed"} for r in results)
    assert "Pass 2: Simplify" in capsys.readouterr().out
    assert "simplify" in open(html_path).read()
    with pytest.raises(ValueError, match="mode must be"):
        lower_trace(mod, [], mode="pdf")


def test_side_by_side_diff():
    assert _make_diff_html("a\nb\n", "a\nb\n") == '<p class="noop-msg">No differences.</p>'
    assert "trailing newline" in _make_diff_html("a", "a\n")
    html = _make_diff_html("x = 1\n  y = 2\nz\n", "x = 3\ny = 2\nz\n")
    assert '<span class="chg">' in html and 'class="code ws"' in html


def test_env_modes(monkeypatch):
    for value, mode in (("0", None), ("", None), ("1", "html"), ("on", "html"), ("terminal", "terminal"),
                        ("both", "both"), ("html", "html")):
        monkeypatch.setenv("TL_LOWER_TRACE", value)
        assert core._get_mode() == mode


def test_two_pipelines_in_one_compile_session(tmp_path):
    from tilelang.instrumentation import compile_pass_instrumentation

    enable(mode="terminal", trace_dir=str(tmp_path), codegen_output=None)
    with compile_pass_instrumentation(name="two") as session:
        trace = session.find_tool(core.LowerTraceSession)
        tilelang.lower(add_one, target="sm_90a")
        first = len(trace.records)
        tilelang.lower(add_one, target="sm_90a")
    assert trace.pipeline_count == 2 and len(trace.records) > first
    phases = {r.phase for r in trace.records}
    assert {"pipeline_cuda", "run2_pipeline_cuda", "codegen"} <= phases
    indices = [r.index for r in trace.records]
    assert indices == sorted(indices) and len(set(indices)) == len(indices)
