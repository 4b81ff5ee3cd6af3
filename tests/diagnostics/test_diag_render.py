"""Renderers: rustc-style text snapshots, JSON, SARIF and GitHub annotations."""

import json
import re
import textwrap

from tilelang.diagnostics import (
    JSON_SCHEMA_VERSION,
    Diagnostic,
    Fix,
    Note,
    Span,
    TextEdit,
    codes,
    render_github,
    render_json,
    render_sarif,
    render_summary,
    render_text,
)

SOURCE = textwrap.dedent(
    """\
    import tilelang.language as T


    def kernel():
        A_shared = T.alloc_shared((128, 32), "float16")
        B_shared = T.alloc_shared((64, 128), "float16")
        T.gemm(A_shared, B_shared, C_local)
    """
)
GEMM_LINE = SOURCE.splitlines()[6]
SOURCES = {"k.py": SOURCE}


def col(line_text: str, needle: str) -> int:
    return line_text.index(needle) + 1


def gemm_diagnostic() -> Diagnostic:
    start = col(GEMM_LINE, "T.gemm")
    return Diagnostic.from_code(
        "TL0101",
        "gemm K mismatch: A_shared is 128x32 but B_shared is 64x128",
        Span("k.py", 7, start, 7, len(GEMM_LINE) + 1),
        notes=[Note("K of A is 32"), Note("B_shared is allocated here", Span("k.py", 6, 5, 6, 13))],
        fix=Fix("transpose B", [TextEdit(Span("k.py", 7, len(GEMM_LINE), 7, len(GEMM_LINE)), ", transpose_B=True")]),
        binding="matmul(M=1024, N=1024, K=1001) from the call at line 60",
    )


def test_text_snapshot():
    expected = textwrap.dedent(
        """\
        error[TL0101]: gemm K mismatch: A_shared is 128x32 but B_shared is 64x128
         --> k.py:7:5
          |
        7 |     T.gemm(A_shared, B_shared, C_local)
          |     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
          |
          = note: K of A is 32
          = note: checked with matmul(M=1024, N=1024, K=1001) from the call at line 60
          = help: transpose B
        note: B_shared is allocated here
         --> k.py:6:5
          |
        6 |     B_shared = T.alloc_shared((64, 128), "float16")
          |     ^^^^^^^^"""
    )
    assert render_text([gemm_diagnostic()], SOURCES) == expected


def test_carets_sit_under_the_span_columns():
    start = col(GEMM_LINE, "B_shared")
    diag = Diagnostic.from_code("TL0101", "m", Span("k.py", 7, start, 7, start + len("B_shared")))
    lines = render_text([diag], SOURCES).splitlines()
    code_line, caret_line = lines[3], lines[4]
    assert code_line.endswith(GEMM_LINE)
    offset = len(code_line) - len(GEMM_LINE)
    assert caret_line.index("^") - offset == start - 1
    assert caret_line.count("^") == len("B_shared")
    assert GEMM_LINE[start - 1 : start - 1 + caret_line.count("^")] == "B_shared"


def test_multiline_span_underlines_the_first_line_to_its_end():
    source = "with T.Kernel(8, threads=128) as bx:   \n    pass\n"
    diag = Diagnostic.from_code("TL0503", "too many threads", Span("m.py", 1, 6, 2, 9))
    lines = render_text([diag], {"m.py": source}).splitlines()
    assert lines[4] == "  | " + " " * 5 + "^" * len("T.Kernel(8, threads=128) as bx:")


def test_gutter_widens_with_line_numbers_and_tabs_expand():
    source = "\n" * 11 + "\tx = y\n"
    diag = Diagnostic.from_code("TL0002", "unsupported", Span("t.py", 12, 2, 12, 3))
    assert render_text([diag], {"t.py": source}).splitlines()[1:] == [
        "  --> t.py:12:2",
        "   |",
        "12 |     x = y",
        "   |     ^",
    ]


def test_missing_file_and_missing_span_do_not_fail(tmp_path):
    gone = Diagnostic.from_code("TL0301", "misaligned", Span(str(tmp_path / "gone.py"), 3, 1, 3, 4))
    past_end = Diagnostic.from_code("TL0301", "misaligned", Span("k.py", 999, 1, 999, 4))
    nowhere = Diagnostic.from_code("TL0004", "bad config", None, notes=[Note("in pyproject.toml")])
    text = render_text([gone, past_end, nowhere], SOURCES)
    assert text.split("\n\n") == [
        f"warning[TL0301]: misaligned\n --> {tmp_path / 'gone.py'}:3:1",
        "warning[TL0301]: misaligned\n   --> k.py:999:1",
        "error[TL0004]: bad config\n  = note: in pyproject.toml",
    ]
    assert render_text([]) == ""


def test_reads_the_source_from_disk(tmp_path):
    path = tmp_path / "k.py"
    path.write_text(SOURCE)
    diag = Diagnostic.from_code("TL0101", "m", Span(str(path), 7, 5, 7, 11))
    assert render_text([diag]).splitlines()[3:] == ["7 |     T.gemm(A_shared, B_shared, C_local)", "  |     ^^^^^^"]


def test_color_only_adds_escape_codes():
    plain = render_text([gemm_diagnostic()], SOURCES)
    colored = render_text([gemm_diagnostic()], SOURCES, color=True)
    assert "\x1b[" in colored and "\x1b[" not in plain
    assert re.sub(r"\x1b\[[0-9;]*m", "", colored) == plain


def test_summary():
    diags = [gemm_diagnostic(), Diagnostic.from_code("TL0801", "m"), Diagnostic.from_code("TL0301", "m")]
    assert render_summary(diags) == "1 error, 1 warning, 1 info"
    assert render_summary(diags[:1] * 2) == "2 errors"
    assert render_summary([]) == "no problems found"


def test_json_schema_and_round_trip():
    diag = gemm_diagnostic()
    document = json.loads(render_json([diag, Diagnostic.from_code("TL0801", "unbound")]))
    assert document["version"] == JSON_SCHEMA_VERSION == 1
    assert document["tool"]["name"] == "tilelang-check"
    assert document["positions"] == {"base": 1, "end": "exclusive", "column_unit": "codepoint"}
    assert document["summary"] == {"error": 1, "warning": 0, "info": 1, "hint": 0}
    first = document["diagnostics"][0]
    assert first["code"] == "TL0101" and first["name"] == "gemm-shape-mismatch"
    assert first["url"] == "https://tilelang.dev/diagnostics#tl0101"
    assert first["span"] == {"file": "k.py", "line": 7, "column": 5, "end_line": 7, "end_column": 40}
    assert [Diagnostic.from_dict(d) for d in document["diagnostics"]][0] == diag


def test_json_of_unknown_code_has_null_name_and_url():
    document = json.loads(render_json([Diagnostic("TL9999", "error", "m", None)]))
    assert document["diagnostics"][0]["name"] is None and document["diagnostics"][0]["url"] is None


def test_sarif_structure(tmp_path):
    diag = gemm_diagnostic()
    located = Diagnostic.from_code("TL0301", "misaligned", Span(str(tmp_path / "pkg" / "k.py"), 3, 1, 3, 4))
    log = json.loads(render_sarif([diag, located], root=tmp_path))
    assert log["version"] == "2.1.0" and "sarif-2.1.0" in log["$schema"]
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "tilelang-check"
    assert [r["id"] for r in driver["rules"]] == [c.code for c in codes.all_codes()]
    for rule in driver["rules"]:
        assert rule["helpUri"] == codes.get(rule["id"]).url
        assert rule["shortDescription"]["text"] and rule["help"]["markdown"]
    assert run["columnKind"] == "unicodeCodePoints"

    first, second = run["results"]
    assert driver["rules"][first["ruleIndex"]]["id"] == "TL0101"
    assert first["level"] == "error" and first["message"]["text"].startswith("gemm K mismatch")
    assert "checked with matmul" in first["message"]["text"]
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "k.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 7, "startColumn": 5, "endLine": 7, "endColumn": 40}
    assert first["relatedLocations"][0]["message"]["text"] == "B_shared is allocated here"
    replacement = first["fixes"][0]["artifactChanges"][0]["replacements"][0]
    assert replacement["insertedContent"]["text"] == ", transpose_B=True"
    assert second["level"] == "warning"
    assert second["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pkg/k.py"


def test_github_annotations():
    diags = [
        gemm_diagnostic(),
        Diagnostic.from_code("TL0301", "100% misaligned", Span("dir,a/k:1.py", 3, 1, 3, 4)),
        Diagnostic.from_code("TL0801", "no values for matmul"),
    ]
    assert render_github(diags).splitlines() == [
        "::error file=k.py,line=7,col=5,endLine=7,endColumn=40,title=TL0101::"
        "gemm K mismatch: A_shared is 128x32 but B_shared is 64x128"
        "%0Anote: K of A is 32%0Anote: B_shared is allocated here (k.py:6:5)"
        "%0Anote: checked with matmul(M=1024, N=1024, K=1001) from the call at line 60%0Ahelp: transpose B",
        "::warning file=dir%2Ca/k%3A1.py,line=3,col=1,endLine=3,endColumn=4,title=TL0301::100%25 misaligned",
        "::notice title=TL0801::no values for matmul",
    ]
