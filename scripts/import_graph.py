"""Draw the package structure from the code's own imports (read with ``ast``, nothing imported).

    python scripts/import_graph.py            # circles and back arrows of tilelang + tilelang_lsp
    python scripts/import_graph.py --edges    # also every edge between packages

Every ``import tilelang...`` / ``from tilelang... import`` (and ``__import__`` / ``import_module``
of a literal ``"tilelang..."`` name) in a module is an edge, wherever it stands: at module level
(run on import), inside a function (lazy) or under ``if TYPE_CHECKING``. ``from pkg import name``
points at the submodule ``pkg.name`` when there is one, else at ``pkg`` itself.

A *circle* is a set of modules that reach each other through edges (a strongly connected
component). A *back arrow* is an edge from a lower layer to a higher one (``LAYERS``); the lazy
ones justified in docs/architecture.md are listed in ``ALLOWED_BACK_ARROWS``.

Exit status: 1 when there is a circle, or (``--strict``) a back arrow not allowed or a module in
no layer; else 0.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tilelang", "tilelang_lsp")

# Lowest first. A module belongs to the layer of its longest matching prefix. The ground floor is
# what every layer may import (pure helpers and facts); the front door is the public ``tilelang``
# package and everything else directly under it (upstream's facades over the whole library:
# tilelang.env, tilelang.cache, tilelang.contrib...), so a library module importing one of those
# shows as a back arrow until it is given a lower layer here.
LAYERS = [
    ("ground floor", ("tilelang.artifact", "tilelang.diagnostics", "tilelang.errors", "tilelang.ir", "tilelang.knobs",
                      "tilelang.targets", "tilelang.tir_utils", "tilelang.version",
                      # the shims that give apache-tvm upstream's names (imports only tvm and tir_utils)
                      "tilelang.tvm_compat",
                      # compile instrumentation: sessions, pass events, and the pass timing tool
                      "tilelang.instrumentation", "tilelang.tools.pass_timing",
                      # layout pictures from plain values (the language server loads it by path)
                      "tilelang.tools.layout_render")),
    ("frontend", ("tilelang.frontend",)),
    ("language/layout", ("tilelang.language", "tilelang.layout", "tilelang.tools.plot_layout")),
    ("transform", ("tilelang.transform",)),
    ("analysis", ("tilelang.analysis",)),
    ("codegen", ("tilelang.codegen",)),
    ("engine", ("tilelang.engine",)),
    ("jit", ("tilelang.jit",)),
    ("autotuner/profiler", ("tilelang.autotuner", "tilelang.profiler", "tilelang.utils", "tilelang.testing")),
    ("front door", ("tilelang",)),
    ("language server", ("tilelang_lsp",)),
]

# (importer, imported): lazy back arrows justified in docs/architecture.md ("Package structure").
ALLOWED_BACK_ARROWS = {
    ("tilelang.jit.kernel", "tilelang.profiler"),    # JITKernel.get_profiler(), upstream's API
}


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    kind: str       # "module" (runs on import), "lazy" (inside a function), "typing" (TYPE_CHECKING)
    line: int
    hidden: bool = False   # through __import__ / importlib.import_module


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def find_modules(root: Path = ROOT) -> dict:
    """{module name: path} of every .py file of the packages."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            out[module_name(path, root)] = path
    return out


def _resolve(name: str, modules: dict) -> str | None:
    """The module ``name`` denotes, or its nearest enclosing known module (None: not ours)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _is_type_checking(test) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(node, here: str, is_pkg: bool, modules: dict) -> list:
    """Module names one import statement or dynamic import call points at."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = here.split(".") if is_pkg else here.split(".")[:-1]
            anchor = anchor[:len(anchor) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
    arg = node.args[0] if node.args else None
    return [arg.value] if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else []


def _is_dynamic_import(node) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return name in ("__import__", "import_module")


def module_edges(name: str, path: Path, modules: dict) -> list:
    """Every edge out of one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_pkg = path.name == "__init__.py"
    edges = []

    def visit(node, kind):
        for child in ast.iter_child_nodes(node):
            k = kind
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                k = "lazy" if kind == "module" else kind
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit_one(stmt, "typing")
                for stmt in child.orelse:
                    visit_one(stmt, kind)
                continue
            visit_one(child, k)

    def visit_one(child, kind):
        dynamic = _is_dynamic_import(child)
        if isinstance(child, (ast.Import, ast.ImportFrom)) or dynamic:
            for target in _targets(child, name, is_pkg, modules):
                dst = _resolve(target, modules)
                if dst is not None and dst != name:
                    edges.append(Edge(name, dst, kind, child.lineno, dynamic))
        visit(child, kind)

    visit(tree, "module")
    return edges


def all_edges(root: Path = ROOT) -> list:
    """Every edge of the packages under ``root`` (one per import statement and target)."""
    modules = find_modules(root)
    return list(dict.fromkeys(e for name, path in modules.items() for e in module_edges(name, path, modules)))


def layer_of(module: str) -> int:
    """Index into ``LAYERS`` (``len(LAYERS)`` for a module no layer names)."""
    best, best_len = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    return best if best is not None else len(LAYERS)


def _layer_name(module: str) -> str:
    i = layer_of(module)
    return LAYERS[i][0] if i < len(LAYERS) else "no layer"


def circles(edges: list) -> list:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    graph = {}
    for e in edges:
        graph.setdefault(e.src, set()).add(e.dst)
        graph.setdefault(e.dst, set())
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def strongconnect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return sorted(out)


def back_arrows(edges: list) -> list:
    """Edges from a lower layer to a higher one."""
    return [e for e in edges if layer_of(e.src) < layer_of(e.dst)]


def _describe(e: Edge) -> str:
    how = e.kind + (", hidden in __import__" if e.hidden else "")
    return f"{e.src} -> {e.dst}  ({how}, line {e.line})"


def unjustified(edges: list) -> list:
    """The back arrows that are not lazy imports listed in ``ALLOWED_BACK_ARROWS``."""
    return [e for e in back_arrows(edges) if e.kind == "module" or (e.src, e.dst) not in ALLOWED_BACK_ARROWS]


def report(edges: list, show_edges: bool = False, strict: bool = False, root: Path = ROOT) -> int:
    found = circles(edges)
    back = back_arrows(edges)
    bad = unjustified(edges)
    hidden = [e for e in edges if e.hidden]
    homeless = sorted(m for m in find_modules(root) if layer_of(m) == len(LAYERS))
    print(f"{len(find_modules(root))} modules, {len(edges)} import edges")
    if homeless:
        print("modules in no layer (add them to LAYERS): " + ", ".join(homeless))
    print(f"circles: {len(found)}")
    for comp in found:
        members = set(comp)
        print("  " + " <-> ".join(comp))
        for e in edges:
            if e.src in members and e.dst in members:
                print("      " + _describe(e))
    print(f"back arrows: {len(back)} ({len(back) - len(bad)} justified)")
    for e in back:
        mark = "" if e in bad else "  [justified]"
        print(f"  {_layer_name(e.src)} -> {_layer_name(e.dst)}: {_describe(e)}{mark}")
    if hidden:
        print(f"imports hidden in __import__/import_module: {len(hidden)}")
        for e in hidden:
            print("  " + _describe(e))
    if show_edges:
        pairs = sorted({(layer_of(e.src), e.src.rsplit('.', 1)[0] if e.src.count('.') > 1 else e.src,
                         e.dst.rsplit('.', 1)[0] if e.dst.count('.') > 1 else e.dst) for e in edges})
        print("package edges:")
        for _, a, b in pairs:
            if a != b:
                print(f"  {a} -> {b}")
    return 1 if found or (strict and (bad or homeless)) else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", action="store_true", help="also list the edges between packages")
    parser.add_argument("--strict", action="store_true",
                        help="also exit 1 on a back arrow that is not justified, or a module in no layer")
    args = parser.parse_args(argv)
    return report(all_edges(), args.edges, args.strict)


if __name__ == "__main__":
    sys.exit(main())
