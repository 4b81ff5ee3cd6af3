"""Source snippets for error messages that end in a ``--> file:line[:col]`` line.

``enrich_error(exc)`` finds that last location line in an exception's message and replaces it
with the location, the source line and a caret, in place (same exception object and type).
Errors from our own compiler (``TileLangCompileError``) already render their snippet; this is for
messages that carry only the marker. Anything it cannot render is left as it was.
"""

from __future__ import annotations

import os
import re

# The file group is lazy so that ":line[:col]" is taken from the right; that keeps paths with
# spaces and Windows drive letters ("C:\\work\\k.py") whole.
_MARKER_RE = re.compile(r"\n\s*-->\s+(?P<file>.+?):(?P<line>\d+)(?::(?P<col>\d+))?\s*$")


def _snippet(file: str, line: int, col: int) -> str | None:
    if not os.path.isfile(file):
        return None
    try:
        with open(file, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    if not 1 <= line <= len(lines):
        return None
    text = lines[line - 1]
    caret = col if col > 1 else len(text) - len(text.lstrip()) + 1
    pad = " " * len(str(line))
    return f"  --> {file}:{line}:{col}\n {pad} |\n {line} | {text}\n {pad} | {' ' * (caret - 1)}^"


def enrich_error(exc: BaseException) -> BaseException:
    """Replace a trailing ``--> file:line:col`` marker in ``exc``'s message with a snippet."""
    args = getattr(exc, "args", ())
    if not args or not isinstance(args[0], str):
        return exc
    match = _MARKER_RE.search(args[0])
    if match is None:
        return exc
    snippet = _snippet(match.group("file"), int(match.group("line")), int(match.group("col") or 1))
    if snippet is not None:
        exc.args = (args[0][: match.start()] + "\n" + snippet, *args[1:])
    return exc


__all__ = ["enrich_error"]
