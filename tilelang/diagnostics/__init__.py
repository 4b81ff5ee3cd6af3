"""Diagnostics shared by the compiler, ``tilelang-check`` and the language server.

One analysis, three consumers: the JIT raises ``TileLangCompileError`` with a caret snippet, the
CLI renders text / JSON / SARIF / GitHub annotations, and the server converts the same
``Diagnostic`` objects to LSP. This package does no IO except reading a source file to show a
snippet, and imports nothing from TVM or lsprotocol.
"""

from . import codes
from .codes import Code, Severity, all_codes, get
from .diagnostic import Diagnostic, Fix, Note, TextEdit, has_errors, sort_diagnostics
from .errors import (
    TileLangCompileError,
    filter_traceback,
    frontend_debug,
    hide_internal_frames,
    raise_user_error,
)
from .render import (
    JSON_SCHEMA_VERSION,
    render_github,
    render_json,
    render_sarif,
    render_summary,
    render_text,
)
from .span import Span, first_span

__all__ = [
    "JSON_SCHEMA_VERSION",
    "Code",
    "Diagnostic",
    "Fix",
    "Note",
    "Severity",
    "Span",
    "TextEdit",
    "TileLangCompileError",
    "all_codes",
    "codes",
    "filter_traceback",
    "first_span",
    "frontend_debug",
    "get",
    "has_errors",
    "hide_internal_frames",
    "raise_user_error",
    "render_github",
    "render_json",
    "render_sarif",
    "render_summary",
    "render_text",
    "sort_diagnostics",
]
