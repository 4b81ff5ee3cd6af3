"""Every fixture under tests/fixtures/check/ produces exactly the diagnostics annotated in it.

The fixtures run through the same path as ``tilelang-check``: binding of factory parameters,
the worker process, the IR checks, the value-free checks and ignore comments.
"""

from __future__ import annotations

import pytest

from fixture_check import FIXTURES, check_fixture, parse_annotations

# Fixtures that need a special session (a short time limit) have their own test.
SPECIAL = {"build_timeout.py"}
FILES = sorted(p.name for p in FIXTURES.glob("*.py") if p.name not in SPECIAL)


@pytest.mark.parametrize("name", FILES)
def test_fixture(name, session_for):
    check_fixture(FIXTURES / name, session_for)


def test_every_code_has_a_fixture():
    """Each code the checker emits is pinned by at least one annotated fixture."""
    from tilelang.diagnostics import all_codes

    annotated = {e.code for p in FIXTURES.glob("*.py") for e in parse_annotations(p.read_text())}
    # TL0202 is raised only when the layout algebra cannot build any layout; no kernel reaches it
    # with the current layout inference (it falls back to replicated default layouts).
    # TL0005 is about files that are not readable text, which cannot carry annotations: it is
    # pinned by tests/cli/test_cli.py::test_unreadable_files_are_one_diagnostic_each_and_the_run_goes_on.
    untested = {"TL0202", "TL0005"}
    missing = {c.code for c in all_codes()} - annotated - untested
    assert not missing, f"codes without an annotated fixture: {sorted(missing)}"


def test_annotation_parser_reads_columns_and_column_one():
    text = "x = foo(a, b)\n#       ^ error[TL0101]: mismatch\nkernel(a)\n#^^^^^^^^ error[TL0702]\n"
    first, second = parse_annotations(text)
    assert (first.line, first.column, first.end_column, first.code, first.message) == (1, 9, 10, "TL0101", "mismatch")
    assert (second.line, second.column, second.end_column) == (3, 1, 10)


def test_examples_are_clean(session_for):
    """Correct kernels: no warning or error for any example (infos are allowed)."""
    examples = sorted((FIXTURES.parent.parent.parent / "examples").glob("*.py"))
    assert examples
    for path in examples:
        report = session_for().check_file(str(path))
        bad = [d for d in report.diagnostics if d.severity.value in ("error", "warning")]
        assert not bad, f"{path.name}: {[(d.code, d.message) for d in bad]}"


def test_correct_fixture_is_clean_and_fully_checked(session_for):
    report = session_for().check_file(str(FIXTURES / "initialized_ok.py"))
    assert report.diagnostics == [] and report.complete
