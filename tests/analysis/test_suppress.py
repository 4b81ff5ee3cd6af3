"""Ignore comments: what they suppress, and TL0901/TL0902 for the ones that are wrong."""

from __future__ import annotations

from tilelang.analysis.suppress import apply_ignores, find_ignores
from tilelang.diagnostics import Diagnostic, Span

SOURCE = (
    "a = 1  # tilelang: ignore[TL0401]\n"
    "b = 2  # tilelang: ignore[TL0401, TL0301]\n"
    "c = 3  # tilelang: ignore\n"
    "d = '# tilelang: ignore[TL0401]'\n"
    "e = 5  # tilelang: ignore[TL401]\n"
    "f = 6  # tilelang: ignore TL0401\n"
    "g = 7  # tilelang: ignore  (the shapes are checked at run time)\n"
)


def diag(code, line):
    return Diagnostic.from_code(code, "m", Span("k.py", line, 1, line, 2))


def test_comments_are_parsed_with_their_codes_and_columns():
    comments = {c.line: c for c in find_ignores("k.py", SOURCE)}
    assert set(comments) == {1, 2, 3, 5, 6, 7}  # line 4 is a string, not a comment
    assert list(comments[2].codes) == ["TL0401", "TL0301"]
    assert comments[2].codes["TL0301"].column == SOURCE.splitlines()[1].index("TL0301") + 1
    assert comments[3].bare and comments[7].bare
    assert "not a diagnostic code" in comments[5].error
    assert "brackets" in comments[6].error


def test_matching_codes_are_suppressed_and_unused_ones_reported():
    comments = find_ignores("k.py", SOURCE)
    kept = apply_ignores([diag("TL0401", 1), diag("TL0401", 2), diag("TL0101", 3), diag("TL0401", 4)],
                         comments, report_unused=True)
    by_code = sorted((d.code, d.span.line) for d in kept)
    assert ("TL0401", 4) in by_code          # a comment inside a string suppresses nothing
    assert ("TL0901", 2) in by_code          # TL0301 on line 2 matched nothing
    assert ("TL0901", 7) in by_code          # a bare ignore that suppressed nothing
    assert ("TL0902", 5) in by_code and ("TL0902", 6) in by_code
    assert ("TL0401", 1) not in by_code and ("TL0101", 3) not in by_code


def test_unused_ignores_are_not_reported_for_a_partial_analysis():
    kept = apply_ignores([], find_ignores("k.py", "x = 1  # tilelang: ignore[TL0301]\n"), report_unused=False)
    assert kept == []
