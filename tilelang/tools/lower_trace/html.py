"""The lower trace HTML report: one self-contained page (no external assets).

A sidebar lists every record in start order, indented by nesting depth (``data-depth``, and
``data-parent-index`` naming the enclosing pass), grouped by phase, with its status (CHANGED,
NO-OP, FAILED, CODEGEN) and line counts; the main pane shows the selected record's side-by-side
diff (``diff._make_diff_html``), the error of a failed pass, and the full before/after text on
request. A light/dark theme toggle (``#theme-btn``) is remembered in ``localStorage``
(``lower-trace-theme``). ``section_cache`` (a dict kept by the caller) saves re-rendering the
diffs of records already written when the report is rewritten after each pass.
"""

from __future__ import annotations

import html as _html
import os
import tempfile

from .diff import _make_diff_html

_CSS = """
:root { --bg:#ffffff; --fg:#1f2328; --muted:#656d76; --panel:#f6f8fa; --border:#d0d7de;
  --add-bg:#dafbe1; --add-fg:#116329; --del-bg:#ffebe9; --del-fg:#82071e; --ws-bg:#fff8c5;
  --chg:#ffd33d66; --accent:#0969da; --fail:#cf222e; --codegen:#8250df; }
[data-theme="dark"] { --bg:#0d1117; --fg:#e6edf3; --muted:#8d96a0; --panel:#161b22; --border:#30363d;
  --add-bg:#12261e; --add-fg:#3fb950; --del-bg:#25171c; --del-fg:#f85149; --ws-bg:#272115;
  --chg:#bb800966; --accent:#4493f8; --fail:#f85149; --codegen:#a371f7; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 -apple-system,Segoe UI,Helvetica,Arial,sans-serif; background:var(--bg);
  color:var(--fg); display:flex; height:100vh; }
header { position:fixed; top:0; left:0; right:0; height:44px; display:flex; align-items:center; gap:12px;
  padding:0 14px; background:var(--panel); border-bottom:1px solid var(--border); z-index:2; }
header h1 { font-size:15px; margin:0; }
header .summary { color:var(--muted); font-size:12px; flex:1; }
#theme-btn { border:1px solid var(--border); background:var(--bg); color:var(--fg); border-radius:6px;
  padding:3px 10px; cursor:pointer; }
nav { width:340px; margin-top:44px; overflow:auto; border-right:1px solid var(--border); background:var(--panel); }
nav .phase { padding:8px 10px 2px; font-weight:600; color:var(--muted); font-size:12px; text-transform:uppercase; }
nav a { display:flex; gap:6px; padding:3px 10px; color:var(--fg); text-decoration:none; font-size:13px;
  border-left:3px solid transparent; }
nav a:hover, nav a.active { background:var(--bg); border-left-color:var(--accent); }
nav a .idx { color:var(--muted); min-width:2.2em; text-align:right; }
nav a .name { flex:1; overflow:hidden; text-overflow:ellipsis; white-space:nowrap; }
.badge { font-size:11px; border-radius:10px; padding:0 6px; border:1px solid var(--border); color:var(--muted); }
.badge.changed { color:var(--add-fg); } .badge.failed { color:var(--fail); border-color:var(--fail); }
.badge.codegen { color:var(--codegen); }
main { flex:1; margin-top:44px; overflow:auto; padding:14px 18px; }
section.record { display:none; } section.record.shown { display:block; }
section h2 { font-size:16px; margin:0 0 6px; } .meta { color:var(--muted); font-size:12px; margin-bottom:10px; }
.error { color:var(--fail); white-space:pre-wrap; font-family:monospace; border:1px solid var(--fail);
  padding:6px 8px; border-radius:6px; margin-bottom:10px; }
.noop-msg { color:var(--muted); font-style:italic; }
.diff table { border-collapse:collapse; width:100%; table-layout:fixed; font:12px/1.4 ui-monospace,Menlo,monospace; }
.diff col.c-ln { width:50px; } .diff col.c-sg { width:18px; }
.diff td { padding:0 4px; vertical-align:top; white-space:pre-wrap; word-break:break-all; }
.diff td.ln { color:var(--muted); text-align:right; user-select:none; }
.diff td.code.add, .diff td.ln-add { background:var(--add-bg); }
.diff td.code.del, .diff td.ln-del { background:var(--del-bg); }
.diff td.code.ws, .diff td.ln-ws { background:var(--ws-bg); }
.diff span.chg { background:var(--chg); border-radius:2px; }
.diff tr.folded { display:none; } .diff tr.folded.open { display:table-row; }
.diff button.expand { width:100%; border:0; background:var(--panel); color:var(--accent); cursor:pointer;
  font-size:12px; }
details { margin-top:12px; } details pre { background:var(--panel); padding:8px; overflow:auto; font-size:12px; }
"""

_JS = """
function applyTheme(t) { document.documentElement.setAttribute('data-theme', t);
  document.getElementById('theme-btn').textContent = t === 'dark' ? 'Light' : 'Dark'; }
function toggleTheme() {
  var t = document.documentElement.getAttribute('data-theme') === 'dark' ? 'light' : 'dark';
  try { localStorage.setItem('lower-trace-theme', t); } catch (e) {}
  applyTheme(t); }
function show(id) {
  document.querySelectorAll('section.record').forEach(function (s) { s.classList.toggle('shown', s.id === id); });
  document.querySelectorAll('nav a').forEach(function (a) { a.classList.toggle('active', a.dataset.target === id); });
  if (location.hash !== '#' + id) history.replaceState(null, '', '#' + id); }
function unfold(btn) {
  var row = btn.closest('tr'), prev = row.previousElementSibling;
  while (prev && prev.classList.contains('folded')) { prev.classList.add('open'); prev = prev.previousElementSibling; }
  row.remove(); }
document.addEventListener('DOMContentLoaded', function () {
  var saved = null; try { saved = localStorage.getItem('lower-trace-theme'); } catch (e) {}
  applyTheme(saved || (window.matchMedia && matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light'));
  var first = document.querySelector('section.record');
  var wanted = location.hash ? location.hash.slice(1) : null;
  if (wanted && document.getElementById(wanted)) show(wanted); else if (first) show(first.id); });
"""

_STATUS_LABEL = {"completed": None, "failed": "FAILED", "skipped": "SKIPPED", "codegen": "CODEGEN"}


def _status(record) -> tuple[str, str]:
    label = _STATUS_LABEL.get(record.status)
    if label is None:
        label = "CHANGED" if record.changed else "NO-OP"
    return label, label.lower().replace("-", "")


def _section(record, anchor: str) -> str:
    esc = _html.escape
    label, css = _status(record)
    parts = [f'<section class="record" id="{anchor}" data-index="{record.index}" data-depth="{record.depth}"'
             + (f' data-parent-index="{record.parent_index}"' if record.parent_index is not None else "") + ">",
             f"<h2>{esc(record.name)} <span class=\"badge {css}\">{label}</span></h2>",
             f'<div class="meta">phase {esc(record.phase)} &middot; #{record.index} &middot; depth {record.depth}'
             + (f" &middot; inside #{record.parent_index}" if record.parent_index is not None else "")
             + f" &middot; +{record.add_lines} / \u2212{record.del_lines}</div>"]
    if record.error_msg:
        parts.append(f'<div class="error">{esc(record.error_msg)}</div>')
    if record.status == "failed" and not record.after_text:
        parts.append('<p class="noop-msg">The pass did not finish; the IR before it:</p>'
                     f"<details open><summary>before</summary><pre>{esc(record.before_text)}</pre></details>")
    else:
        parts.append(_make_diff_html(record.before_text, record.after_text))
        parts.append(f"<details><summary>full text before</summary><pre>{esc(record.before_text)}</pre></details>"
                     f"<details><summary>full text after</summary><pre>{esc(record.after_text)}</pre></details>")
    parts.append("</section>")
    return "\n".join(parts)


def generate_html(records, path: str, *, title: str = "TileLang Lower Trace", section_cache: dict | None = None) -> str:
    """Write the report of ``records`` to ``path`` (atomically) and return ``path``."""
    esc = _html.escape
    ordered = sorted(records, key=lambda r: r.index)
    nav, sections, phase = [], [], object()
    for n, record in enumerate(ordered):
        anchor = f"r{n}-{record.index}"
        if record.phase != phase:
            phase = record.phase
            nav.append(f'<div class="phase">{esc(str(phase))}</div>')
        label, css = _status(record)
        indent = 10 + 14 * max(0, record.depth)
        parent = f' data-parent-index="{record.parent_index}"' if record.parent_index is not None else ""
        nav.append(f'<a href="#{anchor}" data-target="{anchor}" data-depth="{record.depth}"{parent} '
                   f'style="padding-left:{indent}px" onclick="show(\'{anchor}\');return false;">'
                   f'<span class="idx">{record.index}</span><span class="name">{esc(record.name)}</span>'
                   f'<span class="badge {css}">{label}</span></a>')
        key = (record.index, record.status, record.name, len(record.before_text), len(record.after_text),
               hash(record.after_text))
        text = section_cache.get(key) if section_cache is not None else None
        if text is None:
            text = _section(record, anchor)
            if section_cache is not None:
                section_cache[key] = text
        sections.append(text)
    failed = sum(r.status == "failed" for r in ordered)
    changed = sum(bool(r.changed) for r in ordered)
    summary = f"{len(ordered)} records &middot; {changed} changed" + (f" &middot; {failed} FAILED" if failed else "")
    page = (f'<!DOCTYPE html>\n<html lang="en" data-theme="light"><head><meta charset="utf-8">'
            f"<title>{esc(title)}</title><style>{_CSS}</style><script>{_JS}</script></head><body>\n"
            f'<header><h1>{esc(title)}</h1><span class="summary">{summary}</span>'
            f'<button id="theme-btn" onclick="toggleTheme()">Dark</button></header>\n'
            f"<nav>{''.join(nav)}</nav>\n<main>{''.join(sections) or '<p class=noop-msg>No passes recorded.</p>'}"
            "</main>\n</body></html>\n")
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".report.", suffix=".html", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(page)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path
