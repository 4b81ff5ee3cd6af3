"""Source spans: where in the user's file a diagnostic points.

Contract:
- Lines and columns are 1-based, as the user sees them in an editor status bar.
- The end column is exclusive: ``Span("k.py", 3, 5, 3, 9)`` covers columns 5, 6, 7 and 8 of line 3.
  This is exactly what TVM's TVMScript parser stamps on every statement
  (``stmt.span.source_name.name, .line, .column, .end_line, .end_column``).
- Columns count characters (Unicode code points) of the line. CPython's ``ast`` and therefore TVM
  count UTF-8 bytes; the two agree on ASCII lines, and ``from_tvm``/``from_ast`` convert when they are
  given the source text. Conversion to LSP's UTF-16 positions happens in ``tilelang_lsp/convert.py``.
- A span is never "unknown": code that has no location passes ``None`` instead of a sentinel span.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

UNKNOWN_FILE = "<unknown>"


@dataclass(frozen=True, order=True)
class Span:
    """A half-open range ``[line:column, end_line:end_column)`` in ``file``; see the module docstring."""

    file: str
    line: int
    column: int
    end_line: int
    end_column: int

    def __post_init__(self) -> None:
        if self.line < 1 or self.column < 1:
            raise ValueError(f"span start must be 1-based, got {self.line}:{self.column}")
        if (self.end_line, self.end_column) < (self.line, self.column):
            raise ValueError(
                f"span end {self.end_line}:{self.end_column} is before its start {self.line}:{self.column}"
            )

    # Construction -------------------------------------------------------------------------------

    @classmethod
    def point(cls, file: str, line: int, column: int = 1) -> Span:
        """A one-character span at ``line:column``."""
        return cls(file, line, column, line, column + 1)

    @classmethod
    def from_tvm(cls, span: Any, source: str | None = None) -> Span | None:
        """Convert a ``tvm.ir.Span`` (or ``SequentialSpan``) to a ``Span``; ``None`` if it has no location.

        Accepts ``None``, spans whose source name is missing (the file becomes ``"<unknown>"``) and
        spans with line 0, which TVM uses for "no location". For a ``SequentialSpan`` the first span
        with a location wins. With ``source`` (the file's text) the byte columns TVM stamps are
        converted to character columns.
        """
        if span is None:
            return None
        inner = getattr(span, "spans", None)
        if inner is not None:
            return first_span(*(cls.from_tvm(s, source) for s in inner))
        try:
            line, column = int(span.line), int(span.column)
            end_line, end_column = int(span.end_line), int(span.end_column)
        except (AttributeError, TypeError, ValueError):
            return None
        name = getattr(getattr(span, "source_name", None), "name", None)
        return cls._clamped(str(name) if name else UNKNOWN_FILE, line, column, end_line, end_column, source)

    @classmethod
    def from_ast(cls, node: Any, file: str, source: str | None = None, line_offset: int = 0) -> Span | None:
        """The span of a Python ``ast`` node; ``line_offset`` is added to its lines.

        CPython's ``col_offset`` is a 0-based UTF-8 byte offset; with ``source`` it becomes a
        character column.
        """
        line = getattr(node, "lineno", None)
        if line is None:
            return None
        column = (getattr(node, "col_offset", 0) or 0) + 1
        end_line = getattr(node, "end_lineno", None) or line
        end_col_offset = getattr(node, "end_col_offset", None)
        end_column = column if end_col_offset is None else end_col_offset + 1
        return cls._clamped(file, line + line_offset, column, end_line + line_offset, end_column, source)

    @classmethod
    def _clamped(
        cls, file: str, line: int, column: int, end_line: int, end_column: int, source: str | None
    ) -> Span | None:
        # Producers outside our control (TVM passes, ast nodes built by hand) sometimes leave the end
        # before the start or a column at 0; clamp instead of rejecting a location we can still show.
        if line < 1:
            return None
        if source is not None:
            lines = split_lines(source)
            column = _byte_to_char_column(lines, line, column)
            end_column = _byte_to_char_column(lines, end_line, end_column)
        column = max(column, 1)
        if (end_line, end_column) < (line, column):
            end_line, end_column = line, column
        return cls(file, line, column, end_line, end_column)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Span:
        return cls(
            str(data["file"]), int(data["line"]), int(data["column"]), int(data["end_line"]), int(data["end_column"])
        )

    # Queries ------------------------------------------------------------------------------------

    @property
    def is_multiline(self) -> bool:
        return self.end_line > self.line

    def contains(self, line: int, column: int) -> bool:
        """Whether the character at ``line:column`` lies inside the span."""
        return (self.line, self.column) <= (line, column) < (self.end_line, self.end_column)

    def overlaps(self, other: Span) -> bool:
        if self.file != other.file:
            return False
        return (self.line, self.column) < (other.end_line, other.end_column) and (other.line, other.column) < (
            self.end_line,
            self.end_column,
        )

    def union(self, other: Span) -> Span:
        """The smallest span covering both; both must be in the same file."""
        if self.file != other.file:
            raise ValueError(f"cannot join spans of {self.file!r} and {other.file!r}")
        start = min((self.line, self.column), (other.line, other.column))
        end = max((self.end_line, self.end_column), (other.end_line, other.end_column))
        return Span(self.file, *start, *end)

    def with_file(self, file: str) -> Span:
        return dataclasses.replace(self, file=file)

    def shifted(self, lines: int) -> Span:
        """The same span ``lines`` lines further down (for code parsed out of a larger file)."""
        return dataclasses.replace(self, line=self.line + lines, end_line=self.end_line + lines)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def format_range(self) -> str:
        """``file:line:column-end_line:end_column``, for logs and test failure messages."""
        return f"{self.file}:{self.line}:{self.column}-{self.end_line}:{self.end_column}"

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


def first_span(*spans: Span | None) -> Span | None:
    """The first span that is not ``None``: the outermost known location wins (TVM ``SpanHintSuffix``)."""
    return next((s for s in spans if s is not None), None)


def split_lines(text: str) -> list[str]:
    """Split source text into lines the way Python's tokenizer numbers them (``\\n``, ``\\r\\n``, ``\\r``)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _byte_to_char_column(lines: list[str], line: int, column: int) -> int:
    if not 1 <= line <= len(lines) or column <= 1:
        return column
    prefix = lines[line - 1].encode("utf-8")[: column - 1]
    return len(prefix.decode("utf-8", errors="ignore")) + 1
