"""``# tilelang: ignore[TL0401, TL0301]`` comments: parsing, applying, and reporting misuse.

Contract:
- A comment suppresses the listed codes for diagnostics whose span *starts* on the comment's line.
  A bare ``# tilelang: ignore`` suppresses every code on its line.
- ``apply_ignores(diagnostics, comments, report_unused)`` returns the diagnostics that remain,
  plus TL0902 for a malformed comment (not ``ignore[TLxxxx, ...]``, or an unknown code) and, when
  ``report_unused`` is true, TL0901 for a code that suppressed nothing. The caller passes
  ``report_unused=False`` when the file was not fully analysed (``--no-exec``, unbound factories),
  since the diagnostic a comment targets may then simply not have been computed.
- Comments are found with ``tokenize``, so ``#`` inside strings is never mistaken for one; the
  tokens come from ``syntax.directive_comments`` (tokenized once per text, and not at all for a
  text without ``tilelang:``). ``find_ignores`` returns new ``IgnoreComment`` objects on every
  call: ``apply_ignores`` records in them which codes were used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tilelang.analysis.syntax import directive_comments
from tilelang.diagnostics import Diagnostic, Span, codes

_DIRECTIVE = re.compile(r"#\s*tilelang\s*:\s*ignore\b(?P<rest>.*)$")   # needs syntax.DIRECTIVE_HINT
_BRACKET = re.compile(r"^\[(?P<codes>[^\]]*)\]")


@dataclass
class IgnoreComment:
    line: int
    span: Span                              # the whole comment
    codes: dict = field(default_factory=dict)   # code -> span of the code inside the comment
    bare: bool = False
    error: str | None = None
    used: set = field(default_factory=set)


def find_ignores(path: str, text: str) -> list:
    """Every ``# tilelang: ignore`` comment of ``text``; see the module docstring."""
    out = []
    for tok in directive_comments(text):
        comment = _parse(path, tok)
        if comment is not None:
            out.append(comment)
    return out


def _parse(path, tok) -> IgnoreComment | None:
    match = _DIRECTIVE.search(tok.string)
    if match is None:
        return None
    line, col = tok.start
    start = col + match.start() + 1
    span = Span(path, line, start, line, col + len(tok.string) + 1)
    comment = IgnoreComment(line, span)
    rest = match.group("rest")
    bracket = _BRACKET.match(rest.lstrip())
    if not rest.lstrip().startswith("["):
        # Text after a bare ignore is an explanation, unless it looks like a forgotten bracket.
        if re.match(r"\s*:?\s*TL\d", rest):
            comment.error = "put the codes in brackets: `# tilelang: ignore[TL0301]`"
        comment.bare = comment.error is None
        return comment
    if bracket is None:
        comment.error = "the code list is not closed: write `# tilelang: ignore[TL0301]`"
        return comment
    base = col + match.start("rest") + (len(rest) - len(rest.lstrip())) + 2
    for piece in re.finditer(r"[^,\s]+", bracket.group("codes")):
        code = piece.group(0)
        at = Span(path, line, base + piece.start(), line, base + piece.end())
        if not codes.CODE_PATTERN.fullmatch(code):
            comment.error = f"`{code}` is not a diagnostic code: write the full code, e.g. TL0301"
        elif codes.lookup(code) is None:
            comment.error = f"`{code}` is not a TileLang diagnostic code"
        else:
            comment.codes[code] = at
    if not comment.codes and comment.error is None:
        comment.error = "the code list is empty: name the codes to ignore, e.g. `ignore[TL0301]`"
    return comment


def apply_ignores(diagnostics, comments, report_unused: bool) -> list:
    """The diagnostics left after suppression, plus TL0901/TL0902 (module docstring)."""
    by_line = {}
    for c in comments:
        by_line.setdefault((c.span.file, c.line), []).append(c)
    kept = []
    for d in diagnostics:
        if d.span is None or not _suppressed(d, by_line.get((d.span.file, d.span.line), ())):
            kept.append(d)
    for c in comments:
        kept += _misuse(c, report_unused)
    return kept


def _suppressed(diag, comments) -> bool:
    hit = False
    for c in comments:
        if c.error is None and (c.bare or diag.code in c.codes):
            c.used.add(diag.code if not c.bare else "*")
            hit = True
    return hit


def _misuse(comment, report_unused: bool) -> list:
    if comment.error is not None:
        return [Diagnostic.from_code("TL0902", f"malformed ignore comment: {comment.error}", comment.span)]
    if not report_unused:
        return []
    if comment.bare:
        if not comment.used:
            return [Diagnostic.from_code("TL0901", "this ignore comment suppresses nothing", comment.span)]
        return []
    return [Diagnostic.from_code("TL0901", f"unused ignore: no {code} diagnostic on this line", span)
            for code, span in comment.codes.items() if code not in comment.used]
