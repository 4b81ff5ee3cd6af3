"""Render diagnostics for people (text with caret snippets) and for tools (JSON, SARIF, GitHub).

Every renderer takes a list of ``Diagnostic`` and returns a ``str``; none of them raises on a
missing or unreadable source file (the snippet is left out) or on a code the registry does not know.
The JIT's ``TileLangCompileError``, ``tilelang-check`` and the docs all use these functions, so the
user sees the same text everywhere.

Text (rustc style)::

    error[TL0101]: gemm K mismatch: A_shared is 128x32 but B_shared is 64x128
      --> examples/gemm.py:40:17
       |
    40 |                 T.gemm(A_shared, B_shared, C_local)
       |                 ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
       |
       = note: checked with matmul(M=1024, N=1024, K=1024) from the call at line 52
       = help: transpose B: `T.gemm(A_shared, B_shared, C_local, transpose_B=True)`

The JSON schema is ``JSON_SCHEMA_DOC`` below (also printed in docs/diagnostics.md).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from . import codes
from .codes import Severity
from .diagnostic import Diagnostic
from .span import Span, split_lines

JSON_SCHEMA_VERSION = 1
TOOL_NAME = "tilelang-check"
TOOL_URL = "https://tilelang.dev"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"

JSON_SCHEMA_DOC = """\
`tilelang-check --output-format=json` prints one JSON object:

```json
{
  "version": 1,
  "tool": {"name": "tilelang-check", "version": "0.1.0"},
  "positions": {"base": 1, "end": "exclusive", "column_unit": "codepoint"},
  "summary": {"error": 1, "warning": 0, "info": 0, "hint": 0},
  "diagnostics": [
    {
      "code": "TL0101",
      "name": "gemm-shape-mismatch",
      "url": "https://tilelang.dev/diagnostics#tl0101",
      "severity": "error",
      "message": "...",
      "span": {"file": "k.py", "line": 40, "column": 17, "end_line": 40, "end_column": 52},
      "notes": [{"message": "...", "span": null}],
      "fix": {"title": "...", "edits": [{"span": {"...": "..."}, "new_text": "..."}]},
      "binding": "matmul(M=1024, N=1024, K=1024) from the call at line 52"
    }
  ]
}
```

- `version` is the schema version; it changes only when a field changes meaning or disappears.
- Lines and columns are **1-based**; the end position is **exclusive** (`end_column` is the column
  just after the last highlighted character). Columns count Unicode code points.
- `severity` is one of `error`, `warning`, `info`, `hint`.
- `span`, `fix`, `binding` and a note's `span` may be `null`. `name` and `url` are `null` for a
  code this version does not know.
"""


def _tool_version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("tilelang")
    except (ImportError, PackageNotFoundError):
        return "0.0.0+unknown"


# Text ----------------------------------------------------------------------------------------------

_TAB = "    "
_RESET = "\x1b[0m"
_COLORS = {
    Severity.ERROR: "\x1b[1;31m",
    Severity.WARNING: "\x1b[1;33m",
    Severity.INFO: "\x1b[1;36m",
    Severity.HINT: "\x1b[1;32m",
}
_GUTTER = "\x1b[1;34m"
_BOLD = "\x1b[1m"


class _SourceReader:
    """Lines of source files: from ``sources`` when given, else read once from disk; ``None`` if unreadable."""

    def __init__(self, sources: Mapping[str, str] | None) -> None:
        self._sources = dict(sources or {})
        self._cache: dict[str, list[str] | None] = {}

    def line(self, file: str, line: int) -> str | None:
        if file not in self._cache:
            self._cache[file] = self._load(file)
        lines = self._cache[file]
        if lines is None or not 1 <= line <= len(lines):
            return None
        return lines[line - 1]

    def _load(self, file: str) -> list[str] | None:
        text = self._sources.get(file)
        if text is None:
            try:
                with open(file, encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
            except (OSError, ValueError):
                return None
        return split_lines(text)


class _Style:
    def __init__(self, color: bool) -> None:
        self.color = color

    def paint(self, text: str, code: str) -> str:
        return f"{code}{text}{_RESET}" if self.color and text else text

    def severity(self, text: str, severity: Severity) -> str:
        return self.paint(text, _COLORS[severity])

    def gutter(self, text: str) -> str:
        return self.paint(text, _GUTTER)

    def bold(self, text: str) -> str:
        return self.paint(text, _BOLD)


def _caret_range(text: str, span: Span) -> tuple[int, int]:
    """Display offset and width of the carets under ``text`` (line ``span.line``), tabs expanded."""
    start = span.column - 1
    if span.is_multiline:
        end = max(len(text.rstrip()), start + 1)
    else:
        end = max(span.end_column - 1, start + 1)
    offset = len(text[:start].replace("\t", _TAB)) + max(0, start - len(text))
    width = len(text[start:end].replace("\t", _TAB))
    return offset, max(width, 1)


def _snippet(span: Span, severity: Severity, width: int, reader: _SourceReader, style: _Style) -> list[str]:
    pad = " " * width
    lines = [f"{pad}{style.gutter('-->')} {span}"]
    text = reader.line(span.file, span.line)
    if text is None:
        return lines
    offset, carets = _caret_range(text, span)
    lines += [
        style.gutter(f"{pad} |"),
        style.gutter(f"{span.line:>{width}} |") + " " + text.replace("\t", _TAB).rstrip(),
        style.gutter(f"{pad} |") + " " + " " * offset + style.severity("^" * carets, severity),
    ]
    return lines


def _render_one(diag: Diagnostic, reader: _SourceReader, style: _Style) -> str:
    spans = [s for s in [diag.span, *(n.span for n in diag.notes)] if s is not None]
    width = max((len(str(s.line)) for s in spans), default=1)
    pad = " " * width
    header = style.severity(f"{diag.severity.value}[{diag.code}]", diag.severity)
    lines = [f"{header}: {style.bold(diag.message)}"]
    if diag.span is not None:
        lines += _snippet(diag.span, diag.severity, width, reader, style)
    # rustc order: unlocated notes and help under the main snippet, then located notes, each with
    # its own header and snippet.
    trailer = [f"{pad} = {style.bold('note')}: {n.message}" for n in diag.notes if n.span is None]
    if diag.binding:
        trailer.append(f"{pad} = {style.bold('note')}: checked with {diag.binding}")
    if diag.fix is not None:
        trailer.append(f"{pad} = {style.bold('help')}: {diag.fix.title}")
    if trailer and diag.span is not None:
        lines.append(style.gutter(f"{pad} |"))
    lines += trailer
    for note in diag.notes:
        if note.span is not None:
            lines.append(f"{style.bold('note')}: {note.message}")
            lines += _snippet(note.span, Severity.INFO, width, reader, style)
    return "\n".join(lines)


def render_text(
    diagnostics: Iterable[Diagnostic], sources: Mapping[str, str] | None = None, color: bool = False
) -> str:
    """rustc-style text, one block per diagnostic separated by a blank line; no trailing newline.

    ``sources`` maps a span's file to its text (unsaved editor buffers, tests); other files are
    read from disk. A file that cannot be read only loses its snippet.
    """
    reader, style = _SourceReader(sources), _Style(color)
    return "\n\n".join(_render_one(d, reader, style) for d in diagnostics)


def count_by_severity(diagnostics: Iterable[Diagnostic]) -> dict[str, int]:
    counts = Counter(d.severity for d in diagnostics)
    return {s.value: counts.get(s, 0) for s in Severity}


def render_summary(diagnostics: Iterable[Diagnostic]) -> str:
    """``"1 error, 2 warnings"``, or ``"no problems found"``."""
    counts = count_by_severity(diagnostics)
    parts = [f"{n} {name}{'' if n == 1 or name == 'info' else 's'}" for name, n in counts.items() if n]
    return ", ".join(parts) if parts else "no problems found"


# JSON ----------------------------------------------------------------------------------------------


def _json_diagnostic(diag: Diagnostic) -> dict[str, Any]:
    entry = codes.lookup(diag.code)
    data = diag.to_dict()
    return {
        "code": data.pop("code"),
        "name": entry.name if entry else None,
        "url": entry.url if entry else None,
        **data,
    }


def render_json(diagnostics: Iterable[Diagnostic]) -> str:
    """The JSON document described by ``JSON_SCHEMA_DOC``; ``Diagnostic.from_dict`` reads its entries back."""
    diagnostics = list(diagnostics)
    document = {
        "version": JSON_SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": _tool_version()},
        "positions": {"base": 1, "end": "exclusive", "column_unit": "codepoint"},
        "summary": count_by_severity(diagnostics),
        "diagnostics": [_json_diagnostic(d) for d in diagnostics],
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


# SARIF ---------------------------------------------------------------------------------------------

_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note", Severity.HINT: "note"}


def _relative(file: str, root: str | os.PathLike[str] | None) -> str:
    """``file`` relative to ``root`` with forward slashes when it lies under it, else unchanged."""
    if root is not None and os.path.isabs(file):
        try:
            return Path(file).resolve().relative_to(Path(root).resolve()).as_posix()
        except ValueError:
            pass
    return file


def _artifact_location(file: str, root: str | os.PathLike[str] | None) -> dict[str, str]:
    path = _relative(file, root)
    if os.path.isabs(path):
        return {"uri": Path(path).as_uri()}
    return {"uri": PurePosixPath(path.replace(os.sep, "/")).as_posix(), "uriBaseId": "%SRCROOT%"}


def _sarif_region(span: Span) -> dict[str, int]:
    return {
        "startLine": span.line,
        "startColumn": span.column,
        "endLine": span.end_line,
        "endColumn": span.end_column,
    }


def _sarif_location(span: Span, root: Any) -> dict[str, Any]:
    physical = {"artifactLocation": _artifact_location(span.file, root), "region": _sarif_region(span)}
    return {"physicalLocation": physical}


def _sarif_rule(code: codes.Code) -> dict[str, Any]:
    return {
        "id": code.code,
        "name": code.name,
        "shortDescription": {"text": code.summary},
        "fullDescription": {"text": code.sections().get("What it does", code.summary)},
        "helpUri": code.url,
        "help": {"text": code.doc, "markdown": code.doc},
        "defaultConfiguration": {"level": _SARIF_LEVEL[code.default_severity]},
    }


def _sarif_fix(diag: Diagnostic, root: Any) -> dict[str, Any]:
    by_file: dict[str, list[dict[str, Any]]] = {}
    for edit in diag.fix.edits if diag.fix else ():
        replacement = {"deletedRegion": _sarif_region(edit.span), "insertedContent": {"text": edit.new_text}}
        by_file.setdefault(edit.span.file, []).append(replacement)
    return {
        "description": {"text": diag.fix.title if diag.fix else ""},
        "artifactChanges": [
            {"artifactLocation": _artifact_location(file, root), "replacements": edits}
            for file, edits in by_file.items()
        ],
    }


def _sarif_result(diag: Diagnostic, rule_index: Mapping[str, int], root: Any) -> dict[str, Any]:
    # Code-scanning viewers show only the message text, so unlocated notes and the binding join it.
    extra = [f"note: {n.message}" for n in diag.notes if n.span is None]
    if diag.binding:
        extra.append(f"note: checked with {diag.binding}")
    result: dict[str, Any] = {
        "ruleId": diag.code,
        "level": _SARIF_LEVEL[diag.severity],
        "message": {"text": "\n".join([diag.message, *extra])},
    }
    if diag.code in rule_index:
        result["ruleIndex"] = rule_index[diag.code]
    if diag.span is not None:
        result["locations"] = [_sarif_location(diag.span, root)]
    related = [n for n in diag.notes if n.span is not None]
    if related:
        result["relatedLocations"] = [
            {"id": i, "message": {"text": n.message}, **_sarif_location(n.span, root)} for i, n in enumerate(related)
        ]
    if diag.fix is not None and diag.fix.edits:
        result["fixes"] = [_sarif_fix(diag, root)]
    if diag.binding:
        result["properties"] = {"binding": diag.binding}
    return result


def render_sarif(diagnostics: Iterable[Diagnostic], root: str | os.PathLike[str] | None = None) -> str:
    """A SARIF 2.1.0 log with one run of ``tilelang-check``; every registered code is a rule.

    Absolute paths under ``root`` (the repository root, for GitHub code scanning) become relative
    URIs against ``%SRCROOT%``. Columns are Unicode code points, which the run declares.
    """
    rules = codes.all_codes()
    rule_index = {c.code: i for i, c in enumerate(rules)}
    run = {
        "tool": {
            "driver": {
                "name": TOOL_NAME,
                "version": _tool_version(),
                "informationUri": TOOL_URL,
                "rules": [_sarif_rule(c) for c in rules],
            }
        },
        "columnKind": "unicodeCodePoints",
        "results": [_sarif_result(d, rule_index, root) for d in diagnostics],
    }
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2, ensure_ascii=False)


# GitHub Actions ------------------------------------------------------------------------------------

_GITHUB_COMMAND = {
    Severity.ERROR: "error",
    Severity.WARNING: "warning",
    Severity.INFO: "notice",
    Severity.HINT: "notice",
}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _github_line(diag: Diagnostic, relative: Callable[[str], str]) -> str:
    props: list[tuple[str, Any]] = []
    if diag.span is not None:
        s = diag.span
        props = [
            ("file", relative(s.file)),
            ("line", s.line),
            ("col", s.column),
            ("endLine", s.end_line),
            ("endColumn", s.end_column),
        ]
    props.append(("title", diag.code))
    body = [diag.message, *(f"note: {n.message}" + (f" ({n.span})" if n.span else "") for n in diag.notes)]
    if diag.binding:
        body.append(f"note: checked with {diag.binding}")
    if diag.fix is not None:
        body.append(f"help: {diag.fix.title}")
    head = ",".join(f"{key}={_escape_property(str(value))}" for key, value in props)
    return f"::{_GITHUB_COMMAND[diag.severity]} {head}::{_escape_data(chr(10).join(body))}"


def render_github(diagnostics: Iterable[Diagnostic], root: str | os.PathLike[str] | None = None) -> str:
    """GitHub Actions workflow commands, one line per diagnostic (``::error file=...,line=...::message``).

    Paths are made relative to ``root`` when given, since annotations need repository paths.
    """
    return "\n".join(_github_line(d, lambda f: _relative(f, root)) for d in diagnostics)
