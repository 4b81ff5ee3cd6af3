"""tilelang.tools.pass_timing: per-pass timing of real compiles (tl.pass_profile / TILELANG_PASS_PROFILE)."""

import logging

import pytest
import tvm

import tilelang
import tilelang.language as T
from tilelang.tools.pass_timing import (PassTimingRecord, PassTimingTool, TileLangPassTimingInstrument,
                                        create_pass_timing_tool)


@T.prim_func
def add_one(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128):
        tid = T.get_thread_binding()
        B[tid] = A[tid] + 1.0


def _reports(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "tilelang.pass_timing"]


def test_pass_profile_config_logs_one_report_per_compile(caplog):
    with caplog.at_level(logging.INFO, logger="tilelang.pass_timing"):
        tilelang.lower(add_one, target="sm_90a", pass_configs={"tl.pass_profile": True})
    (report,) = _reports(caplog)
    assert "Context: stage=lower, kernel=add_one" in report
    assert "Context: stage=codegen, kernel=add_one" in report
    for name in ("tl.check(add_one)", "tl.lower_tile_ops(add_one)", "tl.emit_cuda(add_one)", "tirx.StmtSimplify"):
        assert name in report
    assert "Inclusive" in report and "Self" in report


def test_no_report_without_the_knob(caplog, monkeypatch):
    monkeypatch.delenv("TILELANG_PASS_PROFILE", raising=False)
    with caplog.at_level(logging.INFO, logger="tilelang.pass_timing"):
        tilelang.lower(add_one, target="sm_90a")
    assert _reports(caplog) == []
    assert create_pass_timing_tool({}) is None


def test_environment_knob_and_threshold(caplog, monkeypatch):
    monkeypatch.setenv("TILELANG_PASS_PROFILE", "1")
    monkeypatch.setenv("TILELANG_PASS_PROFILE_THRESHOLD_MS", "100000")
    assert create_pass_timing_tool({}).threshold_ms == 100000.0
    assert create_pass_timing_tool({"tl.pass_profile_threshold_ms": 0}).threshold_ms == 0.0   # config wins
    with caplog.at_level(logging.INFO, logger="tilelang.pass_timing"):
        tilelang.lower(add_one, target="sm_90a")
    (report,) = _reports(caplog)
    assert "passes skipped - under 100000.0ms inclusive threshold" in report
    assert "tl.lower_tile_ops(" not in report


def test_tool_sections_follow_pass_contexts():
    tool = PassTimingTool()
    from tilelang.instrumentation import compile_pass_instrumentation

    with compile_pass_instrumentation(name="t", tools=[tool], include_default_tools=False):
        tilelang.lower(add_one, target="sm_90a")
    assert tool.contexts == ("stage=lower, kernel=add_one", "stage=codegen, kernel=add_one")
    stages = [r.name for r in tool.timings[0].records]
    assert stages[0] == "tl.check" and stages[-1] == "tl.emit_cuda"
    emit = tool.timings[0].records[-1]
    assert emit.duration_s >= emit.self_duration_s >= 0
    nested = [r for r in tool.timings[1].records if r.depth > 0]
    assert nested   # the tirx pipeline's passes sit inside its Sequential


def test_report_layout():
    timing = TileLangPassTimingInstrument(threshold_ms=1.0)
    timing._records.extend([PassTimingRecord("outer", 0.004, 0, 0.001, 0, "k"),
                            PassTimingRecord("inner", 0.003, 1, 0.003, 1, "k"),
                            PassTimingRecord("tiny", 0.0001, 0, 0.0001, 2)])
    report = timing.report(context="stage=x")
    assert "Context: stage=x" in report and "outer(k)" in report and "  inner(k)" in report
    assert "tiny" not in report.split("Top")[0] and "(1 passes skipped" in report
    assert timing.total_duration_s == pytest.approx(0.0041)


def test_timing_instrument_in_a_plain_pass_context():
    timing = TileLangPassTimingInstrument()
    with tvm.transform.PassContext(instruments=[timing.instrument]):
        tvm.tirx.transform.StmtSimplify()(tvm.IRModule({"main": add_one}))
    (record,) = timing.records
    assert record.name == "tirx.StmtSimplify" and record.kernel == "add_one"
