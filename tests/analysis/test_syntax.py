"""The shared parse (``tilelang.analysis.syntax``) and what is built on it: one parse per text,
walk order identical to ``ast.walk``, the lazy span index, and directive comments found without
tokenizing texts that cannot hold one. No tvm needed except for ``report``."""

from __future__ import annotations

import ast
import tokenize
from pathlib import Path

import pytest

from tilelang.analysis import source, suppress, syntax
from tilelang_lsp import binding

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "check"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

TEXT = '''import tilelang
import tilelang.language as T

M = 64


@tilelang.jit(out_idx=[-1])
def scale(N, block=32):
    @T.prim_func
    def kernel(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(N // block, threads=block) as bx:
            acc = T.alloc_fragment((block,), "float32")
            T.copy(A[bx * block], acc)
            T.copy(acc, B[bx * block])

    return kernel


def main():
    k = scale(M)
    k(1, 2)
    a = 1; b = 2
'''


def _sources():
    texts = [TEXT] + [f.read_text() for f in sorted(FIXTURES.glob("*.py")) + sorted(EXAMPLES.glob("*.py"))]
    return [t for t in texts if _parses(t)]


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
        return True
    except SyntaxError:
        return False


@pytest.mark.parametrize("index", range(len(_sources())))
def test_walk_order_parents_and_owners_match_ast_walk(index):
    text = _sources()[index]
    tree = syntax.syntax_tree(text)
    assert [type(n) for n in tree.nodes] == [type(n) for n in ast.walk(ast.parse(text))]
    assert all(a is b for a, b in zip(tree.nodes, ast.walk(tree.tree)))
    for i, parent in enumerate(tree.parents[1:], 1):
        assert any(child is tree.nodes[i] for child in ast.iter_child_nodes(tree.nodes[parent]))
    for i in range(1, len(tree.nodes)):
        top = i
        while tree.parents[top] > 0:
            top = tree.parents[top]
        assert tree.owners[i] == (top - 1 if tree.parents[top] == 0 and top <= len(tree.tree.body) else -1)
    for k, stmt in enumerate(tree.tree.body):
        assert tree.names_by_statement()[k] == {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}


def test_one_parse_per_text_shared_by_the_file_model(monkeypatch):
    text = TEXT + "\n# a text of its own\n"
    parses = []
    real = ast.parse
    monkeypatch.setattr(ast, "parse", lambda *a, **k: parses.append(1) or real(*a, **k))
    model = source.parse_file("/k.py", text)
    assert source.parse_file("/k.py", text) is model
    assert syntax.syntax_tree(text).tree is model.tree
    assert source.parse_file("/other.py", text).tree is model.tree
    assert len(parses) == 1


def test_syntax_errors_are_raised_with_the_file_name_and_not_cached():
    for _ in range(2):
        with pytest.raises(SyntaxError) as info:
            source.parse_file("/broken.py", "def f(:\n")
        assert info.value.filename == "/broken.py"


def test_the_file_model_finds_factories_calls_and_kernel_calls():
    model = source.parse_file("/k.py", TEXT)
    assert list(model.factories) == ["scale"]
    assert model.factories["scale"].kernel_def.name == "kernel"
    assert [(c.factory, c.args) for c in model.calls] == [("scale", ["M"])]
    assert [(k.factory, k.nargs) for k in model.kernel_calls] == [("scale", 2)]


def test_directive_comments_skip_texts_without_a_directive(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("tokenized a text without `tilelang:`")

    monkeypatch.setattr(tokenize, "generate_tokens", fail)
    assert syntax.directive_comments("x = 1  # a comment\n") == ()
    assert binding.find_pragmas("/k.py", "x = 1\n") == []
    assert suppress.find_ignores("/k.py", "x = 1  # ignore\n") == []


def test_directive_comments_are_the_comment_tokens():
    text = "s = '# tilelang: ignore'  # tilelang: ignore[TL0301]\n# tilelang: check f(N=1)\n"
    found = syntax.directive_comments(text)
    assert [(t.start, t.string) for t in found] == [((1, 26), "# tilelang: ignore[TL0301]"),
                                                    ((2, 0), "# tilelang: check f(N=1)")]
    assert [c.line for c in suppress.find_ignores("/k.py", text)] == [1]
    assert [p.line for p in binding.find_pragmas("/k.py", text)] == [2]
    assert syntax.directive_comments("x = '''# tilelang: check\n") == ()   # cannot be tokenized


def test_directive_patterns_need_the_hint():
    # directive_comments skips texts without DIRECTIVE_HINT: a pattern that could match without it
    # would lose comments.
    assert syntax.DIRECTIVE_HINT.pattern in binding._PRAGMA.pattern
    assert syntax.DIRECTIVE_HINT.pattern in suppress._DIRECTIVE.pattern


def test_ignore_comments_are_fresh_objects_for_every_call():
    text = "x = 1  # tilelang: ignore[TL0301]\n"
    first, second = suppress.find_ignores("/k.py", text), suppress.find_ignores("/k.py", text)
    assert first[0] is not second[0]
    first[0].used.add("TL0301")
    assert not second[0].used


def test_the_span_index_finds_what_a_full_index_finds():
    from tilelang.analysis.report import SourceIndex

    index = SourceIndex(TEXT)
    full = {}
    for node in ast.walk(ast.parse(TEXT)):
        if hasattr(node, "lineno") and hasattr(node, "col_offset"):
            full.setdefault((node.lineno, node.col_offset), []).append(node)
    for (line, col), nodes in full.items():
        assert ast.dump(index.at(line, col + 1)) == ast.dump(nodes[0])
        assert index.at(line, col + 1, type(nodes[-1])) is not None
    assert index.at(100, 1) is None
    assert index.enclosing_function(13).name == "kernel"
    assert index.enclosing_function(8).name == "scale"
    assert index.enclosing_function(4) is None
    assert index.assignment(12, 19).targets[0].id == "acc"
    assert index.assignment(22, 16).targets[0].id == "b"      # the second statement of the line
    assert SourceIndex("def f(:\n").at(1, 1) is None
