"""Source spans on built TIR (``tilelang.ir``) and ``tilelang.errors.enrich_error``."""

import pytest
import tvm

import tilelang
import tilelang.language as T
from tvm.tirx.stmt_functor import post_order_visit  # noqa: E402 - upstream's name, added by `import tilelang`
from tilelang.errors import enrich_error
from tilelang.ir import (get_buffer_span, get_stmt_span, make_span, set_buffer_span, set_stmt_span, span_coverage,
                         span_to_location)


def _line(marker):
    with open(__file__) as fh:
        return next(i for i, text in enumerate(fh, 1) if marker in text and "_line(" not in text)


def _kernel():
    @T.prim_func
    def main(A: T.Tensor((128, 128), "float16"),  # mark_param_a
             B: T.Tensor((128, 128), "float16")):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared((128, 128), "float16")  # mark_alloc
            T.copy(A, A_shared)  # mark_copy
            T.copy(A_shared, B)

    return main


def _stmt_lines(func):
    lines = {}

    def visit(node):
        if isinstance(node, tvm.tirx.Stmt):
            loc = span_to_location(get_stmt_span(node))
            if loc is not None:
                lines.setdefault(loc[1], []).append(type(node).__name__)

    post_order_visit(func.body, visit)
    return lines


def test_statements_params_and_allocations_point_at_their_lines():
    func = _kernel()
    assert _line("mark_copy") in _stmt_lines(func)
    assert span_to_location(get_buffer_span(func.buffer_map[func.params[0]])) == (__file__, _line("mark_param_a"))
    allocs = []
    post_order_visit(func.body, lambda n: allocs.append(n.buffer) if type(n).__name__ == "AllocBuffer" else None)
    assert [span_to_location(get_buffer_span(b))[1] for b in allocs] == [_line("mark_alloc")]
    cov = span_coverage(func)
    assert cov["buffers"] == [3, 3] and cov["stmts"][0] / cov["stmts"][1] > 0.5


def test_macro_statements_point_at_the_macro_body():
    @T.macro
    def load(A, A_shared):
        T.copy(A, A_shared)  # mark_macro_copy

    @T.prim_func
    def main(A: T.Tensor((128,), "float16")):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared((128,), "float16")
            load(A, A_shared)

    assert _line("mark_macro_copy") in _stmt_lines(main)


def test_spans_can_be_turned_off(monkeypatch):
    with_spans = _kernel()
    monkeypatch.setenv("TILELANG_ENABLE_IR_SPAN", "0")
    without = _kernel()
    assert span_coverage(without)["stmts"][0] == 0 and span_coverage(without)["buffers"][0] == 0
    tvm.ir.assert_structural_equal(with_spans, without)


def test_setters_write_in_place():
    func = _kernel()
    span = make_span(__file__, 42)
    set_stmt_span(func.body, span)
    assert span_to_location(get_stmt_span(func.body)) == (__file__, 42)
    buf = func.buffer_map[func.params[0]]
    set_buffer_span(buf, span)
    assert span_to_location(get_buffer_span(buf)) == (__file__, 42)


@pytest.mark.parametrize("code", ["TL0203", "TL0601"])
def test_located_lowering_errors(code):
    if code == "TL0203":
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                frag = T.alloc_fragment((4,), "float32")
                for i in T.Parallel(4):
                    frag[1] = A[i]
    else:
        @T.prim_func
        def main(A: T.Tensor((128,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128):
                B_shared = T.alloc_shared((64,), "float32")
                T.copy(A[0:128], B_shared[0:64])
    with pytest.raises(tilelang.TileLangCompileError) as info:
        tilelang.lower(main, target="sm_90a")
    assert f"error[{code}]" in str(info.value) and f"--> {__file__}:" in str(info.value)


def test_enrich_error_renders_a_trailing_marker(tmp_path):
    src = tmp_path / "dir with spaces" / "kernel.py"
    src.parent.mkdir()
    src.write_text("one\n    two\nthree\n")
    exc = enrich_error(ValueError(f"boom\n  --> {src}:2:1"))
    assert "2 |     two" in str(exc) and str(exc).startswith("boom")
    plain = ValueError("no marker")
    assert enrich_error(plain) is plain and str(plain) == "no marker"


def test_another_backends_target_reports_the_kernels_errors_first():
    """``tilelang.lower(func, target="c")`` (upstream's C backend, not generated here): a kernel
    with an error gets its located error, as upstream reports it whatever the target; a correct
    kernel gets the unsupported-target error."""
    @T.prim_func
    def bad(A: T.Tensor((128,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            B_shared = T.alloc_shared((64,), "float32")
            T.copy(A[0:128], B_shared[0:64])

    @T.prim_func
    def good(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A[bx * 128 + T.get_thread_binding()] = T.float32(1)

    with pytest.raises(tilelang.TileLangCompileError) as info:
        tilelang.lower(bad, target="c")
    assert "error[TL0601]" in str(info.value) and f"--> {__file__}:" in str(info.value)
    with pytest.raises(ValueError, match="unsupported target 'c'"):
        tilelang.lower(good, target="c")
