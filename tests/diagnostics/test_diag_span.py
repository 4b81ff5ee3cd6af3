"""Span: 1-based, end-exclusive ranges, and conversion from TVM and ast locations."""

import ast
import textwrap

import pytest

from tilelang.diagnostics import Span, first_span


def test_span_is_ordered_hashable_and_prints_file_line_column():
    a, b = Span("k.py", 3, 5, 3, 9), Span("k.py", 4, 1, 4, 2)
    assert sorted([b, a]) == [a, b]
    assert len({a, Span("k.py", 3, 5, 3, 9)}) == 1
    assert str(a) == "k.py:3:5"
    assert a.format_range() == "k.py:3:5-3:9"


def test_span_rejects_zero_based_or_inverted_ranges():
    with pytest.raises(ValueError):
        Span("k.py", 0, 1, 0, 2)
    with pytest.raises(ValueError):
        Span("k.py", 3, 9, 3, 5)


def test_span_end_column_is_exclusive():
    span = Span("k.py", 3, 5, 3, 9)
    assert span.contains(3, 5) and span.contains(3, 8)
    assert not span.contains(3, 9) and not span.contains(3, 4)
    assert Span.point("k.py", 2, 7) == Span("k.py", 2, 7, 2, 8)


def test_union_overlaps_and_first_span():
    a, b = Span("k.py", 3, 5, 3, 9), Span("k.py", 5, 1, 6, 4)
    assert a.union(b) == Span("k.py", 3, 5, 6, 4)
    assert not a.overlaps(b) and a.overlaps(Span("k.py", 3, 8, 3, 12))
    assert not a.overlaps(Span("other.py", 3, 5, 3, 9))
    assert first_span(None, b, a) is b and first_span(None) is None
    assert a.shifted(10) == Span("k.py", 13, 5, 13, 9)


def test_dict_round_trip():
    span = Span("dir/k.py", 3, 5, 4, 1)
    assert Span.from_dict(span.to_dict()) == span


def test_from_tvm_handles_none_unknown_and_sequential_spans():
    tvm = pytest.importorskip("tvm")
    assert Span.from_tvm(None) is None
    assert Span.from_tvm(tvm.ir.Span(tvm.ir.SourceName("k.py"), 0, 0, 0, 0)) is None
    assert Span.from_tvm(tvm.ir.Span(None, 3, 3, 1, 5)) == Span("<unknown>", 3, 1, 3, 5)
    name = tvm.ir.SourceName("k.py")
    seq = tvm.ir.SequentialSpan([tvm.ir.Span(name, 0, 0, 0, 0), tvm.ir.Span(name, 2, 3, 3, 7)])
    assert Span.from_tvm(seq) == Span("k.py", 2, 3, 3, 7)
    assert Span.from_tvm(object()) is None


def test_from_tvm_matches_the_columns_the_parser_stamps(tmp_path):
    """The parser's span of a statement, rendered, underlines exactly that statement."""
    tvm = pytest.importorskip("tvm")
    from tvm.script import tirx as T  # noqa: F401  (used by the kernel file)

    path = tmp_path / "kern.py"
    path.write_text(
        textwrap.dedent(
            """\
            from tvm.script import tirx as T


            @T.prim_func
            def f(A: T.Buffer((8,), "float32")):
                for i in range(8):
                    A[i] = A[i] + T.float32(1)
            """
        )
    )
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    loop = namespace["f"].body
    store = loop.body
    assert Span.from_tvm(loop.span) == Span(str(path), 6, 5, 7, 35)
    assert Span.from_tvm(store.span) == Span(str(path), 7, 9, 7, 35)
    assert isinstance(loop, tvm.tirx.For)


def test_from_ast_converts_byte_offsets_to_characters():
    source = 'x = "é" + y\n'
    node = ast.parse(source).body[0].value.right  # the name `y`
    assert node.col_offset == 11  # CPython counts UTF-8 bytes: "é" is two
    assert Span.from_ast(node, "k.py") == Span("k.py", 1, 12, 1, 13)
    assert Span.from_ast(node, "k.py", source) == Span("k.py", 1, 11, 1, 12)
    assert Span.from_ast(node, "k.py", line_offset=9).line == 10
    assert Span.from_ast(ast.Module(body=[], type_ignores=[]), "k.py") is None
