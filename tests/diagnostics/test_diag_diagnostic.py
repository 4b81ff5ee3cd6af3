"""Diagnostic values: registry defaults, JSON round trip, pickling, ordering."""

import json
import pickle

import pytest

from tilelang.diagnostics import Diagnostic, Fix, Note, Severity, Span, TextEdit, has_errors, sort_diagnostics


def full_diagnostic() -> Diagnostic:
    return Diagnostic.from_code(
        "TL0101",
        "gemm K mismatch: A_shared is 128x32 but B_shared is 64x128",
        Span("k.py", 40, 17, 40, 52),
        notes=[Note("B_shared is allocated here", Span("k.py", 31, 13, 31, 21)), Note("K of A is 32")],
        fix=Fix("transpose B", [TextEdit(Span("k.py", 40, 51, 40, 51), ", transpose_B=True")]),
        binding="matmul(M=1024, N=1024, K=1001) from the call at line 60",
    )


def test_from_code_takes_the_registry_severity_unless_overridden():
    assert Diagnostic.from_code("TL0101", "m").severity is Severity.ERROR
    assert Diagnostic.from_code("TL0801", "m").severity is Severity.INFO
    assert Diagnostic.from_code("TL0101", "m", severity="warning").severity is Severity.WARNING
    with pytest.raises(KeyError, match="TL9999"):
        Diagnostic.from_code("TL9999", "m")


def test_severity_accepts_strings_and_ranks_like_lsp():
    diag = Diagnostic("TL0101", "error", "m", None)
    assert diag.severity is Severity.ERROR
    assert [s.rank for s in Severity] == [1, 2, 3, 4]


def test_json_round_trip_is_lossless():
    diag = full_diagnostic()
    data = json.loads(json.dumps(diag.to_dict()))
    assert Diagnostic.from_dict(data) == diag
    bare = Diagnostic.from_code("TL0004", "bad config")
    assert Diagnostic.from_dict(json.loads(json.dumps(bare.to_dict()))) == bare


def test_pickle_round_trip():
    diag = full_diagnostic()
    assert pickle.loads(pickle.dumps(diag)) == diag


def test_fix_edits_are_stored_as_a_tuple():
    fix = Fix("t", [TextEdit(Span("k.py", 1, 1, 1, 1), "x")])
    assert isinstance(fix.edits, tuple) and hash(fix)


def test_url_and_sorting():
    assert full_diagnostic().url == "https://tilelang.dev/diagnostics#tl0101"
    assert Diagnostic("TL9999", Severity.ERROR, "m", None).url is None
    late = Diagnostic.from_code("TL0301", "w", Span("k.py", 9, 1, 9, 2))
    early_warning = Diagnostic.from_code("TL0403", "w", Span("k.py", 2, 1, 2, 2))
    early_error = Diagnostic.from_code("TL0101", "e", Span("k.py", 2, 1, 2, 2))
    assert sort_diagnostics([late, early_warning, early_error]) == [early_error, early_warning, late]
    assert has_errors([late, early_error]) and not has_errors([late])
