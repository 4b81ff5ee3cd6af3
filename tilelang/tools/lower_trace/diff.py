"""Text diffs for lower traces: coloured unified diffs for the terminal and side-by-side HTML
tables for the report.

``_make_diff_html(before, after, context)`` renders one ``<table>``: every row has a left and a
right line-number cell (``<td class="ln..." data-side="l|r">N</td>``, empty on a side with no
line) and both columns stay in ascending order; lines whose only change is whitespace are paired
and marked ``ws``; unchanged runs farther than ``context`` lines from a change are folded behind
an "expand" row. Identical texts give ``<p class="noop-msg">No differences.</p>``; texts that
differ only by the final newline say so instead of claiming no difference.
"""

from __future__ import annotations

import difflib
import html

_ANSI_RESET = "\033[0m"
_ANSI_RED = "\033[31m"
_ANSI_GREEN = "\033[32m"
_ANSI_YELLOW = "\033[33m"
_ANSI_BLUE = "\033[34m"
_ANSI_CYAN = "\033[36m"
_ANSI_BOLD = "\033[1m"
_ANSI_DIM = "\033[2m"

NO_DIFFERENCES = '<p class="noop-msg">No differences.</p>'


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _inline(left: str, right: str) -> tuple[str, str]:
    """The two lines as HTML with the changed characters wrapped in ``<span class="chg">``."""
    from tilelang.utils.pass_diff import mark_changes

    return mark_changes(left, right, "chg")


def _pair_hunk(i1: int, i2: int, j1: int, j2: int, before: list, after: list) -> list:
    """Rows ``(left index or None, right index or None, whitespace_only)`` of one replaced hunk,
    in ascending order on both sides: lines equal up to whitespace are matched first (a
    longest-common-subsequence, so never crossing), the lines between matches are paired by
    position and the rest are one-sided."""
    left = [before[i].strip() for i in range(i1, i2)]
    right = [after[j].strip() for j in range(j1, j2)]
    anchors = []
    for tag, a1, a2, b1, _ in difflib.SequenceMatcher(None, left, right, autojunk=False).get_opcodes():
        if tag == "equal":
            anchors += [(i1 + a1 + k, j1 + b1 + k) for k in range(a2 - a1)]
    rows, li, ri = [], i1, j1
    for al, ar in anchors + [(i2, j2)]:
        gap_l, gap_r = list(range(li, al)), list(range(ri, ar))
        for k in range(max(len(gap_l), len(gap_r))):
            rows.append((gap_l[k] if k < len(gap_l) else None, gap_r[k] if k < len(gap_r) else None, False))
        if (al, ar) != (i2, j2):
            rows.append((al, ar, True))
        li, ri = al + 1, ar + 1
    return rows


def _cells(side: str, index, text_html: str, kind: str) -> str:
    number = "" if index is None else str(index + 1)
    sign = {"del": "\u2212", "add": "+", "ws": "~"}.get(kind, "") if index is not None else ""
    css = f"ln ln-{kind}" if index is not None else "ln"
    return (f'<td class="{css}" data-side="{side}">{number}</td><td class="sg">{sign}</td>'
            f'<td class="code {kind if index is not None else "empty"}">{text_html}</td>')


def _make_diff_html(before_text: str, after_text: str, context: int = 3) -> str:
    before, after = before_text.splitlines(), after_text.splitlines()
    if before == after:
        tail_b, tail_a = before_text.endswith("\n"), after_text.endswith("\n")
        if tail_b == tail_a:
            return NO_DIFFERENCES
        state = {True: "present", False: "absent"}
        return (f'<p class="noop-msg">Only the trailing newline differs (before: {state[tail_b]}, '
                f'after: {state[tail_a]}).</p>')
    rows = []   # (left, right, kind) with kind in eq / ws / del / add / chg
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if tag == "equal":
            rows += [(i1 + k, j1 + k, "eq") for k in range(i2 - i1)]
        elif tag == "delete":
            rows += [(i, None, "del") for i in range(i1, i2)]
        elif tag == "insert":
            rows += [(None, j, "add") for j in range(j1, j2)]
        else:
            for li, ri, ws in _pair_hunk(i1, i2, j1, j2, before, after):
                rows.append((li, ri, "ws" if ws else "chg" if li is not None and ri is not None
                             else "del" if li is not None else "add"))
    changed = [k for k, r in enumerate(rows) if r[2] != "eq"]
    near = set()
    for k in changed:
        near.update(range(k - context, k + context + 1))
    out, run = [], 0

    def close_run():
        nonlocal run
        if run:
            out.append(f'<tr class="fold"><td colspan="6"><button class="expand" onclick="unfold(this)">'
                       f'\u2195 {run} unchanged line(s)</button></td></tr>')
            run = 0

    for k, (li, ri, kind) in enumerate(rows):
        hidden = kind == "eq" and k not in near
        if kind == "chg":
            left_html, right_html = _inline(before[li], after[ri])
            cells = _cells("l", li, left_html, "del") + _cells("r", ri, right_html, "add")
        elif kind == "ws":
            left_html, right_html = _inline(before[li], after[ri])
            cells = _cells("l", li, left_html, "ws") + _cells("r", ri, right_html, "ws")
        else:
            left_html = _esc(before[li]) if li is not None else ""
            right_html = _esc(after[ri]) if ri is not None else ""
            cells = (_cells("l", li, left_html, "eq" if kind == "eq" else "del")
                     + _cells("r", ri, right_html, "eq" if kind == "eq" else "add"))
        if hidden:
            run += 1
            out.append(f'<tr class="folded">{cells}</tr>')
        else:
            close_run()
            out.append(f"<tr>{cells}</tr>")
    close_run()
    return ('<div class="diff"><table><colgroup><col class="c-ln"><col class="c-sg"><col>'
            '<col class="c-ln"><col class="c-sg"><col></colgroup>\n' + "\n".join(out) + "\n</table></div>")


def unified_diff(before_text: str, after_text: str, before_label: str = "before", after_label: str = "after",
                 context: int = 3, color: bool = True) -> str:
    """A unified diff (ANSI-coloured when ``color``); "" when the texts are equal."""
    lines = list(difflib.unified_diff(before_text.splitlines(keepends=True), after_text.splitlines(keepends=True),
                                      fromfile=before_label, tofile=after_label, n=context))
    if not color:
        return "".join(lines)
    out = []
    for line in lines:
        if line.startswith(("---", "+++")):
            out.append(f"{_ANSI_BOLD}{line}{_ANSI_RESET}")
        elif line.startswith("@@"):
            out.append(f"{_ANSI_CYAN}{line}{_ANSI_RESET}")
        elif line.startswith("-"):
            out.append(f"{_ANSI_RED}{line}{_ANSI_RESET}")
        elif line.startswith("+"):
            out.append(f"{_ANSI_GREEN}{line}{_ANSI_RESET}")
        else:
            out.append(line)
    return "".join(out)


def print_diff(before_text: str, after_text: str, before_label: str = "before", after_label: str = "after",
               context: int = 3, color: bool = True) -> bool:
    """Print the unified diff; whether there was one."""
    text = unified_diff(before_text, after_text, before_label, after_label, context, color)
    if text:
        print(text, end="" if text.endswith("\n") else "\n")
    return bool(text)


def count_changes(before_text: str, after_text: str) -> tuple[int, int]:
    """(lines added, lines removed) from ``before_text`` to ``after_text``."""
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before_text.splitlines(), after_text.splitlines(),
                                                       autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            added += j2 - j1
        if tag in ("replace", "delete"):
            removed += i2 - i1
    return added, removed
