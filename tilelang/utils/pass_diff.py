"""``pass_diff``: what each pass of a chain changes in the IR, as unified diffs.

    from tilelang.utils.pass_diff import pass_diff
    steps = pass_diff(func, [("Sync", tilelang.transform.ThreadSync("shared")), tvm.tirx.transform.Simplify()],
                      mode="both", context=3, html_path="report.html")

Contract:
- ``func_or_mod``: a PrimFunc (wrapped as ``IRModule({"main": func})``) or an IRModule. ``passes``:
  one pass, a list of passes, or a list of ``(label, pass)`` pairs; an unlabelled pass is named
  after its ``PassInfo`` name (``tirx.Simplify``), else its class. The passes run in order, each on
  the previous one's result.
- Returns one dict per pass: ``name``, ``before_script``, ``after_script`` (``IRModule.script()``),
  ``diff_lines`` (unified diff with ``context`` lines, headers included), ``insertions``,
  ``deletions`` (changed lines, headers not counted) and ``changed``.
- ``mode``: ``"terminal"`` prints each pass's coloured diff under a ``Pass i/n: name`` header,
  ``"html"`` writes one self-contained HTML report to ``html_path`` (side-by-side diff per pass,
  word-level highlights, hidden context behind "Show N lines above/below" blocks, a toolbar with
  totals, Expand All / Collapse All and a dark/light theme switch, copy buttons), ``"both"`` does
  both. Anything else is a ``ValueError``.
- The helpers (``_compute_diff``, ``_count_changes``, ``_print_colored_diff``,
  ``_print_step_header``, ``_generate_html``...) are shared with ``pass_diff_hook``, which diffs
  every stage of a real compile when ``TILELANG_PASS_DIFF`` is set.
"""

from __future__ import annotations

import difflib
import html
import os
import re
import time

__all__ = ["layout_lines", "pass_diff"]

MODES = ("terminal", "html", "both")

_RED, _GREEN, _CYAN = "\033[91m", "\033[92m", "\033[96m"
_BOLD, _DIM, _RESET = "\033[1m", "\033[2m", "\033[0m"

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


# ----------------------------------------------------------------------------- diff core
def _compute_diff(before_lines, after_lines, context: int, before_label: str = "before",
                  after_label: str = "after") -> list[str]:
    """Unified diff of two line lists (no line terminators), ``context`` lines around changes."""
    return list(difflib.unified_diff(list(before_lines), list(after_lines), fromfile=before_label,
                                     tofile=after_label, lineterm="", n=max(0, int(context))))


def _count_changes(diff_lines) -> tuple[int, int]:
    """(insertions, deletions) of a unified diff; the ``---``/``+++`` headers are not changes."""
    ins = dels = 0
    for line in diff_lines:
        if line.startswith("+") and not line.startswith("+++"):
            ins += 1
        elif line.startswith("-") and not line.startswith("---"):
            dels += 1
    return ins, dels


def _script(mod) -> str:
    try:
        return mod.script()
    except Exception as err:  # noqa: BLE001 - a module the printer rejects is still worth diffing
        return f"<IRModule.script() failed: {type(err).__name__}: {err}>\n{mod}"


def _as_module(func_or_mod):
    import tvm

    if isinstance(func_or_mod, tvm.IRModule):
        return func_or_mod
    if isinstance(func_or_mod, tvm.tirx.PrimFunc):
        return tvm.IRModule({"main": func_or_mod})
    raise TypeError(f"pass_diff: expected a PrimFunc or an IRModule, got {type(func_or_mod).__name__}")


def _pass_name(p) -> str:
    info = getattr(p, "info", None)
    name = getattr(info, "name", None) if info is not None else None
    return str(name) if name else type(p).__name__


def _named_passes(passes) -> list[tuple[str, object]]:
    items = list(passes) if isinstance(passes, (list, tuple)) else [passes]
    out = []
    for k, item in enumerate(items):
        if isinstance(item, (list, tuple)):
            if len(item) != 2:
                raise ValueError(f"pass_diff: entry {k} must be a pass or a (label, pass) pair, got {len(item)} items")
            label, p = item
            out.append((str(label), p))
        else:
            out.append((_pass_name(item), item))
    for label, p in out:
        if not callable(p):
            raise TypeError(f"pass_diff: '{label}' is not a pass (got {type(p).__name__})")
    return out


def _step(name, before_script, after_script, context=3, before_label="before", after_label="after") -> dict:
    diff_lines = _compute_diff(before_script.splitlines(), after_script.splitlines(), context,
                               before_label, after_label)
    ins, dels = _count_changes(diff_lines)
    return {"name": name, "before_script": before_script, "after_script": after_script,
            "diff_lines": diff_lines, "insertions": ins, "deletions": dels, "changed": bool(ins or dels)}


def layout_lines(layouts) -> list[str]:
    """One line per layout ``infer_layouts`` chose (a pipeline state's ``layouts``; [] for None):
    fragments and shared buffers (with where the layout came from), T.Parallel loops, gemm plans."""
    if layouts is None:
        return []
    lines = []
    origin = getattr(layouts, "origin", {})
    for title, table in (("fragment", layouts.fragments), ("shared", layouts.shared)):
        for buf, layout in table.items():
            why = origin.get(buf)
            lines.append(f"{title} {getattr(buf, 'name', buf)}: {layout}" + (f"  ({why})" if why else ""))
    for var, layout in layouts.loops.items():
        lines.append(f"parallel loop {var}: {layout}")
    for plan in list(layouts.gemms.values()) + list(getattr(layouts, "sparse_gemms", {}).values()):
        lines.append(f"gemm: {plan}")
    return lines


# ----------------------------------------------------------------------------- terminal
def _print_step_header(index, total, name: str) -> None:
    rule = "=" * 64
    where = f"{index}/{total}" if total not in (None, "") else f"{index}"
    print(f"\n{_BOLD}{rule}\n  Pass {where}: {name}\n{rule}{_RESET}")


def _print_colored_diff(diff_lines) -> None:
    for line in diff_lines:     # (nothing for an unchanged pass: the summary line says so)
        if line.startswith(("---", "+++")):
            color = _BOLD
        elif line.startswith("@@"):
            color = _CYAN
        elif line.startswith("+"):
            color = _GREEN
        elif line.startswith("-"):
            color = _RED
        else:
            print(line)
            continue
        print(f"{color}{line}{_RESET}")


def _print_step_summary(step: dict) -> None:
    if step["changed"]:
        print(f"\n  {_DIM}>>> +{step['insertions']} insertion(s), -{step['deletions']} deletion(s){_RESET}")
    else:
        print(f"\n  {_DIM}>>> (no changes){_RESET}")


# ----------------------------------------------------------------------------- diff -> rows
def _row(kind, left="", right="", left_num=None, right_num=None) -> dict:
    return {"type": kind, "left": left, "right": right, "left_num": left_num, "right_num": right_num}


def _parse_diff_into_rows(diff_lines, before_lines=None, after_lines=None, max_expand: int = 20):
    """Side-by-side rows of a unified diff, plus the hidden context around each hunk.

    Rows: ``hunk`` (the ``@@`` line in ``left``), ``ctx``, ``pair`` (a deleted line facing the line
    that replaced it), ``del`` and ``add``; each carries ``left``/``right`` text and 1-based line
    numbers. When both scripts are given, the second result lists expand sections (at most
    ``max_expand`` lines each): ``hunk_idx``, ``position`` ("before"/"after" the hunk),
    ``direction`` ("up"/"down"), ``count`` and ``lines`` (context rows without ``type``).
    """
    rows, spans = [], []          # spans: per hunk [left_start, left_end, right_start, right_end] (0-based, end excl.)
    dels, adds = [], []
    ln = rn = 0

    def flush():
        for k in range(max(len(dels), len(adds))):
            d = dels[k] if k < len(dels) else None
            a = adds[k] if k < len(adds) else None
            if d is not None and a is not None:
                rows.append(_row("pair", d[1], a[1], d[0], a[0]))
            elif d is not None:
                rows.append(_row("del", d[1], "", d[0], None))
            else:
                rows.append(_row("add", "", a[1], None, a[0]))
        dels.clear()
        adds.clear()

    for line in diff_lines:
        m = _HUNK.match(line)
        if m:
            flush()
            ln = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
            rn = int(m.group(3)) - (0 if m.group(4) == "0" else 1)
            spans.append([ln, ln, rn, rn])
            rows.append(_row("hunk", line))
            continue
        if not spans:
            continue          # the ---/+++ file headers
        if line.startswith("-"):
            ln += 1
            dels.append((ln, line[1:]))
        elif line.startswith("+"):
            rn += 1
            adds.append((rn, line[1:]))
        elif line.startswith("\\"):
            continue          # "\ No newline at end of file"
        else:
            flush()
            ln += 1
            rn += 1
            rows.append(_row("ctx", line[1:], line[1:], ln, rn))
        spans[-1][1], spans[-1][3] = ln, rn
    flush()

    if before_lines is None or after_lines is None or not spans:
        return rows, []

    def context_lines(l0, l1, r0, r1):
        n = max(l1 - l0, r1 - r0)
        out = []
        for k in range(n):
            li, ri = l0 + k, r0 + k
            left_ok, right_ok = li < l1, ri < r1
            out.append({"left": before_lines[li] if left_ok and li < len(before_lines) else "",
                        "right": after_lines[ri] if right_ok and ri < len(after_lines) else "",
                        "left_num": li + 1 if left_ok else None, "right_num": ri + 1 if right_ok else None})
        return out

    sections = []
    for k, (l0, l1, r0, r1) in enumerate(spans):
        prev_l, prev_r = (spans[k - 1][1], spans[k - 1][3]) if k else (0, 0)
        up_l, up_r = max(prev_l, l0 - max_expand), max(prev_r, r0 - max_expand)
        lines = context_lines(up_l, l0, up_r, r0)
        if lines:
            sections.append({"hunk_idx": k, "position": "before", "direction": "up", "count": len(lines),
                             "lines": lines})
    l1, r1 = spans[-1][1], spans[-1][3]
    lines = context_lines(l1, min(len(before_lines), l1 + max_expand), r1, min(len(after_lines), r1 + max_expand))
    if lines:
        sections.append({"hunk_idx": len(spans) - 1, "position": "after", "direction": "down",
                         "count": len(lines), "lines": lines})
    return rows, sections


def _split_rows_by_hunk(rows) -> list[list[dict]]:
    """The rows grouped per hunk, each group starting with its ``hunk`` row (rows before the
    first hunk belong to none and are dropped)."""
    groups: list[list[dict]] = []
    for row in rows:
        if row["type"] == "hunk":
            groups.append([row])
        elif groups:
            groups[-1].append(row)
    return groups


# ----------------------------------------------------------------------------- HTML pieces
_COLS = ('<colgroup><col class="col-ln"><col class="col-code"><col class="col-gutter">'
         '<col class="col-ln"><col class="col-code"></colgroup>')


def _num(n) -> str:
    return "" if n is None else str(n)


def mark_changes(a, b, css_class: str) -> tuple[str, str]:
    """Two sequences of text pieces (characters, words) as escaped HTML, the pieces that differ
    wrapped in ``<span class="css_class">``: the in-line highlight of a side-by-side diff row."""
    left, right = [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        x, y = html.escape("".join(a[i1:i2])), html.escape("".join(b[j1:j2]))
        if tag == "equal":
            left.append(x)
            right.append(y)
            continue
        if x:
            left.append(f'<span class="{css_class}">{x}</span>')
        if y:
            right.append(f'<span class="{css_class}">{y}</span>')
    return "".join(left), "".join(right)


def _word_highlight(old: str, new: str) -> tuple[str, str]:
    """Both lines escaped, with the words that differ wrapped in ``<span class="hl">``."""
    return mark_changes(re.split(r"(\s+)", old), re.split(r"(\s+)", new), "hl")


def _side(cls, num, code_html) -> str:
    return f'<td class="ln{cls}">{num}</td><td class="code{cls}">{code_html}</td>'


def _row_html(row) -> str:
    kind, ln, rn = row["type"], _num(row["left_num"]), _num(row["right_num"])
    gutter = '<td class="gutter"></td>'
    if kind == "hunk":
        return f'<tr class="hunk"><td colspan="5">{html.escape(row["left"])}</td></tr>'
    if kind == "pair":
        left, right = _word_highlight(row["left"], row["right"])
        return f'<tr class="pair">{_side(" del-side", ln, left)}{gutter}{_side(" add-side", rn, right)}</tr>'
    if kind == "del":
        return (f'<tr class="del">{_side("", ln, html.escape(row["left"]))}{gutter}'
                f'{_side(" empty", "", "&nbsp;")}</tr>')
    if kind == "add":
        return (f'<tr class="add">{_side(" empty", "", "&nbsp;")}{gutter}'
                f'{_side("", rn, html.escape(row["right"]))}</tr>')
    return (f'<tr class="ctx">{_side("", ln, html.escape(row["left"]))}{gutter}'
            f'{_side("", rn, html.escape(row["right"]))}</tr>')


def _rows_to_html_table(rows) -> str:
    return f'<table class="diff-table">{_COLS}{"".join(_row_html(r) for r in rows)}</table>'


def _render_expand_details(expand_sections) -> dict[int, tuple[str, str]]:
    """hunk index -> (HTML above the hunk's table, HTML below it): one collapsed ``<details>``
    block per expand section, labelled "Show N lines above/below"."""
    out: dict[int, tuple[str, str]] = {}
    for sec in expand_sections:
        where = "above" if sec["direction"] == "up" else "below"
        rows = "".join(_row_html(dict(line, type="ctx")) for line in sec["lines"])
        block = (f'<details class="expand-details"><summary class="expand-summary" data-count="{sec["count"]}" '
                 f'data-pos="{where}">&#8943; Show {sec["count"]} lines {where}</summary>'
                 f'<table class="diff-table">{_COLS}{rows}</table></details>')
        above, below = out.get(sec["hunk_idx"], ("", ""))
        if sec["position"] == "before":
            above += block
        else:
            below += block
        out[sec["hunk_idx"]] = (above, below)
    return out


def _step_html(index: int, step: dict) -> str:
    name = html.escape(str(step["name"]))
    before_id, after_id = f"before-{index}", f"after-{index}"
    copy = '<button class="copy-btn" data-copy="{}">Copy</button>'
    if step["changed"]:
        rows, sections = _parse_diff_into_rows(step["diff_lines"], step["before_script"].splitlines(),
                                               step["after_script"].splitlines())
        extra = _render_expand_details(sections)
        blocks = []
        for k, group in enumerate(_split_rows_by_hunk(rows)):
            above, below = extra.get(k, ("", ""))
            blocks.append(above + _rows_to_html_table(group) + below)
        badge = f'<span class="badge changed">+{step["insertions"]} / -{step["deletions"]}</span>'
        body = (f'<pre hidden id="{before_id}">{html.escape(step["before_script"])}</pre>'
                f'<pre hidden id="{after_id}">{html.escape(step["after_script"])}</pre>'
                f'<div class="panel-bar"><span>Before</span>{copy.format(before_id)}'
                f'<span class="right-label">After</span>{copy.format(after_id)}</div>'
                f'<div class="diff-wrapper">{"".join(blocks)}</div>')
        cls = "pass-section open"
    else:
        badge = '<span class="badge unchanged">unchanged</span>'
        body = (f'<div class="panel-bar"><span>IR (unchanged)</span>{copy.format(before_id)}</div>'
                f'<pre class="full-ir" id="{before_id}">{html.escape(step["before_script"])}</pre>')
        cls = "pass-section"
    return (f'<section class="{cls}"><div class="pass-header"><span class="chevron">&#9654;</span>'
            f'<span class="pass-name">{name}</span>{badge}</div><div class="pass-body">{body}</div></section>')


_CSS = """
:root { --bg:#1b1d23; --panel:#23262e; --surface:#15171c; --hover:#2e323c; --line:#3a3f4b;
  --text:#d7dae0; --muted:#7f8593; --accent:#7aa7ff; --accent-bg:#22304a;
  --add:#8fd18b; --add-bg:#1d2e1f; --add-hl:#2f5233; --del:#f08a8a; --del-bg:#321e21; --del-hl:#5a2f34; }
[data-theme="light"] { --bg:#f6f7f9; --panel:#eceef2; --surface:#ffffff; --hover:#dfe3ea; --line:#c9ced8;
  --text:#2b2f36; --muted:#6b7280; --accent:#2458d6; --accent-bg:#dbe5fb;
  --add:#1e7a2e; --add-bg:#e3f5e5; --add-hl:#b9e4bf; --del:#b4232c; --del-bg:#fbe5e6; --del-hl:#f3b9bd; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--text); font:13px/1.55 ui-monospace, 'JetBrains Mono',
  'Fira Code', Menlo, Consolas, monospace; }
.toolbar { position:sticky; top:0; z-index:10; display:flex; gap:14px; align-items:center; padding:9px 18px;
  background:var(--panel); border-bottom:1px solid var(--line); }
.toolbar .title { font-weight:700; color:var(--accent); }
.toolbar .stat { padding:1px 8px; border:1px solid var(--line); border-radius:4px; background:var(--surface);
  color:var(--muted); font-size:12px; }
.toolbar .stat b.add { color:var(--add); } .toolbar .stat b.del { color:var(--del); }
.toolbar .actions { margin-left:auto; display:flex; gap:8px; }
button { font:inherit; font-size:11px; padding:3px 11px; border:1px solid var(--line); border-radius:4px;
  background:var(--surface); color:var(--muted); cursor:pointer; }
button:hover { background:var(--hover); color:var(--text); }
.pass-section { border-bottom:1px solid var(--line); }
.pass-header { display:flex; gap:10px; align-items:center; padding:7px 18px; background:var(--panel);
  cursor:pointer; user-select:none; }
.pass-header:hover { background:var(--hover); }
.chevron { color:var(--muted); font-size:10px; transition:transform .15s; }
.pass-section.open .chevron { transform:rotate(90deg); }
.pass-name { font-weight:600; }
.badge { font-size:10px; font-weight:700; padding:0 8px; border-radius:3px; }
.badge.changed { background:var(--accent); color:var(--surface); }
.badge.unchanged { background:var(--line); color:var(--muted); }
.pass-body { display:none; border-top:1px solid var(--line); }
.pass-section.open .pass-body { display:block; }
.panel-bar { display:flex; gap:10px; align-items:center; padding:3px 12px; background:var(--panel);
  color:var(--muted); font-size:11px; }
.panel-bar .right-label { margin-left:24px; }
.diff-wrapper { overflow-x:auto; background:var(--surface); }
.diff-table { width:100%; border-collapse:collapse; table-layout:fixed; }
.col-ln { width:52px; } .col-gutter { width:1px; }
.diff-table td { padding:0; white-space:pre; vertical-align:top; font-size:12.5px; }
td.ln { text-align:right; padding:0 8px 0 4px; color:var(--muted); background:var(--panel); user-select:none;
  font-size:11px; border-right:1px solid var(--line); }
td.code { padding:0 12px; overflow-x:auto; }
td.gutter { background:var(--line); }
tr.ctx td.code { color:var(--muted); }
tr.add td:not(.empty), tr.pair .add-side { background:var(--add-bg); color:var(--add); }
tr.del td:not(.empty), tr.pair .del-side { background:var(--del-bg); color:var(--del); }
tr.pair .add-side .hl { background:var(--add-hl); } tr.pair .del-side .hl { background:var(--del-hl); }
.hl { font-weight:700; border-radius:2px; }
tr.hunk td { background:var(--accent-bg); color:var(--accent); padding:1px 12px; font-size:11px; font-style:italic; }
.expand-details { margin:3px 0; border:1px solid var(--line); border-radius:4px; background:var(--panel); }
.expand-summary { padding:2px 14px; text-align:center; color:var(--accent); cursor:pointer; font-size:11px;
  list-style:none; }
.expand-summary::-webkit-details-marker { display:none; }
.expand-summary:hover { background:var(--hover); color:var(--text); }
pre.full-ir { margin:0; padding:10px 16px; background:var(--surface); color:var(--muted); overflow-x:auto; }
.footer { padding:7px 18px; text-align:right; font-size:11px; color:var(--muted); background:var(--panel); }
"""

_JS = """
const root = document.documentElement, themeBtn = document.getElementById('theme-btn');
function setTheme(light) {
  if (light) root.setAttribute('data-theme', 'light'); else root.removeAttribute('data-theme');
  themeBtn.textContent = light ? 'Dark' : 'Light';
  try { localStorage.setItem('tl-pass-diff-theme', light ? 'light' : 'dark'); } catch (e) {}
}
themeBtn.onclick = () => setTheme(root.getAttribute('data-theme') !== 'light');
try { if (localStorage.getItem('tl-pass-diff-theme') === 'light') setTheme(true); } catch (e) {}
document.querySelectorAll('.pass-header').forEach(h => h.onclick = () => h.parentElement.classList.toggle('open'));
document.getElementById('expand-all').onclick = () =>
  document.querySelectorAll('.pass-section').forEach(s => s.classList.add('open'));
document.getElementById('collapse-all').onclick = () =>
  document.querySelectorAll('.pass-section').forEach(s => s.classList.remove('open'));
document.querySelectorAll('.copy-btn').forEach(b => b.onclick = () => {
  const el = document.getElementById(b.dataset.copy);
  if (el && navigator.clipboard) navigator.clipboard.writeText(el.textContent).then(() => {
    b.textContent = 'Copied'; setTimeout(() => b.textContent = 'Copy', 1200); });
});
document.querySelectorAll('.expand-details').forEach(d => d.addEventListener('toggle', () => {
  const s = d.querySelector('.expand-summary');
  s.textContent = '\\u22ef ' + (d.open ? 'Hide ' : 'Show ') + s.dataset.count + ' lines ' + s.dataset.pos;
}));
"""


def _generate_html(steps, path: str) -> str:
    """Write the self-contained HTML report of ``steps`` (pass_diff's dicts) to ``path``
    (creating its directory); returns ``path``."""
    steps = list(steps)
    n_changed = sum(1 for s in steps if s["changed"])
    n_add = sum(s["insertions"] for s in steps)
    n_del = sum(s["deletions"] for s in steps)
    sections = "\n".join(_step_html(k, s) for k, s in enumerate(steps))
    page = f"""<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Pass Diff Report</title><style>{_CSS}</style></head>
<body>
<div class="toolbar">
  <span class="title">TileLang Pass Diff Report</span>
  <span class="stat"><b>{len(steps)}</b> passes</span>
  <span class="stat"><b>{n_changed}</b> changed</span>
  <span class="stat"><b class="add">+{n_add}</b></span>
  <span class="stat"><b class="del">-{n_del}</b></span>
  <span class="actions">
    <button class="toolbar-btn" id="theme-btn">Light</button>
    <button class="toolbar-btn" id="expand-all">Expand All</button>
    <button class="toolbar-btn" id="collapse-all">Collapse All</button>
  </span>
</div>
{sections}
<div class="footer">Generated {html.escape(time.strftime("%Y-%m-%d %H:%M:%S"))}</div>
<script>{_JS}</script>
</body>
</html>
"""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path


# ----------------------------------------------------------------------------- public API
def pass_diff(func_or_mod, passes, *, mode: str = "terminal", context: int = 3,
              html_path: str = "pass_diff_report.html") -> list[dict]:
    """Run ``passes`` on ``func_or_mod`` in order and report what each changed (module docstring)."""
    mode = str(mode).strip().lower()
    if mode not in MODES:
        raise ValueError(f"pass_diff: mode must be one of {MODES}, got {mode!r}")
    named = _named_passes(passes)
    mod = _as_module(func_or_mod)
    steps = []
    for k, (name, p) in enumerate(named, 1):
        before = _script(mod)
        try:
            mod = p(mod)
        except Exception as err:
            raise RuntimeError(f"pass_diff: pass {k} '{name}' failed: {type(err).__name__}: {err}") from err
        step = _step(name, before, _script(mod), context)
        steps.append(step)
        if mode in ("terminal", "both"):
            _print_step_header(k, len(named), name)
            _print_colored_diff(step["diff_lines"])
            _print_step_summary(step)
    if mode in ("html", "both"):
        _generate_html(steps, html_path)
        print(f"[pass_diff] HTML report: {html_path}")
    return steps
