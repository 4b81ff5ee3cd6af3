"""The Python-level picture of a TileLang file, from ``ast`` alone (no user code runs).

``parse_file(path, text)`` finds:
- *factories*: module-level functions decorated with ``tilelang.jit`` (any spelling, with or
  without arguments, under other decorators such as ``autotune``) or returning a nested
  ``@T.prim_func`` they define, with their parameters, literal ``out_idx`` and inner kernel
  definition; module-level ``@T.prim_func`` kernels count as factories without parameters;
- *call sites*: ``matmul(...)`` and ``matmul.get_prim_func(...)`` anywhere in the file, with each
  argument kept as source text and marked *static* when it only uses literals and module-level
  names (so it means the same thing when evaluated in the module's namespace);
- *kernel variables*: ``kernel = matmul(...)`` and the later ``kernel(a, b)`` calls in the same
  scope (for TL0702).
Positions are ``ast`` positions; ``span`` converts them to ``Span``s with character columns.

Caching: ``parse_file`` parses through ``syntax.syntax_tree`` (one parse and one tree walk per
text, shared with the span lookups of the checks) and keeps the models of the last
``MODEL_CACHE_SIZE`` (path, text) pairs, so every caller that reads the same text gets the same
``FileModel``. A model is read-only once built: callers must not modify it or its tree.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field

from tilelang.analysis.syntax import SyntaxTree, syntax_tree
from tilelang.diagnostics import Span

MODEL_CACHE_SIZE = 8

_JIT_NAMES = ("jit", "lazy_jit")


@dataclass
class Param:
    name: str
    has_default: bool
    default_text: str | None = None


@dataclass
class Factory:
    name: str
    node: ast.FunctionDef
    params: list
    jit: bool = False
    out_idx: list | None = None
    out_idx_node: ast.AST | None = None
    kernel_def: ast.FunctionDef | None = None
    is_prim_func: bool = False
    star_args: bool = False

    def required(self) -> list:
        return [p.name for p in self.params if not p.has_default]

    def kernel_param_count(self) -> int | None:
        """Number of parameters of the kernel the factory builds, when the source says it."""
        d = self.kernel_def
        if d is None or d.args.vararg or d.args.kwarg or d.args.kwonlyargs:
            return None
        return len(d.args.posonlyargs) + len(d.args.args)


@dataclass
class CallSite:
    factory: str
    node: ast.Call
    args: list            # source text of each positional argument
    kwargs: dict          # name -> source text
    static: bool          # every argument only uses literals and module-level names
    values: dict = field(default_factory=dict)  # argument text -> literal value, where known


@dataclass
class KernelCall:
    factory: str
    node: ast.Call        # the ``kernel(a, b)`` call
    nargs: int | None     # positional argument count; None when it uses */** or keywords


@dataclass
class FileModel:
    path: str
    text: str
    tree: ast.Module
    factories: dict = field(default_factory=dict)
    calls: list = field(default_factory=list)
    kernel_calls: list = field(default_factory=list)
    module_names: set = field(default_factory=set)
    constants: dict = field(default_factory=dict)

    def span(self, node) -> Span | None:
        return Span.from_ast(node, self.path, self.text)

    @functools.cached_property
    def lines(self) -> tuple:
        """The lines of the text (``str.splitlines``), split once."""
        return tuple(self.text.splitlines())


def parse_file(path: str, text: str) -> FileModel:
    """The model of ``text`` (shared, read-only); ``SyntaxError`` propagates (the caller reports TL0001)."""
    return _parse_file(path, text)


@functools.lru_cache(maxsize=MODEL_CACHE_SIZE)
def _parse_file(path: str, text: str) -> FileModel:
    syntax = syntax_tree(text, path)
    tree = syntax.tree
    model = FileModel(path, text, tree)
    model.module_names = _module_names(tree)
    model.constants = _constants(tree, model.module_names)
    inner, returns = _nested_by_statement(syntax)
    imports = _imports(tree)
    for index, node in enumerate(tree.body):
        if isinstance(node, ast.FunctionDef):
            factory = _factory(node, inner.get(index, []), returns.get(index, []), imports)
            if factory is not None:
                model.factories[node.name] = factory
    _find_calls(model, syntax)
    return model


def _nested_by_statement(syntax: SyntaxTree):
    """({statement index: [nested @prim_func defs]}, {statement index: [returns]}) in walk order."""
    nodes, owners = syntax.nodes, syntax.owners
    inner, returns = {}, {}
    for i in syntax.of_type(ast.FunctionDef):
        if owners[i] >= 0 and nodes[i] is not syntax.tree.body[owners[i]] and \
                "prim_func" in [_decorator_name(d) for d in nodes[i].decorator_list]:
            inner.setdefault(owners[i], []).append(nodes[i])
    for i in syntax.of_type(ast.Return):
        returns.setdefault(owners[i], []).append(nodes[i])
    return inner, returns


def _module_names(tree) -> set:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _constants(tree, names) -> dict:
    """Module-level names bound once to a literal value (``M = N = 1024``, ``K, L = 1, 2``)."""
    values, counts = {}, {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs = [(target, node.value)]
            if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) and \
                    len(target.elts) == len(node.value.elts):
                pairs = list(zip(target.elts, node.value.elts))
            for t, v in pairs:
                if isinstance(t, ast.Name):
                    counts[t.id] = counts.get(t.id, 0) + 1
                    ok, value = literal(v, values)
                    if ok:
                        values[t.id] = value
    return {k: v for k, v in values.items() if counts.get(k) == 1}


def literal(node, constants: dict):
    """(True, value) when ``node`` is a literal expression over ``constants``, else (False, None)."""
    try:
        return True, _literal(node, constants)
    except (ValueError, TypeError, ZeroDivisionError, KeyError, OverflowError):
        return False, None


_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b, ast.Div: lambda a, b: a / b,
           ast.LShift: lambda a, b: a << b, ast.Pow: lambda a, b: a ** b if abs(b) < 64 else None}


def _literal(node, constants):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return constants[node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_literal(e, constants) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _literal(node.operand, constants)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        result = _BINOPS[type(node.op)](_literal(node.left, constants), _literal(node.right, constants))
        if result is None:
            raise ValueError("exponent too large")
        return result
    raise ValueError(f"not a literal: {ast.dump(node)[:40]}")


def is_static(node, module_names: set) -> bool:
    """Whether ``node`` only reads literals and module-level names (no calls, no locals)."""
    for n in ast.walk(node):
        if isinstance(n, (ast.Call, ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.comprehension)):
            return False
        if isinstance(n, ast.Name) and n.id not in module_names:
            return False
    return True


def _decorator_name(dec) -> str:
    target = dec.func if isinstance(dec, ast.Call) else dec
    if isinstance(target, ast.Attribute):
        return target.attr
    return target.id if isinstance(target, ast.Name) else ""


def _factory(node: ast.FunctionDef, inner: list, returns: list, imports: dict) -> Factory | None:
    """``node``'s factory; ``inner``: its nested ``@prim_func`` defs, ``returns``: its returns."""
    names = [_decorator_name(d) for d in node.decorator_list]
    if any(_foreign_decorator(d, imports) for d in node.decorator_list):
        return None     # @triton.jit, @numba.jit, ...: another language's kernel
    params, star = _params(node)
    if "prim_func" in names:
        return Factory(node.name, node, [], is_prim_func=True, kernel_def=node)
    jit = any(n in _JIT_NAMES for n in names)
    if not jit and not _returns_one_of(returns, {n.name for n in inner}):
        # An undecorated function is a factory only when it returns its kernel: a test or a
        # script that merely defines a kernel inside is not something to call.
        return None
    factory = Factory(node.name, node, params, jit=jit, star_args=star,
                      kernel_def=inner[0] if len(inner) == 1 else None)
    for dec in node.decorator_list:
        if isinstance(dec, ast.Call) and _decorator_name(dec) in _JIT_NAMES:
            for kw in dec.keywords:
                if kw.arg == "out_idx":
                    ok, value = literal(kw.value, {})
                    if ok and (isinstance(value, int) or isinstance(value, (list, tuple))):
                        factory.out_idx = [value] if isinstance(value, int) else list(value)
                        factory.out_idx_node = kw.value
    return factory


_FOREIGN_MODULES = {"triton", "numba", "jax", "cupy", "taichi", "torch", "cutlass", "warp", "helion"}


def _foreign_decorator(dec, imports: dict) -> bool:
    """A decorator of another kernel language (``@triton.jit``, ``@triton.autotune(...)``);
    ``imports``: module-level alias -> the module it names."""
    target = dec.func if isinstance(dec, ast.Call) else dec
    while isinstance(target, ast.Attribute):
        target = target.value
    if not isinstance(target, ast.Name):
        return False
    return imports.get(target.id, target.id).split(".")[0] in _FOREIGN_MODULES


def _imports(tree) -> dict:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _returns_one_of(returns: list, names: set) -> bool:
    return any(isinstance(n.value, ast.Name) and n.value.id in names for n in returns)


def _params(node: ast.FunctionDef):
    args = node.args
    positional = args.posonlyargs + args.args
    first_default = len(positional) - len(args.defaults)
    params = [Param(a.arg, i >= first_default,
                    ast.unparse(args.defaults[i - first_default]) if i >= first_default else None)
              for i, a in enumerate(positional)]
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        params.append(Param(a.arg, d is not None, ast.unparse(d) if d is not None else None))
    return params, bool(args.vararg or args.kwarg)


def _call_target(call: ast.Call, factories: dict):
    """(factory name, via get_prim_func) for a call of a factory, else (None, False)."""
    f = call.func
    if isinstance(f, ast.Name) and f.id in factories:
        return f.id, False
    if isinstance(f, ast.Attribute) and f.attr == "get_prim_func" and isinstance(f.value, ast.Name) \
            and f.value.id in factories:
        return f.value.id, True
    return None, False


def _find_calls(model: FileModel, syntax: SyntaxTree) -> None:
    """Call sites of the factories, in walk order, and the kernel calls of every scope that binds
    a kernel (``k = factory(...)``; the other scopes cannot have any)."""
    factories = {n: f for n, f in model.factories.items() if not f.is_prim_func}
    if not factories:
        return
    nodes = syntax.nodes
    for i in syntax.of_type(ast.Call):
        name, _ = _call_target(nodes[i], factories)
        if name is not None and not _inside(nodes[i], factories[name].node):
            model.calls.append(_call_site(model, name, nodes[i]))
    binding_scopes = {syntax.scope_of(i) for i in syntax.of_type(ast.Assign) if _binds_kernel(nodes[i], factories)}
    for scope in sorted(binding_scopes):
        _kernel_calls(model, nodes[scope], factories)


def _binds_kernel(stmt: ast.Assign, factories: dict) -> bool:
    """Whether ``stmt`` is ``name = factory(...)`` (what ``_kernel_calls`` tracks)."""
    if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name) or not isinstance(stmt.value, ast.Call):
        return False
    target, via_get = _call_target(stmt.value, factories)
    return target is not None and not via_get


def _inside(node, fn) -> bool:
    return fn.lineno <= node.lineno <= (fn.end_lineno or fn.lineno)


def _call_site(model, name, node) -> CallSite:
    args = [ast.unparse(a) for a in node.args]
    kwargs = {kw.arg: ast.unparse(kw.value) for kw in node.keywords if kw.arg is not None}
    exprs = list(node.args) + [kw.value for kw in node.keywords]
    static = all(not isinstance(a, ast.Starred) for a in node.args) and \
        all(kw.arg is not None for kw in node.keywords) and \
        all(is_static(e, model.module_names) for e in exprs)
    values = {}
    for e in exprs:
        ok, value = literal(e, model.constants)
        if ok:
            values[ast.unparse(e)] = value
    return CallSite(name, node, args, kwargs, static, values)


def _kernel_calls(model, scope, factories) -> None:
    """``k = factory(...)`` followed by ``k(...)`` in the same scope's own statements."""
    bound = {}
    for stmt in _own_statements(scope):
        for node in _own_nodes(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in bound:
                simple = not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args)
                model.kernel_calls.append(KernelCall(bound[node.func.id], node,
                                                     len(node.args) if simple else None))
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            target, via_get = (_call_target(stmt.value, factories)
                               if isinstance(stmt.value, ast.Call) else (None, False))
            if target is not None and not via_get:
                bound[name] = target
            else:
                bound.pop(name, None)


def _own_statements(scope):
    """Statements of ``scope`` in order, descending into blocks but not nested functions."""
    out = []

    def visit(body):
        for stmt in body:
            out.append(stmt)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for field_name in ("body", "orelse", "finalbody"):
                visit(getattr(stmt, field_name, []) or [])
            for handler in getattr(stmt, "handlers", []) or []:
                visit(handler.body)

    visit(scope.body)
    return out


def _own_nodes(stmt):
    """Expression nodes of one statement (not of the statements nested in it), incl. lambdas."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return []
    out = []
    stack = [v for k, v in ast.iter_fields(stmt) if k not in ("body", "orelse", "finalbody", "handlers")]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, ast.AST) and not isinstance(item, ast.stmt):
            out.append(item)
            stack.extend(v for _, v in ast.iter_fields(item))
    return out
