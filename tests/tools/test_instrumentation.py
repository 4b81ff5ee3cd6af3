"""tilelang.instrumentation: pass events from our stages and TVM's codegen passes, compile sessions."""

import threading

import pytest
import tvm

import tilelang
import tilelang.language as T
from tilelang.diagnostics import TileLangCompileError
from tilelang.instrumentation import (PassEventObserver, PassInstrumentationTool, StackedPassInstrument,
                                      compile_pass_instrumentation, create_pass_instruments,
                                      current_compile_pass_instrumentation, current_pass_phase,
                                      instrumentation_requested, pass_pipeline, register_pass_instrumentation_tool,
                                      unregister_pass_instrumentation_tool)


@T.prim_func
def copy_kernel(A: T.Tensor((128, 128), "float16"), B: T.Tensor((128, 128), "float16")):
    with T.Kernel(2, threads=128) as bx:
        S = T.alloc_shared((64, 128), "float16")
        T.copy(A[bx * 64, 0], S)
        T.copy(S, B[bx * 64, 0])


@T.prim_func
def bad_copy(A: T.Tensor((128,), "float16")):
    with T.Kernel(1, threads=128):
        S = T.alloc_shared((64,), "float16")
        T.copy(A[0:128], S[0:64])


class Observer(PassEventObserver):
    def __init__(self):
        self.finished = []
        self.incomplete = []

    def pass_started(self, mod, event):
        return str(mod)

    def pass_finished(self, mod, event, before):
        self.finished.append((event, before != str(mod)))

    def passes_incomplete(self, passes, error):
        self.incomplete.append(([p.name for p in passes], error))


class Recorder(PassInstrumentationTool):
    def __init__(self):
        self.observers = []
        self.codegen = []
        self.finished = []

    def create_pass_instrument(self):
        observer = Observer()
        self.observers.append(observer)
        return StackedPassInstrument(observer)

    def run_codegen(self, event, next_call):
        self.codegen.append((event.name, current_pass_phase()))
        return next_call()

    def finish(self, error):
        self.finished.append(error)


def _names(observer):
    return [event.name for event, _ in observer.finished]


def test_lower_reports_our_stages_and_tvm_codegen_passes():
    plain = tilelang.lower(copy_kernel, target="sm_90a").source
    tool = Recorder()
    with compile_pass_instrumentation(name="copy", tools=[tool], include_default_tools=False):
        artifact = tilelang.lower(copy_kernel, target="sm_90a")
    assert artifact.source == plain                     # instrumenting changes nothing generated
    stages, codegen = tool.observers
    assert _names(stages) == ["tl.check", "tl.analyze_kernel", "tl.infer_layouts", "tl.stage_epilogues",
                              "tl.lower_tile_ops", "tl.emit_cuda"]
    assert all(event.phase == "pipeline_cuda" and event.depth == 0 for event, _ in stages.finished)
    assert dict((e.name, changed) for e, changed in stages.finished)["tl.lower_tile_ops"]   # T.copy lowered
    names = _names(codegen)
    assert "tirx.StmtSimplify" in names and "tirx.MakePackedAPI" in names   # TVM's real pass names
    nested = [event for event, _ in codegen.finished if event.depth > 0]
    assert nested and all(event.parent_sequence is not None for event in nested)
    assert tool.codegen == [("target.build.cuda", "pipeline_cuda")]
    assert tool.finished == [None]


def test_a_failing_stage_keeps_its_diagnostic_and_is_reported_incomplete():
    tool = Recorder()
    with pytest.raises(TileLangCompileError, match="TL0601"):
        with compile_pass_instrumentation(name="bad", tools=[tool], include_default_tools=False):
            tilelang.lower(bad_copy, target="sm_90a")
    (names, error), = tool.observers[0].incomplete
    assert names == ["tl.check"] and isinstance(error, TileLangCompileError)
    assert isinstance(tool.finished[0], TileLangCompileError)


def test_nothing_is_instrumented_without_a_session_or_a_tool():
    assert not instrumentation_requested()
    assert create_pass_instruments() == []
    register_pass_instrumentation_tool("probe", Recorder)
    try:
        assert instrumentation_requested()
    finally:
        unregister_pass_instrumentation_tool("probe")
    assert not instrumentation_requested()


def test_registered_tools_are_snapshotted_when_a_session_starts():
    made = []

    def factory():
        made.append(Recorder())
        return made[-1]

    register_pass_instrumentation_tool("snap", factory)
    try:
        with compile_pass_instrumentation(name="a") as session:
            unregister_pass_instrumentation_tool("snap")
            tilelang.lower(copy_kernel, target="sm_90a")   # nested: reuses the session
            assert current_compile_pass_instrumentation() is session
        assert len(made) == 1 and len(made[0].observers) == 2
    finally:
        unregister_pass_instrumentation_tool("snap")
    with pytest.raises(ValueError, match="already active"):
        with compile_pass_instrumentation(name="outer"):
            with compile_pass_instrumentation(name="inner", tools=[Recorder()]):
                pass


def test_stacked_instrument_pairs_nested_tvm_passes():
    observer = Observer()

    @tvm.transform.module_pass(opt_level=0, name="test.Outer")
    def outer(mod, _ctx):
        return tvm.tirx.transform.StmtSimplify()(mod)

    with tvm.transform.PassContext(instruments=[StackedPassInstrument(observer)]):
        with pass_pipeline("unit"):
            outer(tvm.IRModule({"main": copy_kernel}))
    (o, _), (i, _) = sorted(observer.finished, key=lambda item: item[0].sequence)
    assert (o.name, o.depth, o.parent_sequence, o.phase) == ("test.Outer", 0, None, "pipeline_unit")
    assert (i.name, i.depth, i.parent_sequence) == ("tirx.StmtSimplify", 1, o.sequence)


def test_upstream_simplify_is_reported_under_its_upstream_name():
    observer = Observer()
    with tvm.transform.PassContext(instruments=[StackedPassInstrument(observer)]):
        tvm.tirx.transform.Simplify()(tvm.IRModule({"main": copy_kernel}))
    assert _names(observer) == ["tirx.Simplify"]


def test_sessions_are_per_thread():
    seen = {}

    def run(label):
        with compile_pass_instrumentation(name=label, tools=[Recorder()], include_default_tools=False) as s:
            seen[label] = (s, current_compile_pass_instrumentation())

    threads = [threading.Thread(target=run, args=(n,)) for n in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["x"][0] is seen["x"][1] and seen["y"][0] is seen["y"][1] and seen["x"][0] is not seen["y"][0]
    assert current_compile_pass_instrumentation() is None
