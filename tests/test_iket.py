"""tilelang.tools.cuda.iket on CPU: event calls in the TIR, the instrumented CUDA (and that nvcc
accepts it for sm_80 and sm_90a), the session's callback / cache / payload / directory state,
and the errors. GPU runs of upstream's examples/iket: tests/gpu/test_iket_gpu.py."""

from __future__ import annotations

import os
import re
import shutil

import pytest
import tvm
import tvm_ffi

import tilelang
import tilelang.language as T
from tilelang.engine.callback import CUDA_POSTPROC
from tilelang.jit import cache
from tilelang.tir_utils import dtype_of
from tilelang.tools.cuda import iket
from tilelang.tools.cuda.iket import codegen, metadata

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None and not os.environ.get("TILELANG_NVCC"),
                                reason="needs nvcc")


@pytest.fixture(autouse=True)
def _clean_iket_state():
    """Every test starts and ends with no IKET scope, no CUDA callback, an empty registry."""
    previous = tvm_ffi.get_global_func(CUDA_POSTPROC, allow_missing=True)
    switch = cache._SWITCH[0]
    while iket.is_enabled():
        iket.disable(restore=False)
    if previous is not None:
        tvm_ffi.remove_global_func(CUDA_POSTPROC)
    iket.reset()
    iket.disable_runtime_payloads()
    yield
    while iket.is_enabled():
        iket.disable(restore=False)
    if tvm_ffi.get_global_func(CUDA_POSTPROC, allow_missing=True) is not None:
        tvm_ffi.remove_global_func(CUDA_POSTPROC)
    if previous is not None:
        tvm_ffi.register_global_func(CUDA_POSTPROC, f=previous, override=True)
    iket.reset()
    iket.disable_runtime_payloads()
    cache._SWITCH[0] = switch


# ------------------------------------------------------------------------------------ kernels
def add_kernel(n=256, threads=128, name="before_store"):
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32), C: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx, iket.range("kernel_total"):
            iket.mark("block_enter", payload=iket.payload(bx, dtype="int32"))
            for i in T.Parallel(threads):
                idx = bx * threads + i
                if idx < n:
                    iket.mark(name)
                    C[idx] = A[idx] + B[idx]
                    iket.mark("value", payload=iket.payload(C[idx], dtype="float32"))

    return main


def mark_kernel(name):
    @T.prim_func
    def main(A: T.Tensor((32,), T.float32)):
        with T.Kernel(1, threads=32):
            iket.mark(name)
            A[0] = A[0] + 1.0

    return main


def push_pop_kernel():
    @T.prim_func
    def main(A: T.Tensor((32,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            iket.range_start("phase", payload=iket.payload(bx, dtype="uint32"))
            A[0] = A[0] + 1.0
            iket.range_end("phase")
            iket.range_push("tail")
            iket.mark("tick", payload=7)
            iket.range_pop()

    return main


def lower_source(func, arch="sm_90a"):
    return tilelang.lower(func, target=f"cuda -arch={arch}", out_idx=-1).source


def iket_calls(func):
    calls = []

    def visit(node):
        if isinstance(node, tvm.tirx.Call) and node.args and isinstance(node.args[0], tvm.tirx.StringImm) \
                and node.args[0].value.startswith("TL_IKET_EVENT"):
            calls.append(node)

    tvm.tirx.stmt_functor.post_order_visit(func.body, visit)
    return calls


def event_attrs(source, name):
    match = re.search(rf"__iket_evt_decl_{re.escape(name)}_(\d+)_attrs\[60\] = \{{([^}}]*)\}};", source)
    assert match is not None, f"no metadata array for {name}"
    return int(match.group(1)), [int(v) for v in match.group(2).split(",")]


# ----------------------------------------------------------------------------------- frontend
def test_iket_is_a_cuda_tool_not_a_language_namespace():
    assert iket.__name__ == "tilelang.tools.cuda.iket"
    assert not hasattr(T, "iket")
    from tilelang.tools import cuda

    assert cuda.iket is iket


def test_events_are_extern_calls_carrying_their_metadata():
    func = add_kernel()
    calls = iket_calls(func)
    names = [c.args[0].value for c in calls]
    assert names == ["TL_IKET_EVENT", "TL_IKET_EVENT_PAYLOAD_U32", "TL_IKET_EVENT", "TL_IKET_EVENT_PAYLOAD_F32",
                     "TL_IKET_EVENT"]
    decoded = [metadata.decode(c.args[-1].value) for c in calls[:-1]]
    assert [(e.name, e.kind, e.payload_type) for e in decoded] == [
        ("kernel_total", "range", "NoPayload"), ("block_enter", "mark", "int32"),
        ("before_store", "mark", "NoPayload"), ("value", "mark", "float32")]
    assert decoded[0].range_id != 0
    assert len(calls[-1].args) == 2 and int(calls[-1].args[1]) == metadata.RANGE_END_ID   # the range end
    table = iket.event_table()
    assert [row["name"] for row in table] == ["kernel_total", "block_enter", "before_store", "value"]
    assert table[1]["payload_iket_id"] == 5 and table[1]["runtime_payload_iket_id"] == 0
    assert table[3]["payload_iket_id"] == 13


def test_push_pop_aliases_and_inferred_payloads():
    calls = iket_calls(push_pop_kernel())
    assert [c.args[0].value for c in calls] == ["TL_IKET_EVENT_PAYLOAD_U32", "TL_IKET_EVENT", "TL_IKET_EVENT",
                                                "TL_IKET_EVENT_PAYLOAD_U32", "TL_IKET_EVENT"]
    assert metadata.decode(calls[0].args[-1].value).payload_type == "uint32"
    assert dtype_of(calls[0].args[2]) == "uint32"          # the int32 block index, converted
    assert metadata.decode(calls[3].args[-1].value).payload_type == "int32"   # inferred from 7


def test_token_round_trip_and_validation():
    event = metadata.Event(name="界面", event_id=3, kind="range", range_id=42, payload_type="float32")
    token = metadata.encode(event)
    assert re.fullmatch(r"__tl_iket_v1_[A-Za-z0-9_-]+", token)
    assert metadata.decode(token) == event
    with pytest.raises(ValueError, match="not an IKET event token"):
        metadata.decode("nope")
    with pytest.raises(ValueError, match="corrupt"):
        metadata.decode(metadata.TOKEN_PREFIX + "@@@")
    with pytest.raises(ValueError, match="reserved id 31"):
        metadata.decode(metadata.encode(metadata.Event(name="x", event_id=31, kind="mark")))


def test_name_limit_is_checked_while_building_the_kernel():
    with pytest.raises(ValueError, match="at most 32 UTF-8 bytes"):
        mark_kernel("x" * 33)
    with pytest.raises(ValueError, match="at most 32 UTF-8 bytes"):
        mark_kernel("界" * 11)            # 33 bytes
    mark_kernel("界" * 10)                # 30 bytes: fine
    with pytest.raises(ValueError, match="non-empty str"):
        mark_kernel("")


def test_payload_dtype_errors():
    with pytest.raises(ValueError, match="unsupported IKET payload dtype 'float16'.*int32, uint32, float32"):
        iket.payload(1.0, dtype="float16")
    with pytest.raises(ValueError, match="unsupported IKET payload dtype 'int64'"):
        iket.payload(tvm.tirx.Var("v", "int64"))
    with pytest.raises(TypeError, match="cannot infer an IKET payload dtype"):
        iket.payload("text")
    assert iket.payload(3, dtype=T.float32).dtype == "float32"
    assert iket.payload(3, dtype="uint").dtype == "uint32"


def test_reusing_a_name_with_another_payload_type_is_rejected():
    with pytest.raises(ValueError, match="'same' was registered with payload type 'NoPayload'"):
        @T.prim_func
        def main(A: T.Tensor((32,), T.float32)):
            with T.Kernel(1, threads=32) as bx:
                iket.mark("same")
                iket.mark("same", payload=iket.payload(bx, dtype="int32"))


def test_events_outside_a_kernel_body_are_errors():
    with pytest.raises(RuntimeError, match=r"iket.mark\(\) records a device event"):
        iket.mark("host")
    with pytest.raises(RuntimeError, match=r"iket.range_push\(\)"):
        with iket.range("host"):
            pass

    with pytest.raises(RuntimeError, match="inside a T.Kernel body"):
        @T.prim_func
        def outside(A: T.Tensor((32,), T.float32)):
            iket.mark("before_kernel")
            with T.Kernel(1, threads=32):
                A[0] = 1.0


def test_unbalanced_ranges_are_errors():
    with pytest.raises(RuntimeError, match="without an open"):
        @T.prim_func
        def no_start(A: T.Tensor((32,), T.float32)):
            with T.Kernel(1, threads=32):
                iket.range_pop()

    with pytest.raises(RuntimeError, match="does not match the innermost open range 'b'"):
        @T.prim_func
        def crossed(A: T.Tensor((32,), T.float32)):
            with T.Kernel(1, threads=32):
                iket.range_push("a")
                iket.range_push("b")
                iket.range_pop("a")


def test_event_names_are_part_of_the_kernel_identity():
    first = mark_kernel("cache_first")
    iket.reset()
    second = mark_kernel("cache_second")
    assert first.script() != second.script()


# ------------------------------------------------------------------------------------ codegen
def test_outside_a_session_events_compile_to_nothing():
    source = lower_source(add_kernel())
    assert "TL_IKET_EVENT(" in source
    assert "__iket_meta_info" not in source and codegen.MARKER not in source


def test_session_instruments_the_source():
    with iket.session():
        source = lower_source(add_kernel())
    assert source.startswith("// " + codegen.MARKER)
    assert source.index("__iket_meta_info") < source.index('#include "tl.h"')
    assert "__iket_range_decl_kernel_total_" in source
    ids = {name: event_attrs(source, name)[0] for name in ("kernel_total", "block_enter", "before_store", "value")}
    assert sorted(ids.values()) == [1, 2, 3, 4]
    assert re.search(rf'TL_IKET_EVENT\({ids["before_store"]}, "__tl_iket_v1_', source)
    assert "TL_IKET_EVENT(31);" in source
    # payload events are plain events without runtime payloads; metadata declares no payload
    assert "#define TL_IKET_EVENT_PAYLOAD_U32(ID, VALUE, ...) tl_iket_event<ID>()" in source
    assert event_attrs(source, "value")[1][12:16] == [0, 0, 0, 0]
    attrs = event_attrs(source, "kernel_total")[1]
    assert attrs[0:4] == [60, 0, 0, 0] and attrs[16:20] == [1, 0, 0, 0]
    assert bytes(attrs[28:28 + attrs[24]]).decode() == "kernel_total"
    meta = re.search(r"__iket_meta_info\[48\] = \{([^}]*)\}", source).group(1).split(",")
    meta = [int(v) for v in meta]
    assert meta[8] == 5 and meta[12] == 31 and meta[24:28] == [157, 241, 190, 186] and meta[32] == 4


def test_runtime_payloads_emit_value_stores_and_payload_types():
    with iket.session(runtime_payloads=True):
        assert iket.runtime_payloads_enabled()
        assert iket.event_table() == []                     # reset on entry
        source = lower_source(add_kernel())
    assert not iket.runtime_payloads_enabled()              # restored
    assert "tl_iket_event_payload<ID>(__float_as_uint((float)(VALUE)))" in source
    assert '"mov.b32 p, %0;' in source and "pmevent.mask %1;" in source
    assert "__shared__" not in source[:source.index('#include "tl.h"')]     # no memory of its own
    assert event_attrs(source, "value")[1][12:16] == [13, 0, 0, 0]
    assert event_attrs(source, "block_enter")[1][12:16] == [5, 0, 0, 0]


def test_a_primfunc_built_before_the_session_keeps_its_events():
    func = mark_kernel("parsed_before_session")
    with iket.session():                                     # resets the registry
        assert iket.event_table() == []
        source = lower_source(func)
    assert "__iket_evt_decl_parsed_before_session_1_attrs" in source


def test_module_wide_numbering_and_conflicts():
    a = metadata.encode(metadata.Event(name="first", event_id=1, kind="mark"))
    b = metadata.encode(metadata.Event(name="second", event_id=1, kind="mark"))     # same frontend id
    source = f'TL_IKET_EVENT(1, "{a}");\nTL_IKET_EVENT(1, "{b}");\nTL_IKET_EVENT(1, "{a}");\n'
    out, events = codegen.number_events(source)
    assert [(e.name, e.event_id) for e in events] == [("first", 1), ("second", 2)]
    assert out.count("TL_IKET_EVENT(1, ") == 2 and out.count("TL_IKET_EVENT(2, ") == 1

    other = metadata.encode(metadata.Event(name="first", event_id=5, kind="mark", payload_type="int32"))
    with pytest.raises(ValueError, match="two schemas"):
        codegen.number_events(source + f'TL_IKET_EVENT_PAYLOAD_U32(5, x, "{other}");\n')
    with pytest.raises(ValueError, match="outside a TL_IKET_EVENT call"):
        codegen.number_events(f'const char* s = "{a}";')
    many = "".join(f'TL_IKET_EVENT(1, "{metadata.encode(metadata.Event(name=f"e{i}", event_id=1, kind="mark"))}");\n'
                   for i in range(31))
    with pytest.raises(ValueError, match="at most 30 distinct IKET events"):
        codegen.number_events(many)
    injected = codegen.inject('#include "tl.h"\n' + source, "sm_80")
    assert codegen.inject(injected, "sm_80") == injected            # idempotent
    assert codegen.inject("plain source", "sm_80") == "plain source"  # nothing to instrument


@needs_nvcc
@pytest.mark.parametrize("arch,payloads,session", [("sm_80", False, True), ("sm_90a", True, True),
                                                   ("sm_90a", False, False)])
def test_nvcc_accepts_the_instrumented_and_the_plain_kernel(arch, payloads, session):
    from tilelang.jit import nvcc

    if session:
        with iket.session(runtime_payloads=payloads):
            artifact = tilelang.lower(add_kernel(), target=f"cuda -arch={arch}", out_idx=-1)
        assert "__iket_meta_info" in artifact.source
    else:
        artifact = tilelang.lower(add_kernel(), target=f"cuda -arch={arch}", out_idx=-1)
        assert "__iket_meta_info" not in artifact.source
    cubin = nvcc.compile_cubin(artifact.source, artifact.arch, artifact.compile_flags)
    assert cubin and (b"__iket_meta_info" in cubin) == session


# ------------------------------------------------------------------------------------ session
def test_session_restores_an_absent_callback_and_the_cache_switch():
    cache._SWITCH[0] = None
    with iket.session():
        assert tvm_ffi.get_global_func(CUDA_POSTPROC, allow_missing=True) is not None
        assert iket.is_enabled() and not cache.enabled()
    assert tvm_ffi.get_global_func(CUDA_POSTPROC, allow_missing=True) is None
    assert cache._SWITCH[0] is None and not iket.is_enabled()
    # nothing left behind: a non-overriding registration still works
    tvm_ffi.register_global_func(CUDA_POSTPROC, f=lambda code, target: code, override=False)


def test_session_restores_a_previous_callback():
    tvm_ffi.register_global_func(CUDA_POSTPROC, f=lambda code, target: "// previous\n" + code, override=False)
    with iket.session():
        source = lower_source(mark_kernel("with_previous"))
    assert "__iket_evt_decl_with_previous" in source and "// previous" not in source
    restored = tvm_ffi.get_global_func(CUDA_POSTPROC)
    assert restored("code", tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})).startswith("// previous")


def test_nested_sessions_keep_the_outer_callback():
    with iket.session():
        with iket.session():
            pass
        assert iket.is_enabled()
        assert "__iket_evt_decl_after_inner" in lower_source(mark_kernel("after_inner"))
    assert not iket.is_enabled()
    assert tvm_ffi.get_global_func(CUDA_POSTPROC, allow_missing=True) is None


def test_a_session_object_cannot_be_entered_twice(tmp_path):
    cache._SWITCH[0] = True
    current = iket.session(runtime_payloads=True, output_dir=tmp_path / "out")
    with current:
        with pytest.raises(RuntimeError, match="cannot be entered again"), current:
            pass
        assert iket.runtime_payloads_enabled() and not cache.enabled()
        assert iket.output_dir() == tmp_path / "out"
    assert not iket.runtime_payloads_enabled() and cache._SWITCH[0] is True


def test_a_failed_non_overriding_session_restores_host_state(tmp_path, monkeypatch):
    monkeypatch.delenv("TL_IKET_OUTPUT_DIR", raising=False)
    tvm_ffi.register_global_func(CUDA_POSTPROC, f=lambda code, target: code, override=False)
    cache._SWITCH[0] = None
    with pytest.raises(RuntimeError, match="already registered"):
        with iket.session(override=False, output_dir=tmp_path / "unused", runtime_payloads=True):
            pass
    assert cache._SWITCH[0] is None and not iket.runtime_payloads_enabled() and not iket.is_enabled()
    assert iket.output_dir() is None and "TL_IKET_OUTPUT_DIR" not in os.environ
    assert tvm_ffi.get_global_func(CUDA_POSTPROC)("kept", None) == "kept"


def test_exceptions_inside_a_session_restore_state():
    with pytest.raises(ZeroDivisionError):
        with iket.session(runtime_payloads=True):
            1 / 0  # noqa: B018
    assert not iket.is_enabled() and not iket.runtime_payloads_enabled()
    assert tvm_ffi.get_global_func(CUDA_POSTPROC, allow_missing=True) is None


def test_compile_inside_a_session_bypasses_the_kernel_cache(tmp_path, monkeypatch):
    from tilelang.jit import lower_for_compile

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    cache._SWITCH[0] = True
    calls = []
    monkeypatch.setattr(cache, "load", lambda key: calls.append(key))
    with iket.session():
        key, artifact = lower_for_compile(mark_kernel("uncached"), -1, "cuda -arch=sm_90a")
    assert calls == [] and "__iket_meta_info" in artifact.source


# ------------------------------------------------------------------------------- path helpers
def test_output_helpers(tmp_path, monkeypatch):
    monkeypatch.delenv("TL_IKET_OUTPUT_DIR", raising=False)
    assert iket.output_dir() is None
    with pytest.raises(RuntimeError, match="no IKET output directory"):
        iket.output_path("k.cu")
    assert iket.output_path("k.cu", directory=tmp_path / "d") == tmp_path / "d" / "k.cu"
    with iket.session(output_dir=tmp_path / "s"):
        assert os.environ["TL_IKET_OUTPUT_DIR"] == str(tmp_path / "s")
        assert iket.output_dir() == tmp_path / "s"
        (tmp_path / "s" / "small.trace.json").write_text("{}")
        (tmp_path / "s" / "big.trace.json").write_text("{" + " " * 100 + "}")
        assert [p.name for p in iket.trace_files()] == ["big.trace.json", "small.trace.json"]
    assert iket.output_dir() is None and "TL_IKET_OUTPUT_DIR" not in os.environ
    assert iket.trace_files(directory=tmp_path / "missing") == []
    command = iket.profile_command(["python", "a b.py", "--x"], directory="/tmp/out dir")
    assert command == ("python -m iket.cli.main --output-dir '/tmp/out dir' --clobber profile --postprocess all "
                       "-- python 'a b.py' --x")
    assert iket.profile_command("python x.py", directory="/o", clobber=False).endswith("-- python x.py")
