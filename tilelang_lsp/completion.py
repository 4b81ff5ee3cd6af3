"""Runs in the language-server process.

Completion and signature help, from the text before the cursor and the ``SourceModel``.

- After ``T.`` (any alias of ``tilelang.language``) or ``tilelang.``: the namespace's members with
  their signatures and docs (the index the worker introspected; ``worker_tools.language_index``).
- Inside the parentheses of a call: the callee's keyword arguments not given yet (``num_stages=``,
  ``threads=``, ``transpose_B=``, ``policy=``, ``clear_accum=``, ``dim=``, ``clear=``, ``out_idx=``,
  ...), from its signature, or from ``KNOWN_KEYWORDS`` before the index has arrived; then names.
- Elsewhere: the names visible at the cursor, buffers and tensors of the kernel first.

``call_context`` finds the innermost open call before the cursor by scanning the text (strings
and comments skipped, brackets matched), so it works on half-typed code that does not parse.
Items are plain dicts (``label``, ``kind``, ``detail``, ``doc``, ``insert``, ``sort``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SCAN_CHARS = 6000
KNOWN_KEYWORDS = {
    "Kernel": ["threads", "cluster_dims", "prelude"],
    "Pipelined": ["num_stages", "order", "stage", "sync", "group"],
    "gemm": ["transpose_A", "transpose_B", "policy", "clear_accum", "k_pack", "wg_wait"],
    "reduce_sum": ["dim", "clear"], "reduce_max": ["dim", "clear"], "reduce_min": ["dim", "clear"],
    "reduce_abssum": ["dim", "clear"], "reduce_absmax": ["dim", "clear"], "cumsum": ["dim", "reverse"],
    "copy": ["coalesced_width", "disable_tma", "eviction_policy"],
    "jit": ["out_idx", "target", "pass_configs", "compile_flags"],
}
_ATTRIBUTE = re.compile(r"([A-Za-z_][\w]*)\.([A-Za-z_]\w*)?$")
_CALLEE = re.compile(r"([A-Za-z_][\w.]*)\s*$")
_KEYWORD = re.compile(r"\b([A-Za-z_]\w*)\s*=(?!=)")


@dataclass
class CallContext:
    callee: str                 # dotted name before the "(", e.g. "T.gemm"
    arg_index: int              # 0-based index of the argument under the cursor
    keywords: list = field(default_factory=list)   # keyword names already given
    current_keyword: str | None = None


def call_context(text_before: str) -> CallContext | None:
    """The innermost unclosed call in ``text_before`` (the text up to the cursor)."""
    chunk = text_before[-SCAN_CHARS:]
    opens = _open_brackets(chunk)
    if not opens or chunk[opens[-1]] != "(":
        return None
    start = opens[-1]
    match = _CALLEE.search(chunk[:start])
    if match is None:
        return None
    args = _top_level_args(chunk[start + 1:])
    keywords = [m.group(1) for a in args[:-1] for m in [_KEYWORD.match(a.strip())] if m]
    current = _KEYWORD.match(args[-1].strip()) if args else None
    return CallContext(match.group(1), len(args) - 1, keywords, current.group(1) if current else None)


def _open_brackets(chunk: str) -> list:
    """Offsets of the brackets still open at the end of ``chunk`` (strings and comments skipped)."""
    stack, i, n = [], 0, len(chunk)
    while i < n:
        ch = chunk[i]
        if ch == "#":
            end = chunk.find("\n", i)
            i = n if end < 0 else end
        elif ch in "'\"":
            i = _skip_string(chunk, i)
            continue
        elif ch in "([{":
            stack.append(i)
        elif ch in ")]}" and stack:
            stack.pop()
        i += 1
    return stack


def _skip_string(chunk: str, i: int) -> int:
    quote = chunk[i] * 3 if chunk.startswith(chunk[i] * 3, i) else chunk[i]
    j = i + len(quote)
    while j < len(chunk):
        if chunk[j] == "\\":
            j += 2
            continue
        if chunk.startswith(quote, j):
            return j + len(quote)
        if chunk[j] == "\n" and len(quote) == 1:
            return j
        j += 1
    return len(chunk)


def _top_level_args(inside: str) -> list:
    """The argument texts after an open paren, split at commas of depth 0."""
    args, depth, current, i = [], 0, [], 0
    while i < len(inside):
        ch = inside[i]
        if ch in "'\"":
            j = _skip_string(inside, i)
            current.append(inside[i:j])
            i = j
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            args.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    args.append("".join(current))
    return args


# ----- members -------------------------------------------------------------------------------------

def lookup(index: dict | None, model, dotted: str):
    """(namespace label, member dict) for ``T.gemm`` / ``tilelang.jit`` / ``jit``, else (None, None)."""
    if not index:
        return None, None
    head, _, rest = dotted.rpartition(".")
    space = "T" if head in model.t_aliases else "tilelang" if head in model.tilelang_aliases else None
    if space is None and not head and dotted in ("jit", "lazy_jit"):
        space, rest = "tilelang", dotted
    if space is None:
        return None, None
    return space, next((m for m in index.get(space, []) if m["name"] == rest), None)


def member_items(members: list, space: str) -> list:
    out = []
    for m in members:
        sig = m.get("signature") or ""
        out.append({"label": m["name"], "kind": m["kind"], "detail": f"{space}.{m['name']}{sig}",
                    "doc": m.get("doc") or None, "sort": ("0" if not m["name"][0].isupper() else "1") + m["name"]})
    return out


def keyword_items(ctx: CallContext, member: dict | None) -> list:
    if member is not None:
        names = [(p["name"], p.get("default")) for p in member["params"]
                 if p["kind"] in ("POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY")]
    else:
        names = [(n, None) for n in KNOWN_KEYWORDS.get(ctx.callee.rpartition(".")[2], [])]
    given = set(ctx.keywords)
    positional = ctx.arg_index if member is None else sum(
        1 for p in member["params"][: ctx.arg_index] if p["kind"] == "POSITIONAL_OR_KEYWORD")
    taken = {n for n, _ in names[:positional]} if member is not None else set()
    return [{"label": f"{n}=", "kind": "keyword", "insert": f"{n}=", "sort": f"0{i:02d}",
             "detail": f"{n}={d}" if d is not None else f"{n} (keyword argument)"}
            for i, (n, d) in enumerate(names) if n not in given and n not in taken]


def name_items(definitions: dict) -> list:
    rank = {"buffer": "1", "tensor": "1", "param": "2", "factory": "3", "kernel": "3"}
    return [{"label": d.name, "kind": "buffer" if d.kind in ("buffer", "tensor") else "variable",
             "detail": d.detail or d.kind, "sort": rank.get(d.kind, "4") + d.name}
            for d in definitions.values()]


def complete(model, index: dict | None, line_text_before: str, text_before: str, line: int):
    """(items, incomplete) for a cursor whose line reads ``line_text_before`` up to it."""
    attr = _ATTRIBUTE.search(line_text_before)
    if attr is not None:
        head = attr.group(1)
        space = "T" if head in model.t_aliases else "tilelang" if head in model.tilelang_aliases else None
        if space is None:
            return [], False
        return member_items((index or {}).get(space, []), space), index is None
    items = []
    ctx = call_context(text_before)
    if ctx is not None and ctx.current_keyword is None:
        items += keyword_items(ctx, lookup(index, model, ctx.callee)[1])
    items += name_items(model.definitions_at(line))
    items += [{"label": a, "kind": "module", "detail": "tilelang.language", "sort": "5" + a} for a in model.t_aliases]
    return items, False


def signature(model, index: dict | None, text_before: str):
    """(label, [param texts], doc, active index) of the call around the cursor, or None."""
    ctx = call_context(text_before)
    if ctx is None:
        return None
    space, member = lookup(index, model, ctx.callee)
    if member is None or member.get("signature") is None:
        return None
    params = [_param_label(p) for p in member["params"]]
    label = f"{space}.{member['name']}({', '.join(params)})"
    active = ctx.arg_index
    wanted = ctx.current_keyword
    if wanted is not None:
        active = next((i for i, p in enumerate(member["params"]) if p["name"] == wanted), active)
    else:
        star = next((i for i, p in enumerate(member["params"]) if p["kind"] == "VAR_POSITIONAL"), None)
        if star is not None and active >= star:
            active = star
    return label, params, member.get("doc") or "", min(active, max(len(params) - 1, 0))


def _param_label(p: dict) -> str:
    prefix = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}.get(p["kind"], "")
    return prefix + p["name"] + (f"={p['default']}" if p.get("default") is not None else "")


# ----- an index from the sources, before the worker answers ---------------------------------------

def static_index() -> dict:
    """``{"T": [...], "tilelang": [...]}`` read with ``ast`` from the installed sources.

    Used until the worker's introspected index arrives (and when no cached one exists): it knows
    the functions and classes defined in ``tilelang/language/*.py`` and ``tilelang/__init__.py``
    with their signatures and docstrings, and the other names those modules export.
    """
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("tilelang")
    if spec is None or not spec.submodule_search_locations:
        return {"T": [], "tilelang": []}
    root = Path(list(spec.submodule_search_locations)[0])
    language = {}
    for path in sorted((root / "language").glob("*.py")):
        language.update(_defs_of(path, exported_only=path.name == "__init__.py"))
    return {"T": sorted(language.values(), key=lambda m: m["name"]),
            "tilelang": sorted(_defs_of(root / "__init__.py", True).values(), key=lambda m: m["name"])}


def _defs_of(path, exported_only: bool) -> dict:
    import ast

    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    out = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)) and not stmt.name.startswith("_"):
            out[stmt.name] = _def_entry(stmt, str(path))
        elif exported_only and isinstance(stmt, (ast.ImportFrom, ast.Assign)) and \
                getattr(stmt, "module", None) != "__future__":
            names = [a.asname or a.name for a in stmt.names] if isinstance(stmt, ast.ImportFrom) else \
                [n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            for name in names:
                if not name.startswith("_") and name != "*":
                    out.setdefault(name, {"name": name, "kind": "value", "signature": None, "params": [],
                                          "doc": "", "file": None, "line": None})
    return out


def _def_entry(stmt, path: str) -> dict:
    import ast

    fn = stmt if isinstance(stmt, ast.FunctionDef) else next(
        (s for s in stmt.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
    params = []
    if fn is not None:
        a = fn.args
        positional = a.posonlyargs + a.args
        defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        params = [{"name": p.arg, "default": ast.unparse(d) if d is not None else None, "kind": "POSITIONAL_OR_KEYWORD"}
                  for p, d in zip(positional, defaults) if p.arg != "self"]
        if a.vararg:
            params.append({"name": a.vararg.arg, "default": None, "kind": "VAR_POSITIONAL"})
        params += [{"name": p.arg, "default": ast.unparse(d) if d is not None else None, "kind": "KEYWORD_ONLY"}
                   for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    sig = "(" + ", ".join(_param_label(p) for p in params) + ")" if fn is not None else None
    return {"name": stmt.name, "kind": "class" if isinstance(stmt, ast.ClassDef) else "function", "signature": sig,
            "params": params, "doc": ast.get_docstring(stmt) or "", "file": path, "line": stmt.lineno}
