"""Runs in the language-server process.

``textDocument/codeAction``: quick fixes carried by the diagnostics, plus two fix builders.

Every diagnostic whose ``Diagnostic.fix`` is set carries it in its LSP ``data``; a code action
request turns the fixes of the diagnostics in its context into ``WorkspaceEdit``s (versioned
document edits), as long as the diagnostics are those of the document's current version.

When the checker offers no fix, ``add_missing_fixes`` (run as a result is delivered, on the same
text) builds one for:
- TL0401 on a fragment: insert ``T.clear(buf)`` before the first accumulation, with the same
  indentation, at the top level of the kernel's ``with T.Kernel`` body (so a clear never lands
  inside the loop that accumulates);
- TL0501: lower ``num_stages`` of the kernel's ``T.Pipelined`` loop to the largest count whose
  staged buffers fit the target's per-block budget (``stages_fit`` of the kernel's hover data,
  which the worker computed with the compiler's placement): the literal in the call, or the
  factory parameter's default when the call passes a parameter that the binding did not set.
"""

from __future__ import annotations

import ast
import logging
import re

from tilelang_lsp import convert
from tilelang_lsp.server_source import dotted

log = logging.getLogger("tilelang_lsp")


def register(server) -> None:
    @server.feature("textDocument/codeAction", convert.code_action_options())
    def text_document_code_action(ls, params):
        uri = params.text_document.uri
        snap = ls.snapshot(uri)
        st = ls.checks.docs.get(uri)
        if snap is None or st is None or st.result is None or st.result.version != snap[0]:
            return []
        index = ls.line_index(snap[1])
        out = []
        for diagnostic in params.context.diagnostics or ():
            fix = convert.fix_of(diagnostic)
            if fix is not None and fix.get("edits"):
                out.append(convert.to_lsp_code_action(fix, diagnostic, index, uri, snap[0]))
        return out


def add_missing_fixes(result, text: str, path: str) -> None:
    """Attach a fix to the diagnostics of ``result`` that have none and a builder here."""
    builders = {"TL0401": clear_fix, "TL0501": stages_fix}
    needed = [d for d in result.diagnostics if d.get("fix") is None and d["code"] in builders and d.get("span")]
    if not needed:
        return
    from tilelang_lsp.server_source import SourceModel

    model = SourceModel(text)
    if not model.ok or model.repaired:
        return
    for d in needed:
        fix = builders[d["code"]](d, model, path, result.kernels or {})
        if fix is not None:
            d["fix"] = fix


def _span(path: str, rng: tuple) -> dict:
    return {"file": path, "line": rng[0], "column": rng[1], "end_line": rng[2], "end_column": rng[3]}


def _t(model) -> str:
    return "T" if "T" in model.t_aliases else sorted(model.t_aliases)[0]


# ----- TL0401: insert T.clear -----------------------------------------------------------------------

def clear_fix(diag: dict, model, path: str, kernels: dict) -> dict | None:
    match = re.search(r"'(\w+)'", diag["message"])
    line = diag["span"]["line"]
    factory = model.factory_at(line)
    if match is None or factory is None:
        return None
    name = match.group(1)
    buffer = factory.buffers().get(name)
    if buffer is None or "alloc_fragment" not in buffer.detail:
        return None
    anchor = _top_level_statement(factory.node, line)
    if anchor is None or anchor.lineno <= buffer.line:
        return None
    text = model.lines[anchor.lineno - 1]
    indent = text[: len(text) - len(text.lstrip())]
    call = f"{_t(model)}.clear({name})"
    edit = {"span": _span(path, (anchor.lineno, 1, anchor.lineno, 1)), "new_text": f"{indent}{call}\n"}
    return {"title": f"add `{call}` before line {anchor.lineno}", "edits": [edit]}


def _top_level_statement(fn, line: int):
    """The statement of the kernel body (inside ``with T.Kernel``) that contains ``line``."""
    best = None
    for node in ast.walk(fn):
        if isinstance(node, ast.With) and node.lineno < line <= (node.end_lineno or node.lineno):
            if best is None or node.lineno > best.lineno:
                best = node
    body = best.body if best is not None else None
    if body is None:
        return None
    return next((s for s in body if s.lineno <= line <= (s.end_lineno or s.lineno)), None)


# ----- TL0501: fewer pipeline stages -----------------------------------------------------------------

def stages_fix(diag: dict, model, path: str, kernels: dict) -> dict | None:
    factory = model.factory_at(diag["span"]["line"])
    entries = kernels.get(factory.name, []) if factory is not None else []
    entry = next((e for e in entries if e["binding"] == diag.get("binding")), entries[0] if entries else None)
    if entry is None:
        return None
    summary = entry["summary"]
    staged = [p for p in summary.get("pipelines", []) if p["producers"] and p["stages"] >= 2]
    new = summary.get("stages_fit")
    if not staged or new is None:
        return None
    current = max(p["stages"] for p in staged)
    edit = _num_stages_edit(model, factory, staged, current, new, diag.get("binding") or "", path)
    if edit is None:
        return None
    return {"title": f"lower num_stages from {current} to {new} to fit {summary['arch']}'s shared memory",
            "edits": [edit]}


def _num_stages_edit(model, factory, staged, current, new, binding, path) -> dict | None:
    lines = {p["line"] for p in staged if p["stages"] == current}
    calls = [n for n in ast.walk(factory.node) if isinstance(n, ast.Call) and model.is_t(dotted(n.func)) == "Pipelined"]
    calls.sort(key=lambda c: (c.lineno not in lines, c.lineno))
    for call in calls:
        value = next((k.value for k in call.keywords if k.arg == "num_stages"), None)
        if value is None and len(call.args) >= 3:
            value = call.args[2]
        if isinstance(value, ast.Constant) and value.value == current:
            return {"span": _span(path, model.node_range(value)), "new_text": str(new)}
        if isinstance(value, ast.Name) and f"{value.id}=" not in binding:
            default = _parameter_default(factory.node, value.id)
            if isinstance(default, ast.Constant) and default.value == current:
                return {"span": _span(path, model.node_range(default)), "new_text": str(new)}
    return None


def _parameter_default(fn, name: str):
    args = fn.args.posonlyargs + fn.args.args
    defaults = dict(zip([a.arg for a in args[len(args) - len(fn.args.defaults):]], fn.args.defaults))
    defaults.update({a.arg: d for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None})
    return defaults.get(name)

