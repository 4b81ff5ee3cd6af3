"""Runs in the language-server process.

What the server knows about a document from ``ast`` alone: fast, in-process, never runs code.

``SourceModel(text)`` parses the text (``parse_tolerant``: when the text does not parse, the
offending lines are blanked one at a time, up to a few tries, so a half-typed line does not hide
the rest of the file) and indexes:

- ``factories``: module-level functions that are kernel factories (decorated with ``*.jit`` /
  ``lazy_jit``, or containing a nested ``@T.prim_func``) and module-level ``@T.prim_func``s;
  each with its kernels (nested ``@T.prim_func`` definitions), their tensor parameters and the
  buffers they allocate (``name = T.alloc_*(...)``);
- ``t_aliases``: the names ``tilelang.language`` is imported as (``T`` by default).

Positions: ``line`` is 1-based; ``col`` values are 0-based *character* columns (``ast`` gives
UTF-8 byte offsets; ``char_col`` converts). Ranges handed to ``convert`` are 1-based
``(line, col+1, end_line, end_col+1)`` tuples, like ``Span``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

MAX_REPAIRS = 4
ALLOC_PREFIXES = ("alloc_", "empty")


def parse_tolerant(text: str):
    """(tree, repaired) for ``text``; lines that fail to parse are blanked; None if hopeless."""
    lines = text.split("\n")
    for attempt in range(MAX_REPAIRS + 1):
        try:
            return ast.parse("\n".join(lines)), attempt > 0
        except SyntaxError as err:
            line = (err.lineno or 0) - 1
            if not 0 <= line < len(lines) or attempt == MAX_REPAIRS:
                return None, True
            lines[line] = _blank(lines[line])
        except (ValueError, RecursionError, MemoryError):
            return None, True
    return None, True


def _blank(line: str) -> str:
    indent = line[: len(line) - len(line.lstrip())]
    return f"{indent}pass" if line.strip() else line


@dataclass
class Definition:
    name: str
    kind: str              # buffer, tensor, param, factory, kernel, function, variable
    line: int
    col: int
    end_col: int
    detail: str = ""
    node: ast.AST | None = None


@dataclass
class Kernel:
    name: str
    node: ast.FunctionDef
    params: list = field(default_factory=list)    # [Definition] (tensor parameters)
    buffers: list = field(default_factory=list)   # [Definition]


@dataclass
class Factory:
    name: str
    node: ast.FunctionDef
    is_prim_func: bool
    kernels: list = field(default_factory=list)

    @property
    def first_line(self) -> int:
        return min([self.node.lineno] + [d.lineno for d in self.node.decorator_list])

    def contains(self, line: int) -> bool:
        return self.first_line <= line <= (self.node.end_lineno or self.node.lineno)

    def buffers(self) -> dict:
        return {b.name: b for k in self.kernels for b in k.params + k.buffers}


def dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    if isinstance(node, ast.Call):
        return dotted(node.func)
    return ""


def _decorator_names(fn) -> list:
    return [dotted(d) for d in fn.decorator_list]


def _is_prim_func(fn) -> bool:
    return any(n.endswith("prim_func") for n in _decorator_names(fn))


def _is_jit(fn) -> bool:
    return any(n.split(".")[-1] in ("jit", "lazy_jit") for n in _decorator_names(fn))


class SourceModel:
    """The ``ast`` view of one document text (see the module docstring)."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.split("\n")
        self.tree, self.repaired = parse_tolerant(text)
        self.factories: list[Factory] = []
        self.t_aliases = {"T"}
        self.tilelang_aliases = {"tilelang"}
        if self.tree is not None:
            self._index()

    @property
    def ok(self) -> bool:
        return self.tree is not None

    # ----- indexing -----------------------------------------------------------------------
    def _index(self) -> None:
        for stmt in self.tree.body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self._aliases(stmt)
            elif isinstance(stmt, ast.FunctionDef):
                self._maybe_factory(stmt)

    def _aliases(self, stmt) -> None:
        for alias in stmt.names:
            full = f"{stmt.module}.{alias.name}" if isinstance(stmt, ast.ImportFrom) else alias.name
            if full == "tilelang.language" and alias.asname:
                self.t_aliases.add(alias.asname)
            elif full == "tilelang":
                self.tilelang_aliases.add(alias.asname or "tilelang")

    def _maybe_factory(self, fn) -> None:
        if _is_prim_func(fn):
            factory = Factory(fn.name, fn, True, [self._kernel(fn)])
        else:
            kernels = [self._kernel(n) for n in ast.walk(fn)
                       if isinstance(n, ast.FunctionDef) and n is not fn and _is_prim_func(n)]
            if not kernels and not _is_jit(fn):
                return
            factory = Factory(fn.name, fn, False, kernels)
        self.factories.append(factory)

    def _kernel(self, fn) -> Kernel:
        k = Kernel(fn.name, fn)
        for arg in fn.args.args + fn.args.kwonlyargs:
            detail = ast.unparse(arg.annotation) if arg.annotation is not None else ""
            k.params.append(self._definition(arg.arg, "tensor" if detail else "param", arg, detail, len(arg.arg)))
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                call = node.value
                if isinstance(call, ast.Call) and dotted(call.func).split(".")[-1].startswith(ALLOC_PREFIXES):
                    target = node.targets[0]
                    k.buffers.append(self._definition(target.id, "buffer", target, ast.unparse(call), len(target.id)))
        return k

    def _definition(self, name, kind, node, detail, length) -> Definition:
        col = self.char_col(node.lineno, node.col_offset)
        return Definition(name, kind, node.lineno, col, col + length, detail, node)

    # ----- positions ----------------------------------------------------------------------
    def char_col(self, line: int, byte_col: int) -> int:
        if not 1 <= line <= len(self.lines):
            return byte_col
        return len(self.lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    def byte_col(self, line: int, col: int) -> int:
        if not 1 <= line <= len(self.lines):
            return col
        return len(self.lines[line - 1][:col].encode("utf-8"))

    def node_range(self, node) -> tuple:
        end_line = getattr(node, "end_lineno", None) or node.lineno
        start = self.char_col(node.lineno, node.col_offset)
        end = self.char_col(end_line, getattr(node, "end_col_offset", None) or node.col_offset)
        return (node.lineno, start + 1, end_line, end + 1)

    def factory_at(self, line: int) -> Factory | None:
        return next((f for f in self.factories if f.contains(line)), None)

    def factory(self, name: str) -> Factory | None:
        return next((f for f in self.factories if f.name == name), None)

    def node_at(self, line: int, col: int, kinds=(ast.Name, ast.Attribute, ast.Call, ast.arg)):
        """The smallest node of ``kinds`` covering 1-based ``line``, 0-based char ``col``."""
        if self.tree is None:
            return None
        point = (line, self.byte_col(line, col))
        best, best_size = None, None
        for node in self._walk_statement_at(line):
            if not isinstance(node, kinds) or not hasattr(node, "lineno"):
                continue
            start = (node.lineno, node.col_offset)
            end = (node.end_lineno or node.lineno, node.end_col_offset or node.col_offset)
            if start <= point <= end:
                size = (end[0] - start[0], end[1] - start[1])
                if best is None or size < best_size:
                    best, best_size = node, size
        return best

    def _walk_statement_at(self, line: int):
        """``ast.walk`` of the module-level statement covering ``line`` (decorators included)."""
        for stmt in self.tree.body:
            first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
            if first <= line <= (stmt.end_lineno or stmt.lineno):
                return ast.walk(stmt)
        return iter(())

    def call_at(self, line: int, col: int):
        """The innermost ``ast.Call`` whose callee covers the position (``T.gemm`` under the cursor)."""
        node = self.node_at(line, col, (ast.Call,))
        while node is not None:
            func = node.func
            lo, hi = (func.lineno, func.col_offset), (func.end_lineno, func.end_col_offset)
            if lo <= (line, self.byte_col(line, col)) <= hi:
                return node
            return None
        return None

    def is_t(self, name: str) -> str | None:
        """``"gemm"`` for ``T.gemm`` (any alias of tilelang.language), else None."""
        head, _, rest = name.partition(".")
        return rest if head in self.t_aliases and rest and "." not in rest else None

    def ordinal_of_call(self, factory: Factory, call: ast.Call) -> int:
        """Position of ``call`` among the calls of the same ``T.`` member in ``factory``."""
        name = dotted(call.func)
        calls = sorted((n for n in ast.walk(factory.node) if isinstance(n, ast.Call) and dotted(n.func) == name),
                       key=lambda n: (n.lineno, n.col_offset))
        return next((i for i, n in enumerate(calls) if n is call), 0)

    # ----- definitions and symbols --------------------------------------------------------
    def definitions_at(self, line: int) -> dict:
        """name -> Definition visible at ``line``: module level, then the enclosing functions."""
        out = {}
        if self.tree is None:
            return out
        self._collect(self.tree.body, out)
        for fn in self._enclosing_functions(line):
            for arg in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs:
                out[arg.arg] = self._definition(arg.arg, "param", arg, ast.unparse(arg.annotation)
                                                if arg.annotation is not None else "", len(arg.arg))
            self._collect(fn.body, out, before=line)
        return out

    def _enclosing_functions(self, line: int) -> list:
        out = []
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.lineno <= line <= (node.end_lineno or node.lineno):
                out.append(node)
        return sorted(out, key=lambda n: n.lineno)

    def _collect(self, body, out: dict, before: int | None = None) -> None:
        for stmt in body:
            for node in _walk_no_functions(stmt):
                if before is not None and getattr(node, "lineno", 0) > before and not isinstance(node, ast.FunctionDef):
                    continue
                self._define(node, out)

    def _define(self, node, out: dict) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            factory = self.factory(node.name)
            kind = "factory" if factory is not None else ("kernel" if isinstance(node, ast.FunctionDef)
                                                          and _is_prim_func(node) else "function")
            col = self.char_col(node.lineno, node.col_offset)
            line_text = self.lines[node.lineno - 1] if node.lineno <= len(self.lines) else ""
            start = line_text.find(node.name, col) if node.name in line_text else col
            out[node.name] = Definition(node.name, kind, node.lineno, start, start + len(node.name), "", node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With, ast.withitem)):
            for target in _targets(node):
                for name in (n for n in ast.walk(target) if isinstance(n, ast.Name)):
                    kind = "buffer" if _is_alloc(node) else "variable"
                    detail = ast.unparse(node.value) if _is_alloc(node) else ""
                    out.setdefault(name.id, self._definition(name.id, kind, name, detail, len(name.id)))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                name = (alias.asname or alias.name).split(".")[0]
                col = self.char_col(node.lineno, node.col_offset)
                out.setdefault(name, Definition(name, "module", node.lineno, col, col, "", node))

    def symbols(self) -> list:
        """Document symbols: factories > kernels > tensors and buffers (dicts for ``convert``)."""
        out = []
        for f in self.factories:
            kernels = [self._kernel_symbol(k) for k in f.kernels if k.node is not f.node]
            sym = self._symbol(f.name, "kernel" if f.is_prim_func else "factory", f.node,
                               "@T.prim_func" if f.is_prim_func else "kernel factory")
            sym["children"] = kernels if not f.is_prim_func else self._kernel_symbol(f.kernels[0])["children"]
            out.append(sym)
        return out

    def _kernel_symbol(self, k: Kernel) -> dict:
        sym = self._symbol(k.name, "kernel", k.node, "@T.prim_func")
        sym["children"] = [self._def_symbol(d) for d in k.params + k.buffers]
        return sym

    def _symbol(self, name, kind, fn, detail) -> dict:
        first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
        end_line = fn.end_lineno or fn.lineno
        end_col = len(self.lines[end_line - 1]) if end_line <= len(self.lines) else 0
        line_text = self.lines[fn.lineno - 1] if fn.lineno <= len(self.lines) else ""
        col = max(line_text.find(f"def {name}") + 4, 0)
        return {"name": name, "kind": kind, "detail": detail, "range": (first, 1, end_line, end_col + 1),
                "selection": (fn.lineno, col + 1, fn.lineno, col + 1 + len(name))}

    def _def_symbol(self, d: Definition) -> dict:
        rng = (d.line, d.col + 1, d.line, d.end_col + 1)
        return {"name": d.name, "kind": d.kind, "detail": d.detail, "range": rng, "selection": rng}


def _walk_no_functions(stmt):
    """Nodes of ``stmt`` without descending into nested function or class bodies."""
    todo = [stmt]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        todo.extend(ast.iter_child_nodes(node))


def _targets(node) -> list:
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For)):
        return [node.target]
    if isinstance(node, ast.withitem):
        return [node.optional_vars] if node.optional_vars is not None else []
    return []


def _is_alloc(node) -> bool:
    value = getattr(node, "value", None)
    return isinstance(value, ast.Call) and dotted(value.func).split(".")[-1].startswith(ALLOC_PREFIXES)
