"""The one helper every diagnostic fixture goes through: expected diagnostics written inline.

A fixture is a TileLang file under ``tests/fixtures/check/``. Under an offending line, a comment
line made of carets says what is expected there (rust-analyzer's ``check_diagnostics`` style)::

            T.gemm(A_shared, B_shared, C_local)
    #                        ^^^^^^^^ error[TL0101]: K mismatch

The carets sit under the expected columns (start and exclusive end); the text after the severity
and code, when present, must occur in the message. A caret run that starts right at the ``#``
(``#^^^``) includes the ``#`` column, so column 1 can be annotated. Several annotation lines may
follow one line. ``# check-target: sm_80`` anywhere in the file picks the target (default sm_90a).

``check_fixture`` runs the file through the same path as ``tilelang-check`` (binding, worker,
analysis, suppression) and compares code, severity, line and columns, never counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tilelang.diagnostics import render_text

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "check"
_ANNOTATION = re.compile(r"^(?P<lead>\s*#)(?P<gap>\s*)(?P<carets>\^+)\s+(?P<severity>error|warning|info|hint)"
                         r"\[(?P<code>TL\d{4})\](?::\s*(?P<message>.*))?$")
_TARGET = re.compile(r"#\s*check-target:\s*(\S+)")


@dataclass(frozen=True)
class Expected:
    line: int
    column: int
    end_column: int
    severity: str
    code: str
    message: str = ""

    def key(self):
        return (self.line, self.column, self.end_column, self.severity, self.code)

    def __str__(self):
        return f"{self.line}:{self.column}-{self.end_column} {self.severity}[{self.code}] {self.message}".rstrip()


def parse_annotations(text: str) -> list:
    out, last_code_line = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        match = _ANNOTATION.match(line)
        if match is None:
            last_code_line = number
            continue
        if last_code_line is None:
            raise ValueError(f"annotation on line {number} has no line above it")
        start = len(match.group("lead")) + len(match.group("gap")) + 1
        if not match.group("gap"):
            start -= 1  # `#^^^`: the `#` is the first caret
        end = len(match.group("lead")) + len(match.group("gap")) + len(match.group("carets")) + 1
        out.append(Expected(last_code_line, start, end, match.group("severity"), match.group("code"),
                            (match.group("message") or "").strip()))
    return out


def fixture_target(text: str) -> str:
    match = _TARGET.search(text)
    return match.group(1) if match else "sm_90a"


def _actual_key(d):
    s = d.span
    end = s.end_column if not s.is_multiline else None
    return (s.line, s.column, end, d.severity.value, d.code)


def check_fixture(path, session_for) -> list:
    """Check one fixture; ``session_for(target)`` gives a ``worker.Session``. Returns the diagnostics."""
    path = Path(path).resolve()
    text = path.read_text(encoding="utf-8")
    expected = parse_annotations(text)
    report = session_for(fixture_target(text)).check_file(str(path))
    actual = report.diagnostics
    foreign = [d for d in actual if d.span is None or Path(d.span.file).resolve() != path]
    matched, missing = set(), []
    for e in expected:
        hit = [i for i, d in enumerate(actual) if i not in matched and _matches(e, d)]
        if hit:
            matched.add(hit[0])
        else:
            missing.append(e)
    extra = [d for i, d in enumerate(actual) if i not in matched and d not in foreign]
    if missing or extra or foreign:
        raise AssertionError(_explain(path, missing, extra + foreign, actual))
    return actual


def _matches(e: Expected, d) -> bool:
    if d.span is None:
        return False
    line, column, end, severity, code = _actual_key(d)
    if (line, column, severity, code) != (e.line, e.column, e.severity, e.code):
        return False
    if end is not None and end != e.end_column:
        return False
    return not e.message or e.message in d.message


def _explain(path, missing, extra, actual) -> str:
    parts = [f"diagnostics of {path.name} differ from its annotations"]
    if missing:
        parts.append("expected but not reported:\n" + "\n".join(f"  {m}" for m in missing))
    if extra:
        parts.append("reported but not annotated:\n" + render_text(extra))
    parts.append("all reported: " + ", ".join(
        f"{d.span.line}:{d.span.column}-{d.span.end_column} {d.severity.value}[{d.code}]" if d.span else d.code
        for d in actual))
    return "\n\n".join(parts)
