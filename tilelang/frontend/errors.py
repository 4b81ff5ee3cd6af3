"""``ParseError``: a located front-end error, shared by both front ends."""

from __future__ import annotations

from tvm.script.parser.core.diagnostics import DiagnosticError


class ParseError(DiagnosticError):
    """A located front-end error: ``message`` at ``file:line:column``-``end_line:end_column``."""

    def __init__(self, formatted: str, message: str, span):
        super().__init__(formatted)
        self.message = message
        self.span = span

    def __reduce__(self):
        return (ParseError, (str(self), self.message, self.span))

    def to_diagnostic(self):
        from tilelang.diagnostics import Diagnostic, Severity

        return Diagnostic(code=_code_for(self.message), severity=Severity.ERROR,
                          message=self.message, span=self.span)


def _code_for(message: str) -> str:
    if message.startswith("TL0") and message[6:8] == ": ":
        return message[:6]
    return "TL0001"


def _span(file, line, col, end_line, end_col):
    try:
        from tilelang.diagnostics import Span
    except ImportError:  # during bootstrap of the package only
        from collections import namedtuple
        Span = namedtuple("Span", "file line column end_line end_column")
    return Span(str(file), line, col, end_line, end_col)
