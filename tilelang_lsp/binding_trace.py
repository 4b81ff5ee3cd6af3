"""Runs in the tilelang-check process (value-free: ``ast`` only, no user code runs).

Values a kernel factory is built with, traced from the code that already calls it.

``traced_bindings(model, factory, limit)`` follows the calls of ``factory`` in its own file and
in the sibling modules that import it (``test_*.py`` calling ``example.main(...)``, a script
calling ``kernel.act_quant(...)``) back to the values they use, by constant propagation of
simple names on the ``ast``:

- a call inside a function ``main`` is evaluated once per way ``main`` itself is called: the
  calls of ``main`` in the file or in a sibling (``main(args.m, args.n)`` after
  ``args = parser.parse_args()``: the ``add_argument`` defaults), else ``main``'s defaults;
  ``main``'s local assignments before the call (``M, N = 1024, 1024``, ``for bm in [64, 128]``:
  the first item) are substituted, up to ``MAX_DEPTH`` callers deep;
- ``x, w = prepare_input(m, k)`` with a module-level helper that ends in ``return x, w``: the
  returned items, read in the helper's own environment (its parameters bound from the call);
  ``config = get_config()``: the first dict literal the helper returns;
- ``factory(...)``, ``factory.compile(...)``, ``factory.get_prim_func(...)`` and
  ``tilelang.compile(factory(...))`` count as calls; ``**config`` with a dict literal expands;
- an eager-style factory (``M, K = T.const("M, K")`` and ``T.Tensor`` annotated tensors) gets its
  ``T.const`` names from keywords (``.compile(M=1024)``) or from the shapes of the tensors
  passed for its annotated parameters (``a = torch.randn(M, K, device="cuda")``); tensor
  parameters themselves are never evaluated.

- what the code computes on the CPU is followed: ``x.view(-1, N)`` (the other dimensions),
  ``cu.numel()``, ``torch.tensor(sizes).max()`` of a traced list, ``q_a, q_b = (f(t) for t in
  (a, b))``, helpers imported from a sibling module (``from utils import clone``), instances of the
  file's classes (``config.block_M`` from ``__init__``), ``argparse.Namespace(...)`` and
  ``args = parse_args()``, module-level constant sequences in ``for`` loops, and calls of the
  file's own arithmetic functions (``ceil_div``); a list appended to is no longer its literal;
- a size that depends on the data (``UQ = q_unpad.shape[0]``, ``cu_seqlens[-1].item()``) is bound
  as a symbolic size (``T.dynamic``) when the factory uses that parameter only where one is legal
  (a whole dimension of a kernel parameter's shape, grid extents, loop bounds and indices; never
  an allocation or a keyword such as ``threads=``): ``symbolic_ok``; the origin says "UQ symbolic".

- a call through ``kernel = a if flag else b`` binds only the factory ``flag`` selects; when
  ``flag`` is unknown, or a choice of the caller or the command line (a parameter, a copy of an
  ``args`` attribute), the other factory is traced again with ``flag`` pinned to select it
  (``num_stages = 6 if flag else 4`` follows); the origin says "through `...` with flag=False";
- an eager kernel's ``T.const`` sizes no tensor shape gives take the caller's variables of the
  same names (``M, N, K = 8192, 8192, 8192`` next to the call); a factory nothing calls takes the
  same-named variables of the ``__main__`` block, ``main()`` or a ``test_*()`` function when they
  cover every parameter without a default;
- tensors made at module level, ``(*k.shape, v.shape[-1])`` unpacking, ``x.sort(-1)[0]``,
  ``ctx.attr`` of what forward stored, ``isinstance(t, int)`` of a traced tensor, and
  ``torch.tensor([f(i) for i in range(n)]).max()`` are followed.

Every traced argument is source text that only reads literals, the factory module's own
module-level names, a few pure builtins and calls into ``tilelang``/``math``; anything else
(a tensor, a local that could not be traced) leaves that parameter to the next source (the
factory's defaults, the first ``@autotune`` config, chosen in the worker). The worker evaluates
the texts in the module's namespace, as for every binding.
"""

from __future__ import annotations

import ast
import functools
import os
from dataclasses import dataclass, field

MAX_DEPTH = 3        # callers traced above the call of the factory
MAX_ENVS = 3         # ways one function is called that are followed
_CALL_ATTRS = {"compile", "get_prim_func", "get_tir", "get_kernel_source"}
_PURE_BUILTINS = {"int", "float", "bool", "str", "min", "max", "abs", "round", "len", "tuple", "list", "dict",
                  "pow", "sum", "range", "None", "True", "False"}
_PURE_MODULES = ("tilelang", "math", "operator")
_TENSOR_MAKERS = {"randn", "rand", "empty", "zeros", "ones", "full", "randint", "randn_like", "tensor", "arange",
                  "empty_strided", "normal", "uniform"}
_TENSOR_METHODS = {"cuda", "half", "float", "bfloat16", "to", "contiguous", "int", "bool", "long", "cpu",
                   "requires_grad_", "clone", "detach", "uniform_", "normal_", "fill_", "zero_", "abs", "exp",
                   "sigmoid", "softmax", "__neg__", "transpose", "t", "view", "reshape", "mul", "div", "add"}
_SHAPE_KEEPING = {"cuda", "half", "float", "bfloat16", "to", "contiguous", "int", "bool", "long", "cpu",
                  "requires_grad_", "clone", "detach", "uniform_", "normal_", "fill_", "zero_", "abs", "exp",
                  "sigmoid", "softmax", "mul", "div", "add"}


class Unresolved(Exception):
    """An expression reads something the trace cannot give a module-level value."""


@dataclass
class Raw:
    """A local whose value is not module-evaluable (a tensor, say): its expression, kept for
    the shapes of eager kernels' tensors, and the environment it was read in."""

    node: ast.expr
    env: dict
    resolver: object = None


@dataclass
class ArgNamespace:
    """``args = parser.parse_args()``: ``args.x`` is the default of ``--x``."""

    defaults: dict


@dataclass
class Instance:
    """``config = MatmulConfig(M, N, K)`` of a module-level class: what its ``__init__`` assigns
    to ``self.<attr>`` (resolved ast, or ``Raw``), read as ``config.<attr>``."""

    attrs: dict


@dataclass
class Traced:
    """One traced call of a factory: resolved parameter texts and where they came from."""

    values: dict                    # parameter or T.const name -> source text
    origin: str
    eager: bool = False
    unresolved: list = field(default_factory=list)


@dataclass
class Module:
    """What the trace needs of one parsed file."""

    path: str
    tree: ast.Module
    names: set                      # module-level names (evaluable in that module once loaded)
    guarded: set                    # names only bound under ``if __name__ == "__main__"``
    constants: dict                 # name -> literal value
    imports: dict                   # alias -> imported dotted name
    functions: dict                 # name -> module-level FunctionDef
    scopes: list                    # (call node, enclosing module-level FunctionDef or None)
    argparse: dict                  # scope name (None: module level) -> {dest: default expression}
    methods: dict = field(default_factory=dict)     # id(method def) -> its class's name
    applies: dict = field(default_factory=dict)     # alias -> class, ``attention = _attention.apply``


# ----- parsing -----------------------------------------------------------------------------

@functools.lru_cache(maxsize=64)
def _module_cached(path: str, mtime: float, text: str | None):
    if text is None:
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError):
            return None
    try:
        tree = ast.parse(text, path)
    except (SyntaxError, ValueError):
        return None
    return _index(path, tree)


def module_of(path: str, text: str | None = None) -> Module | None:
    try:
        mtime = os.path.getmtime(path) if text is None else 0.0
    except OSError:
        return None
    return _module_cached(path, mtime, text)


def _index(path: str, tree: ast.Module) -> Module:
    from tilelang.analysis.source import literal

    names, guarded, imports, functions, constants = set(), set(), {}, {}, {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                if isinstance(stmt, ast.Import):
                    key = alias.asname or alias.name.split(".")[0]
                    imports[key] = alias.name if alias.asname else alias.name.split(".")[0]
                else:
                    key = alias.asname or alias.name
                    imports[key] = f"{'.' * stmt.level}{stmt.module or ''}.{alias.name}"
                names.add(key)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
            if isinstance(stmt, ast.FunctionDef):
                functions[stmt.name] = stmt
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names.add(n.id)
                if isinstance(t, ast.Name) and stmt.value is not None:
                    ok, value = literal(stmt.value, constants)
                    if ok:
                        constants[t.id] = value
        elif isinstance(stmt, ast.If) and "__name__" in ast.unparse(stmt.test):
            guarded |= {n.id for s in ast.walk(stmt) if isinstance(s, ast.Assign)
                        for t in s.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    methods = {}        # id(method FunctionDef) -> class name
    applies = {}        # alias -> class name, for ``attention = _attention.apply``
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            for m in stmt.body:
                if isinstance(m, ast.FunctionDef):
                    methods[id(m)] = stmt.name
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and isinstance(stmt.value, ast.Attribute) and stmt.value.attr == "apply" \
                and isinstance(stmt.value.value, ast.Name):
            applies[stmt.targets[0].id] = stmt.value.value.id
    scopes = []
    for stmt in tree.body:
        owners = [(stmt, stmt)] if isinstance(stmt, ast.FunctionDef) else \
            [(m, m) for m in stmt.body if isinstance(m, ast.FunctionDef)] if isinstance(stmt, ast.ClassDef) else \
            [(stmt, None)]
        for part, owner in owners:
            for node in ast.walk(part):
                if isinstance(node, ast.Call):
                    scopes.append((node, owner))
    argparse = {}       # scope name (None: module level) -> {dest: default}
    for node, owner in scopes:
        if isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            _argparse_default(node, argparse.setdefault(owner.name if owner is not None else None, {}))
    return Module(path, tree, names, guarded - names, constants, imports, functions, scopes, argparse, methods,
                  applies)


def _argparse_default(call: ast.Call, out: dict) -> None:
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    longs = [f for f in flags if f.startswith("--")] or flags
    if not longs:
        return
    dest = kw["dest"].value if isinstance(kw.get("dest"), ast.Constant) else longs[0].lstrip("-").replace("-", "_")
    action = kw.get("action")
    action = action.value if isinstance(action, ast.Constant) else None
    if "default" in kw:
        value = kw["default"]
    elif action == "store_true":
        value = ast.Constant(False)
    elif action == "store_false":
        value = ast.Constant(True)
    else:
        return
    out.setdefault(dest, value)


# ----- substitution ------------------------------------------------------------------------

class _Resolver:
    """Resolves expressions read in ``where`` (a Module) into texts evaluable in ``home``."""

    def __init__(self, home: Module, where: Module, owner=None, fallback=None):
        self.home, self.where = home, where
        self.owner = owner              # the FunctionDef whose body is read (None: module level)
        self.fallback = fallback or {}  # name -> resolved ast: the entry point's parameters

    def argparse_defaults(self) -> dict:
        scoped = self.where.argparse.get(self.owner.name if self.owner is not None else None)
        if scoped:
            return scoped
        merged = {}
        for table in self.where.argparse.values():
            for k, v in table.items():
                merged.setdefault(k, v)
        return merged

    def name_ok(self, name: str) -> bool:
        if self.where is self.home:
            return name in self.home.names and name not in self.home.guarded or name in _PURE_BUILTINS
        if name in _PURE_BUILTINS:
            return True
        return name in self.where.imports and self.home.imports.get(name) == self.where.imports[name]

    def pure_call(self, func: ast.expr) -> bool:
        root = func
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name):
            return False
        if root.id in _PURE_BUILTINS and isinstance(func, ast.Name):
            return True
        if isinstance(func, ast.Name) and self.where is self.home and self.name_ok(func.id) and \
                _arithmetic_function(self.home.functions.get(func.id)):
            return True         # ``def ceil_div(a, b): return (a + b - 1) // b`` of the file itself
        module = self.where.imports.get(root.id, "")
        return module.split(".")[0] in _PURE_MODULES

    def resolve(self, node: ast.expr, env: dict) -> ast.expr:
        return _Substitute(self, env).visit(_copy(node))


_ARITHMETIC = (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Load,
               ast.operator, ast.unaryop, ast.boolop, ast.cmpop)


def _arithmetic_function(fdef) -> bool:
    """Whether a module-level function only returns arithmetic of its parameters (calling it runs
    no other code): a docstring, then ``return <expression of its parameters>``."""
    if fdef is None or fdef.decorator_list or fdef.args.vararg or fdef.args.kwarg:
        return False
    body = fdef.body[1:] if fdef.body and isinstance(fdef.body[0], ast.Expr) and \
        isinstance(fdef.body[0].value, ast.Constant) else fdef.body
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return False
    params = set(_param_names(fdef))
    return all(isinstance(n, _ARITHMETIC) and (not isinstance(n, ast.Name) or n.id in params)
               for n in ast.walk(body[0].value))


def _copy(node):
    import copy

    return copy.deepcopy(node)


class _Substitute(ast.NodeTransformer):
    def __init__(self, resolver: _Resolver, env: dict):
        self.r, self.env = resolver, env

    def visit_Name(self, node):
        if node.id in self.env:
            value = self.env[node.id]
            if isinstance(value, ast.expr):
                return _copy(value)
            if node.id in self.r.fallback and not isinstance(value, (Instance, ArgNamespace)) and \
                    not (isinstance(value, Raw) and tensor_shape(value.node, value.env, value.resolver)):
                return _copy(self.r.fallback[node.id])
            raise Unresolved(node.id)
        if self.r.where is not self.r.home and node.id in self.r.where.constants:
            return ast.Constant(self.r.where.constants[node.id]) if _plain(self.r.where.constants[node.id]) else \
                ast.parse(repr(self.r.where.constants[node.id]), mode="eval").body
        if self.r.name_ok(node.id):
            return node
        raise Unresolved(node.id)

    def visit_Attribute(self, node):
        namespace = _namespace(node.value, self.env)
        if namespace is not None:
            defaults = namespace.defaults
            if node.attr in defaults:
                return self.r.resolve(defaults[node.attr], {})
            raise Unresolved(f"{node.value.id}.{node.attr}")
        instance = _instance(node.value, self.env)
        if instance is not None:
            value = instance.attrs.get(node.attr)
            if isinstance(value, ast.expr):
                return _copy(value)
            raise Unresolved(ast.unparse(node))
        saved = self.env.get("__ctx__")
        if isinstance(node.value, ast.Name) and node.value.id == "ctx" and isinstance(saved, dict) and \
                isinstance(saved.get(node.attr), ast.expr):
            return _copy(saved[node.attr])
        if isinstance(node.value, ast.Name) and node.value.id in ("ctx", "self") and node.attr in self.r.fallback:
            return _copy(self.r.fallback[node.attr])
        self.generic_visit(node)
        return node

    def _dimension(self, node):
        """``x.shape[1]`` / ``x.size(1)`` of a traced tensor, resolved; else None."""
        shape = _shape_value(node, self.env)
        if shape is None or len(shape[0]) != 1 or shape[2] is None:
            return None
        try:
            return shape[2].resolve(shape[0][0], shape[1])
        except Unresolved:
            return None

    def visit_Subscript(self, node):
        dim = self._dimension(node)
        if dim is not None:
            return dim
        # ``config["block_M"]`` with ``config = {"block_M": 128, ...}`` traced: the entry
        if isinstance(node.value, ast.Name) and isinstance(node.slice, ast.Constant):
            bound = self.env.get(node.value.id)
            raw = bound.node if isinstance(bound, Raw) else bound
            if isinstance(raw, ast.Dict):
                for k, v in zip(raw.keys, raw.values):
                    if isinstance(k, ast.Constant) and k.value == node.slice.value:
                        return self.r.resolve(v, bound.env if isinstance(bound, Raw) else self.env)
        self.generic_visit(node)
        return node

    def visit_Call(self, node):
        dim = self._dimension(node)
        if dim is not None:
            return dim
        f = node.func
        reduced = self._reduction(node)
        if reduced is not None:
            return reduced
        if isinstance(f, ast.Attribute) and f.attr == "numel" and not node.args and not node.keywords:
            shape = tensor_shape(f.value, self.env)      # ``cu_seqlens.numel()``: the product of its dims
            if shape is not None:
                dims = [shape[2].resolve(d, shape[1]) for d in shape[0]] if shape[2] is not None else None
                if dims is None:
                    raise Unresolved("numel")
                product = dims[0]
                for d in dims[1:]:
                    product = ast.BinOp(product, ast.Mult(), d)
                return product
        if not self.r.pure_call(node.func):
            raise Unresolved(ast.unparse(node.func))
        self.generic_visit(node)
        return node

    def _reduction(self, node):
        """``sizes.max()`` (``.min()``, ``.sum()``, then ``.item()``) of ``sizes = torch.tensor(xs)``
        with ``xs`` a traced list: the builtin over that list; else None."""
        f = node.func
        if not (isinstance(f, ast.Attribute) and not node.args and not node.keywords):
            return None
        if f.attr == "item" and isinstance(f.value, ast.Call):
            return self._reduction(f.value)
        if f.attr not in ("max", "min", "sum") or not isinstance(f.value, ast.Name):
            return None
        bound = self.env.get(f.value.id)
        if not isinstance(bound, Raw) or bound.resolver is None:
            return None
        made = bound.node
        if not (isinstance(made, ast.Call) and isinstance(made.func, ast.Attribute) and made.func.attr == "tensor"
                and _is_torch(made.func.value) and made.args):
            return None
        try:
            items = _range_items(made.args[0], bound.env, bound.resolver) if isinstance(made.args[0], ast.ListComp) \
                else bound.resolver.resolve(made.args[0], bound.env)
        except Unresolved:
            return None
        if not isinstance(items, (ast.List, ast.Tuple)) or not items.elts or \
                any(isinstance(e, (ast.Starred, ast.List, ast.Tuple)) for e in items.elts):
            return None
        return ast.Call(ast.Name(f.attr, ast.Load()), [items], [])

    def visit_Lambda(self, node):
        raise Unresolved("lambda")

    def visit_NamedExpr(self, node):
        raise Unresolved("walrus")

    def generic_visit(self, node):
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Await, ast.Yield)):
            raise Unresolved(type(node).__name__)
        return super().generic_visit(node)


def _range_items(comp, env, resolver):
    """``[cache_seqlen + 2 * i for i in range(b)]`` with ``b`` traced: the list of its items
    (each resolved with ``i`` a literal), at most 4096 of them; else raises ``Unresolved``."""
    gen = comp.generators[0] if len(comp.generators) == 1 else None
    if gen is None or gen.ifs or gen.is_async or not isinstance(gen.target, ast.Name) or not (
            isinstance(gen.iter, ast.Call) and isinstance(gen.iter.func, ast.Name) and gen.iter.func.id == "range"
            and len(gen.iter.args) == 1 and not gen.iter.keywords):
        raise Unresolved("comprehension")
    try:
        count = _evaluate(gen.iter.args[0], env, resolver)
    except Unresolved:
        raise
    except Exception:  # noqa: BLE001 - not a literal
        raise Unresolved("range") from None
    if not isinstance(count, int) or not 0 < count <= 4096:
        raise Unresolved("range")
    name = gen.target.id

    class _Put(ast.NodeTransformer):
        def __init__(self, item):
            self.item = item

        def visit_Name(self, node):
            return ast.Constant(self.item) if node.id == name else node

    return ast.List([resolver.resolve(_Put(i).visit(_copy(comp.elt)), env) for i in range(count)], ast.Load())


def _plain(value) -> bool:
    return isinstance(value, (int, float, str, bool, type(None)))


# ----- local environments ------------------------------------------------------------------

def _shape_value(value, env):
    """``(dims, env, resolver)`` when ``value`` reads a traced tensor's shape (``x.shape``,
    ``x.size()``), ``(dim, ...)`` for one dimension (``x.shape[1]``, ``x.size(1)``); else None."""
    index = None
    if isinstance(value, ast.Subscript) and _int(value.slice) is not None:
        index, value = _int(value.slice), value.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "size":
        if value.args and _int(value.args[0]) is not None:
            index = _int(value.args[0])
        value = ast.Attribute(value.func.value, "shape")
    if not (isinstance(value, ast.Attribute) and value.attr == "shape"):
        return None
    shape = tensor_shape(value.value, env)
    if shape is None:
        return None
    dims, where_env, resolver = shape
    if index is not None:
        if -len(dims) <= index < len(dims):
            return [dims[index]], where_env, resolver
        return None
    return dims, where_env, resolver


def _int(node):
    """The value of an integer literal (``-1`` included), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -node.operand.value if isinstance(node.operand.value, int) else None
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, int) else None


def _bind_dims(targets, shape, env):
    dims, where_env, resolver = shape
    for t, d in zip(targets, dims):
        if not isinstance(t, ast.Name):
            continue
        try:
            env[t.id] = resolver.resolve(d, where_env) if resolver is not None else None
        except Unresolved:
            env[t.id] = None


def _bind_target(target, value, env, resolver, env_for_raw):
    if isinstance(value, ast.Attribute) and value.attr == "saved_tensors" and "__saved__" in env_for_raw and \
            isinstance(target, (ast.Tuple, ast.List)):
        for t, v in zip(target.elts, env_for_raw["__saved__"]):
            if isinstance(t, ast.Name):
                env[t.id] = v
        return
    shape = _shape_value(value, env_for_raw)
    if shape is not None:
        targets = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        if len(targets) == len(shape[0]):
            _bind_dims(targets, shape, env)
            return
    if isinstance(target, ast.Name):
        try:
            env[target.id] = resolver.resolve(value, env_for_raw)
        except Unresolved:
            returned = _helper_dict(value, resolver, env_for_raw)
            if returned is not None:         # ``config = get_heuristic_config()``
                _bind_target(target, *returned[:1], env, returned[2], returned[1])
                return
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
                    value.func.attr == "Namespace" and not value.args:     # ``argparse.Namespace(m=1024)``
                env[target.id] = ArgNamespace({k.arg: k.value for k in value.keywords if k.arg})
                return
            fdef = _helper_def(value, resolver)
            if fdef is not None and isinstance(fdef.body[-1], ast.Return) and _is_parse_args(fdef.body[-1].value) \
                    and fdef.name in resolver.where.argparse:    # ``args = parse_args()`` of the file's helper
                env[target.id] = ArgNamespace(resolver.where.argparse[fdef.name])
                return
            instance = _construct(value, resolver, env_for_raw)
            if instance is not None:         # ``config = MatmulConfig(M, N, K)``
                env[target.id] = instance
                return
            env[target.id] = Raw(value, dict(env_for_raw), resolver)
    elif isinstance(target, (ast.Tuple, ast.List)):
        value = _expand_starred_shape(value, len(target.elts))
        returned = None if isinstance(value, (ast.Tuple, ast.List)) else \
            _helper_return(value, len(target.elts), resolver, env_for_raw)
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
            for t, v in zip(target.elts, value.elts):
                _bind_target(t, v, env, resolver, env_for_raw)
        elif returned is not None:
            elts, helper_env, helper_resolver = returned
            for t, v in zip(target.elts, elts):
                _bind_target(t, v, env, helper_resolver, helper_env)
        elif _is_parse_args(value) and isinstance(target.elts[0], ast.Name):
            env[target.elts[0].id] = ArgNamespace(resolver.argparse_defaults())
            for t in target.elts[1:]:
                _forget(t, env)
        elif _unrolled(value, len(target.elts), env_for_raw, resolver) is not None:
            for t, v in zip(target.elts, _unrolled(value, len(target.elts), env_for_raw, resolver)):
                _bind_target(t, v, env, resolver, env_for_raw)   # ``q, k = (f(t) for t in (a, b))``
        elif isinstance(value, ast.Attribute) and value.attr == "shape" and \
                not any(isinstance(t, ast.Starred) for t in target.elts):
            for i, t in enumerate(target.elts):      # ``UQ, H, D = q.shape`` of an untraced tensor:
                if isinstance(t, ast.Name):          # data-dependent sizes (see ``_integerish``)
                    env[t.id] = Raw(ast.Subscript(value, ast.Constant(i), ast.Load()), dict(env_for_raw), resolver)
                else:
                    _forget(t, env)
        else:
            for t in target.elts:
                _forget(t, env)
    elif isinstance(target, ast.Starred):
        _forget(target, env)
    # ``x[i] = ...`` and ``x.a = ...`` change what x holds, not its shape: x stays as traced


def _expand_starred_shape(value, count):
    """``(*k.shape, v.shape[-1])`` unpacked into ``count`` names: ``k.shape[0], k.shape[1], ...,
    v.shape[-1]`` (one starred ``.shape``, its length what the other items leave); else ``value``."""
    if not isinstance(value, (ast.Tuple, ast.List)):
        return value
    starred = [i for i, e in enumerate(value.elts) if isinstance(e, ast.Starred)]
    if len(starred) != 1:
        return value
    item = value.elts[starred[0]].value
    length = count - (len(value.elts) - 1)
    if not (isinstance(item, ast.Attribute) and item.attr == "shape") or length < 0:
        return value
    dims = [ast.Subscript(item, ast.Constant(i), ast.Load()) for i in range(length)]
    return ast.Tuple(value.elts[:starred[0]] + dims + value.elts[starred[0] + 1:], ast.Load())


def _unrolled(value, count, env, resolver):
    """``(f(t) for t in (a, b, c))`` / ``[t.cuda() for t in xs]`` over a literal sequence of
    ``count`` items: one expression per item (the loop name replaced by it); else None."""
    if not isinstance(value, (ast.GeneratorExp, ast.ListComp)) or len(value.generators) != 1:
        return None
    gen = value.generators[0]
    if gen.ifs or gen.is_async or not isinstance(gen.target, ast.Name):
        return None
    items = gen.iter if isinstance(gen.iter, (ast.Tuple, ast.List)) else _sequence(gen.iter, env, resolver)
    if items is None or len(items.elts) != count or any(isinstance(e, ast.Starred) for e in items.elts):
        return None
    name = gen.target.id

    class _Put(ast.NodeTransformer):
        def __init__(self, item):
            self.item = item

        def visit_Name(self, node):
            return _copy(self.item) if node.id == name else node

    return [_Put(item).visit(_copy(value.elt)) for item in items.elts]


def _helper_return(value, count, resolver, env):
    """``q, k, v = prepare_input(B, S, ...)``: when ``value`` calls a module-level function of the
    file being read whose last statement returns a tuple of ``count`` items, ``(items, the
    function's environment at that return, its resolver)``; else None. The function's
    parameters are bound from the call (unresolved ones as ``Raw``), then its assignments."""
    fdef = _helper_def(value, resolver)
    if fdef is None or not isinstance(fdef.body[-1], ast.Return):
        return None
    ret = fdef.body[-1].value
    if not isinstance(ret, (ast.Tuple, ast.List)) or len(ret.elts) != count or \
            any(isinstance(e, ast.Starred) for e in ret.elts):
        return None
    helper_env, inner = _helper_env(fdef, value, resolver, env)
    _env_at(fdef.body, fdef.body[-1], helper_env, inner)
    return ret.elts, helper_env, inner


def _helper_def(value, resolver):
    """The module-level function of the file being read that ``value`` calls (plain arguments)."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
        return None
    if any(isinstance(a, ast.Starred) for a in value.args) or any(k.arg is None for k in value.keywords):
        return None
    fdef = resolver.where.functions.get(value.func.id)
    if fdef is None:
        fdef = _imported_function(resolver.where, value.func.id)
    return fdef if fdef is not None and fdef.body else None


def _imported_function(mod: Module, name: str):
    """``from helpers import prepare`` where ``helpers.py`` sits next to ``mod``'s file: the
    ``prepare`` FunctionDef of that module (its home is noted for ``_helper_env``), else None."""
    target = mod.imports.get(name, "")
    if target.startswith(".") or target.count(".") != 1:
        return None
    module_name, attr = target.split(".")
    other = module_of(os.path.join(os.path.dirname(mod.path), module_name + ".py"))
    fdef = other.functions.get(attr) if other is not None else None
    if fdef is not None:
        _HOMES[id(fdef)] = other
    return fdef


_HOMES = {}     # id(FunctionDef) -> the Module defining it, for functions imported from a sibling


def _helper_dict(value, resolver, env):
    """``config = get_heuristic_config()``: the first dict literal the called module-level
    function returns (in source order, the first branch of an ``if`` first), as ``(dict, the
    function's environment there, its resolver)``; else None."""
    fdef = _helper_def(value, resolver)
    if fdef is None:
        return None
    found = next((n for n in _statements(fdef.body) if isinstance(n, ast.Return)), None)
    if found is None or not isinstance(found.value, ast.Dict):
        return None
    helper_env, inner = _helper_env(fdef, value, resolver, env)
    _env_at(fdef.body, found, helper_env, inner)
    return found.value, helper_env, inner


def _namespace(node, env, depth=0):
    """The ``ArgNamespace`` that the name ``node`` holds (through locals passed on), else None."""
    if not isinstance(node, ast.Name) or depth > 8:
        return None
    bound = env.get(node.id)
    if isinstance(bound, ArgNamespace):
        return bound
    if isinstance(bound, Raw):
        return _namespace(bound.node, bound.env, depth + 1)
    return None


def _instance(node, env, depth=0):
    """The ``Instance`` that the name ``node`` holds (through locals passed on), else None."""
    if not isinstance(node, ast.Name) or depth > 8:
        return None
    bound = env.get(node.id)
    if isinstance(bound, Instance):
        return bound
    if isinstance(bound, Raw) and isinstance(bound.node, ast.Call) and bound.resolver is not None:
        return _construct(bound.node, bound.resolver, bound.env)      # ``run(Config(512, 256))``
    if isinstance(bound, Raw):
        return _instance(bound.node, bound.env, depth + 1)
    return None


def _construct(value, resolver, env):
    """``Cls(...)`` of a module-level class of the file being read: an ``Instance`` with what its
    ``__init__`` assigns to ``self`` (its parameters bound from the call), else None."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)) or \
            any(isinstance(a, ast.Starred) for a in value.args) or any(k.arg is None for k in value.keywords):
        return None
    klass = next((c for c in resolver.where.tree.body if isinstance(c, ast.ClassDef) and c.name == value.func.id),
                 None)
    init = next((m for m in klass.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None) \
        if klass is not None else None
    if init is None or not init.args.args:
        return None
    me = init.args.args[0].arg
    call = ast.Call(value.func, [ast.Name(me, ast.Load()), *value.args], value.keywords)
    init_env, inner = _helper_env(init, call, resolver, env)
    attrs = {}
    def mine(t):
        return isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me

    for stmt in init.body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
        if mine(target):
            attrs[target.attr] = _resolve_or_raw(stmt.value, init_env, inner)
        elif isinstance(target, ast.Tuple) and all(mine(t) for t in target.elts) and \
                isinstance(stmt.value, ast.Tuple) and len(stmt.value.elts) == len(target.elts):
            for t, v in zip(target.elts, stmt.value.elts):   # ``self.M, self.N = M, N``
                attrs[t.attr] = _resolve_or_raw(v, init_env, inner)
        else:
            _assign(stmt, init_env, inner)
    return Instance(attrs)


def _statements(body):
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
            yield from _statements(stmt.body)
            yield from _statements(getattr(stmt, "orelse", []) or [])


def _helper_env(fdef, value, resolver, env):
    """The environment of ``fdef`` called by ``value``: its parameters bound from the call's
    arguments or its defaults (unresolved ones as ``Raw``), and its resolver."""
    where = _HOMES.get(id(fdef), resolver.where)
    if where.functions.get(fdef.name) is not fdef:
        where = resolver.where
    inner = _Resolver(resolver.home, where, owner=fdef)
    names = [a.arg for a in fdef.args.posonlyargs + fdef.args.args]
    bound = dict(zip(names, value.args))
    bound.update({k.arg: k.value for k in value.keywords})
    call_args = set(bound)
    defaults = fdef.args.defaults
    for name, default in zip(names[len(names) - len(defaults):], defaults):
        bound.setdefault(name, default)
    helper_env = {}
    for name in names + [a.arg for a in fdef.args.kwonlyargs]:
        arg = bound.get(name)
        if arg is None:
            helper_env[name] = None
            continue
        try:
            helper_env[name] = resolver.resolve(arg, env) if name in call_args else inner.resolve(arg, {})
        except Unresolved:
            helper_env[name] = Raw(arg, dict(env), resolver) if name in call_args else None
    return helper_env, inner


def _forget(target, env):
    for n in ast.walk(target):
        if isinstance(n, ast.Name):
            env[n.id] = None


def _is_parse_args(value) -> bool:
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
        value.func.attr in ("parse_args", "parse_known_args")


def _assign(stmt, env, resolver):
    if isinstance(stmt, ast.Assign):
        if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and _is_parse_args(stmt.value):
            env[stmt.targets[0].id] = ArgNamespace(resolver.argparse_defaults())
            return
        snapshot = dict(env)
        for t in stmt.targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and \
                    isinstance(env.get(t.value.id), ArgNamespace):      # ``args.test_sink = True``
                env[t.value.id] = ArgNamespace({**env[t.value.id].defaults, t.attr: stmt.value})
                continue
            _bind_target(t, stmt.value, env, resolver, snapshot)
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        _bind_target(stmt.target, stmt.value, env, resolver, dict(env))
    elif isinstance(stmt, ast.AugAssign):
        if isinstance(stmt.target, ast.Name):
            _forget(stmt.target, env)
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        first = _first_item(_sequence(stmt.iter, env, resolver) or stmt.iter)
        if first is not None:
            _bind_target(stmt.target, first, env, resolver, dict(env))
        else:
            _forget(stmt.target, env)
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
            isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr in _MUTATORS and \
            isinstance(stmt.value.func.value, ast.Name) and stmt.value.func.value.id in env:
        _forget(stmt.value.func.value, env)      # ``offsets.append(x)``: no longer the literal traced
    elif isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
        env.pop(stmt.name, None)        # a name of code, not a value: resolved like any other name
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        for alias in stmt.names:        # a module: usable when the module binds the same name
            env.pop((alias.asname or alias.name).split(".")[0], None)


_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem", "sort",
             "reverse", "add", "discard"}


def _taken_branch(stmt, env, resolver) -> list:
    """The block of a compound statement that runs: for an ``if`` whose test the trace can
    evaluate, its branch; else the first block."""
    if isinstance(stmt, ast.If):
        import warnings

        kind = _isinstance_of_tensor(stmt.test, env)
        if kind is not None:        # ``if isinstance(block_counts, int)`` with a traced tensor
            return stmt.body if kind else (stmt.orelse or [])
        try:
            test = resolver.resolve(stmt.test, env)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = eval(compile(ast.Expression(test), "<trace>", "eval"), {"__builtins__": {}}, {})  # noqa: S307
        except Exception:  # noqa: BLE001 - anything but literals: the first branch
            return stmt.body
        return stmt.body if value else (stmt.orelse or [])
    return stmt.body


def _isinstance_of_tensor(test, env):
    """For ``isinstance(x, C)`` where ``x`` holds a tensor the trace made (its shape known): whether
    ``C`` names a tensor class (``torch.Tensor``, ``torch.LongTensor``); else None."""
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance"
            and len(test.args) == 2 and isinstance(test.args[0], ast.Name)):
        return None
    bound = env.get(test.args[0].id)
    if not isinstance(bound, Raw) or tensor_shape(bound.node, bound.env, bound.resolver) is None:
        return None
    kinds = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
    return any(ast.unparse(k).endswith("Tensor") for k in kinds)


def _sequence(node, env, resolver):
    """The list/tuple literal a name holds (a local, or a module-level constant of the file being
    read: ``for b in SUPPORTED_BLOCKS``), else None."""
    if not isinstance(node, ast.Name):
        return None
    bound = env.get(node.id)
    bound = bound.node if isinstance(bound, Raw) else bound
    if isinstance(bound, (ast.Tuple, ast.List)):
        return bound
    if node.id not in env:
        value = resolver.where.constants.get(node.id)
        if isinstance(value, (tuple, list)):
            try:
                return ast.parse(repr(value), mode="eval").body
            except SyntaxError:
                return None
    return None


def _first_item(it):
    if isinstance(it, (ast.List, ast.Tuple)) and it.elts and not isinstance(it.elts[0], ast.Starred):
        return it.elts[0]
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and it.args:
        return it.args[0] if len(it.args) > 1 else ast.Constant(0)
    return None


def _env_at(body, call, env, resolver):
    """``env`` updated with the assignments of ``body`` that run before ``call`` (first branch of
    an ``if``, first item of a loop); True once the statement holding the call was reached."""
    line = call.lineno
    for stmt in body:
        if stmt.lineno > line:
            return True
        inside = stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno)
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            _assign(stmt, env, resolver)
        if isinstance(stmt, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)):
            blocks = [stmt.body, getattr(stmt, "orelse", []) or []]
            if isinstance(stmt, ast.Try):
                blocks += [h.body for h in stmt.handlers] + [stmt.finalbody]
            if isinstance(stmt, (ast.With, ast.AsyncWith)):
                for item in stmt.items:
                    if item.optional_vars is not None:
                        _forget(item.optional_vars, env)
            if inside:
                for block in blocks:
                    if block and block[0].lineno <= line <= (block[-1].end_lineno or block[-1].lineno):
                        return _env_at(block, call, env, resolver)
                return True
            _env_at(_taken_branch(stmt, env, resolver), call, env, resolver)
            continue
        if inside and isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for p in _param_names(stmt):
                env[p] = None
            return _env_at(stmt.body, call, env, resolver)
        if inside:
            return True
        _assign(stmt, env, resolver)
    return False


# ----- tracing -----------------------------------------------------------------------------

class _Tracer:
    def __init__(self, home: Module, siblings: list):
        self.home = home
        self.siblings = siblings       # (Module, {alias in it -> name of ours it reaches, or "" for the module})
        self.active = set()
        self._fallback = None

    def fallback(self) -> dict:
        """The parameters of the module's ``main`` as its first traced call binds them: the values
        of same-named locals the trace cannot follow (``BATCH, H = q.shape`` in an autograd
        function that ``main`` reaches through ``torch.autograd.Function.apply``)."""
        if self._fallback is None:
            self._fallback = {}
            main = self.home.functions.get("main")
            if main is not None:
                envs = self.envs_of(self.home, main, MAX_DEPTH)
                if envs:
                    self._fallback = {k: v for k, v in envs[0][0].items() if isinstance(v, ast.expr)}
        return self._fallback

    def calls_of(self, name: str):
        """(Module, call, owner FunctionDef or None, keyword args only?) for each call of our
        module-level ``name``, ours first."""
        local = _local_aliases(self.home, name)
        for node, owner in self.home.scopes:
            if _calls_name(node, name, {}) or _callee_name(node) in local.get(id(owner), ()):
                yield self.home, node, owner
        for mod, aliases in self.siblings:
            for node, owner in mod.scopes:
                if _calls_name(node, name, aliases):
                    yield mod, node, owner

    def envs_of(self, mod: Module, owner, depth: int) -> list:
        """Ways the function ``owner`` of ``mod`` is called: [(param env, origin)] (module level: [{}])."""
        if owner is None:
            return [({}, "")]
        key = (mod.path, owner.name)
        if mod.functions.get(owner.name) is not owner:     # a method: main's values for its locals
            out = []
            cls = mod.methods.get(id(owner))
            if owner.name == "forward" and cls and key not in self.active and depth > 0:
                self.active.add(key)
                try:
                    out = self._apply_envs(mod, owner, cls, depth)
                finally:
                    self.active.discard(key)
            if owner.name == "backward" and cls and key not in self.active and depth > 0:
                self.active.add(key)
                try:
                    out = self._backward_envs(mod, owner, cls, depth)
                finally:
                    self.active.discard(key)
            return out[:MAX_ENVS - 1] + [(_defaults_env(owner, mod, self.home), "the values of main's parameters")]
        if key in self.active or depth <= 0:
            return [(_defaults_env(owner, mod, self.home), f"the defaults of {owner.name}")]
        self.active.add(key)
        try:
            out = []
            if mod is self.home or any(mod is m for m, _ in self.siblings):
                defaults = _defaults_env(owner, mod, self.home)
                for traced in self.trace(owner, mod, depth - 1, want_defaults=False):
                    out.append(({**defaults, **traced.values_nodes}, traced.origin))
                    if len(out) >= MAX_ENVS:
                        break
            out.append((_defaults_env(owner, mod, self.home), f"the defaults of {owner.name}"))
            return out[:MAX_ENVS]
        finally:
            self.active.discard(key)

    def trace(self, fdef, mod: Module, depth: int, want_defaults=True, eager=None):
        """Traced calls of ``fdef`` (defined in ``mod``): objects with ``values_nodes`` (param ->
        resolved ast, in ``self.home``'s terms) and ``origin``."""
        params = _param_names(fdef)
        results = []
        lookup = self.calls_of(fdef.name) if mod is self.home else self._calls_in_siblings(mod, fdef.name)
        for where, call, owner in lookup:
            resolver = _Resolver(self.home, where, owner, self.fallback())
            selector = _alias_selector(where, call, owner, fdef.name) if where is self.home else None
            body = owner.body if owner is not None else where.tree.body
            for env0, env_origin in self.envs_of(where, owner, depth):
                env = dict(env0)
                _env_at(body, call, env, resolver)
                branch = ""
                if selector is not None:
                    env, branch = _select_branch(selector, env0, env, body, call, owner, resolver)
                    if env is None:
                        continue        # the condition picks the other factory: not a call of ours
                values = _map_call(call, params, fdef, env, resolver, eager)
                if values is None:
                    continue
                if eager:      # ``M, N, K = 8192, 8192, 8192`` next to the call: a T.const's namesakes
                    values["__caller__"] = {c: env[c] for c in eager[0] if isinstance(env.get(c), ast.expr)}
                origin = f"the call at {_where(where, self.home)}line {call.lineno}{branch}"
                if env_origin:
                    origin += f" (with {env_origin})"
                results.append(_Result(values, origin))
        return results

    def _apply_envs(self, mod, forward, cls, depth) -> list:
        """Environments of an autograd ``forward(ctx, ...)`` from the calls of ``cls.apply(...)``
        (or of an alias ``attention = cls.apply``) in ``mod``."""
        params = _param_names(forward)[1:]
        aliases = {a for a, c in mod.applies.items() if c == cls}
        out = []
        for call, owner in mod.scopes:
            f = call.func
            if not (isinstance(f, ast.Attribute) and f.attr == "apply" and isinstance(f.value, ast.Name)
                    and f.value.id == cls or isinstance(f, ast.Name) and (f.id in aliases or
                                                                          f.id in _local_applies(owner, cls))):
                continue
            resolver = _Resolver(self.home, mod, owner, self.fallback())
            for env0, origin in self.envs_of(mod, owner, depth - 1):
                env = dict(env0)
                _env_at(owner.body if owner is not None else mod.tree.body, call, env, resolver)
                if any(isinstance(a, ast.Starred) for a in call.args):
                    continue
                values = {p: _resolve_or_raw(a, env, resolver) for p, a in zip(params, call.args)}
                values.update({k.arg: _resolve_or_raw(k.value, env, resolver) for k in call.keywords if k.arg})
                text = f"{cls}.apply at line {call.lineno}" + (f" (with {origin})" if origin else "")
                out.append((values, text))
                if len(out) >= MAX_ENVS:
                    return out
        return out

    def _backward_envs(self, mod, backward, cls, depth) -> list:
        """Environments of an autograd ``backward(ctx, ...)``: what its ``forward`` saved
        (``ctx.save_for_backward(q, k)`` -> ``q, k = ctx.saved_tensors``, ``ctx.scale = s``)."""
        klass = next((c for c in mod.tree.body if isinstance(c, ast.ClassDef) and c.name == cls), None)
        forward = next((m for m in klass.body if isinstance(m, ast.FunctionDef) and m.name == "forward"), None) \
            if klass is not None else None
        if forward is None or not forward.body:
            return []
        resolver = _Resolver(self.home, mod, forward, self.fallback())
        out = []
        for env0, origin in self._apply_envs(mod, forward, cls, depth):
            env = dict(env0)
            end = forward.body[-1]
            _env_at(forward.body, ast.Call(lineno=(end.end_lineno or end.lineno) + 1), env, resolver)
            saved, attrs = [], {}
            for node in ast.walk(forward):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                        node.func.attr == "save_for_backward":
                    saved = [_resolve_or_raw(a, env, resolver) for a in node.args]
                elif isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                        isinstance(node.targets[0], ast.Attribute) and isinstance(node.targets[0].value, ast.Name) \
                        and node.targets[0].value.id == "ctx":
                    attrs[node.targets[0].attr] = _resolve_or_raw(node.value, env, resolver)
            out.append(({"__saved__": saved, "__ctx__": attrs}, f"what forward saved, {origin}"))
        return out

    def _calls_in_siblings(self, mod, name):
        for node, owner in mod.scopes:
            if _calls_name(node, name, {}):
                yield mod, node, owner


def _select_branch(selector, env0, env, body, call, owner, resolver):
    """(env, origin note) for a call through ``kernel = a if cond else b`` of the branch that is
    our factory: the call's own env when ``cond`` is known to select it; when ``cond`` is unknown,
    or is a choice of the caller / command line whose default selects the other branch, the
    env re-traced with ``cond`` assumed to select ours (so ``num_stages = 6 if cond else 4``
    follows); (None, "") when ``cond`` is a fixed value that selects the other branch."""
    assign, test, side = selector
    try:
        known = bool(_evaluate(test, env, resolver))
    except Exception:  # noqa: BLE001 - anything but literals: unknown
        known = None
    if known is side:
        return env, ""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    name = _choice_name(test, owner, env0)
    if name is None:
        if known is None:
            return env, ""
        return None, ""
    value = (not side) if negated else side
    pinned = _PinnedEnv(env0, {name: ast.Constant(value)})
    _env_at(body, call, pinned, resolver)
    text = ast.unparse(assign)
    return dict(pinned), f" through `{text}` with {name}={value}"


def _local_applies(owner, cls) -> set:
    """Names a function binds to ``cls.apply`` (``GroupedGEMM = _GroupedGEMM.apply``)."""
    if owner is None:
        return set()
    return {n.targets[0].id for n in ast.walk(owner) if isinstance(n, ast.Assign) and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Attribute)
            and n.value.attr == "apply" and isinstance(n.value.value, ast.Name) and n.value.value.id == cls}


_MEMO = {}      # (function, id(key object), name) -> (key object, result): held, so ids are not reused


def _memo(fn, obj, name, compute):
    key = (fn, id(obj), name)
    hit = _MEMO.get(key)
    if hit is not None and hit[0] is obj:
        return hit[1]
    if len(_MEMO) > 20000:
        _MEMO.clear()
    result = compute()
    _MEMO[key] = (obj, result)
    return result


def _local_aliases(mod: Module, name: str) -> dict:
    return _memo("aliases", mod, name, lambda: _find_local_aliases(mod, name))


def _find_local_aliases(mod: Module, name: str) -> dict:
    """id(owner) (id(None) at module level) -> local names bound to the factory ``name`` there:
    ``kernel = gemm_2cta if two_cta else gemm``, ``fn = KERNELS[choice]`` with a module-level
    dict ``KERNELS = {"gemm": gemm, ...}``."""
    registries = set()
    for stmt in mod.tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and isinstance(stmt.value, ast.Dict) and any(isinstance(v, ast.Name) and v.id == name
                                                              for v in stmt.value.values):
            registries.add(stmt.targets[0].id)
    out = {}
    parts = [(f, f) for f in mod.functions.values()] + \
        [(stmt, None) for stmt in mod.tree.body if not isinstance(stmt, (ast.FunctionDef, ast.ClassDef))]
    for part, owner in parts:
        for node in ast.walk(part):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                value = node.value
                options = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
                if any(isinstance(o, ast.Name) and o.id == name or isinstance(o, ast.Subscript) and
                       isinstance(o.value, ast.Name) and o.value.id in registries for o in options):
                    side = None
                    if isinstance(value, ast.IfExp) and isinstance(value.body, ast.Name) and \
                            isinstance(value.orelse, ast.Name) and value.body.id != value.orelse.id:
                        side = value.body.id == name       # the branch that is our factory
                    out.setdefault(id(owner), {})[node.targets[0].id] = (node, side)
    return out


class _PinnedEnv(dict):
    """An environment in which some names keep an assumed value: the assignments that would
    change them are ignored (the branch of ``kernel = a if flag else b`` being traced)."""

    def __init__(self, base, pins):
        super().__init__(base)
        self.pins = pins
        dict.update(self, pins)

    def __setitem__(self, key, value):
        if key not in self.pins:
            dict.__setitem__(self, key, value)

    def pop(self, key, *default):
        if key in self.pins:
            return self[key]
        return dict.pop(self, key, *default)

    def __delitem__(self, key):
        if key not in self.pins:
            dict.__delitem__(self, key)


def _alias_selector(mod: Module, call: ast.Call, owner, name: str):
    """For a call through ``kernel = a if cond else b`` (the assignment before the call in the
    same function): (assignment, cond, the value of cond that selects our factory); else None."""
    callee = _callee_name(call)
    aliases = _local_aliases(mod, name).get(id(owner), {})
    if callee is None or callee not in aliases or _calls_name(call, name, {}):
        return None
    node, side = aliases[callee]
    if side is None or node.lineno > call.lineno:
        return None
    return node, node.value.test, side


def _evaluate(node, env, resolver):
    """The Python value of ``node`` when the trace reduces it to literals; else raises."""
    import warnings

    test = resolver.resolve(node, env)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return eval(compile(ast.Expression(test), "<trace>", "eval"), {"__builtins__": {}}, {})  # noqa: S307


def _choice_name(test, owner, env0) -> str | None:
    """The name whose value ``test`` is, when that value is a choice of whoever runs the code (a
    parameter of the function, or a local copied from the command-line ``args``); else None."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    inner = test.operand if negated else test
    if not isinstance(inner, ast.Name):
        return None
    if owner is None:
        return None
    if inner.id in _param_names(owner):
        return inner.id
    for node in ast.walk(owner):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == inner.id for t in node.targets) \
                and isinstance(node.value, ast.Attribute) and isinstance(node.value.value, ast.Name) \
                and node.value.value.id in ("args", "opts", "options", "config", "cfg"):
            return inner.id
    return None


def _callee_name(call: ast.Call):
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr in _CALL_ATTRS:
        f = f.value
    return f.id if isinstance(f, ast.Name) else None


@dataclass
class _Result:
    values_nodes: dict
    origin: str


def _where(mod: Module, home: Module) -> str:
    return "" if mod is home else f"{os.path.basename(mod.path)} "


def _param_names(fdef) -> list:
    a = fdef.args
    return [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]


def _defaults_env(fdef, mod: Module, home: Module) -> dict:
    resolver = _Resolver(home, mod)
    a = fdef.args
    positional = a.posonlyargs + a.args
    env = {p.arg: None for p in positional + a.kwonlyargs}
    pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults))
    pairs += [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
    for p, d in pairs:
        try:
            env[p.arg] = resolver.resolve(d, {})
        except Unresolved:
            env[p.arg] = Raw(d, {}, resolver)
    return env


def _calls_name(call: ast.Call, name: str, aliases: dict) -> bool:
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr in _CALL_ATTRS:
        f = f.value
    if isinstance(f, ast.Name):
        return f.id == name if not aliases else aliases.get(f.id) == name
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and aliases:
        return aliases.get(f.value.id) == "" and f.attr == name
    return False


def _map_call(call, params, fdef, env, resolver, eager):
    """param -> resolved ast for ``call`` of ``fdef``; tensors and untraceable values stay
    ``Raw``/absent; None when the call cannot be mapped (``*args``)."""
    out = {}
    positional = []
    for a in call.args:
        if not isinstance(a, ast.Starred):
            positional.append(a)
            continue
        items = a.value
        if isinstance(items, ast.Name) and isinstance(env.get(items.id), Raw):
            items = env[items.id].node
        elif isinstance(items, ast.Name) and isinstance(env.get(items.id), (ast.Tuple, ast.List)):
            items = env[items.id]
        if not isinstance(items, (ast.Tuple, ast.List)) or any(isinstance(e, ast.Starred) for e in items.elts):
            return None
        positional += items.elts
    keywords = []
    for kw in call.keywords:
        if kw.arg is not None:
            keywords.append((kw.arg, kw.value))
            continue
        expanded = _dict_items(kw.value, env)
        if expanded is None:
            return None
        keywords += expanded
    f = call.func
    via_attr = isinstance(f, ast.Attribute) and f.attr in _CALL_ATTRS and isinstance(f.value, (ast.Name,
                                                                                              ast.Attribute))
    del via_attr
    if len(positional) > len(params) and not fdef.args.vararg:
        return None
    for p, a in zip(params, positional):
        out[p] = _resolve_or_raw(a, env, resolver)
    for k, v in keywords:
        out[k] = _resolve_or_raw(v, env, resolver)
    return out


def _dict_items(node, env):
    if isinstance(node, ast.Name) and isinstance(env.get(node.id), Raw):
        node = env[node.id].node
    elif isinstance(node, ast.Name) and isinstance(env.get(node.id), ast.Dict):
        node = env[node.id]
    if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                          for k in node.keys):
        return [(k.value, v) for k, v in zip(node.keys, node.values)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        return [(k.arg, k.value) for k in node.keywords if k.arg]
    return None


def _resolve_or_raw(node, env, resolver):
    try:
        return resolver.resolve(node, env)
    except Unresolved:
        return Raw(node, dict(env), resolver)


# ----- eager kernels -----------------------------------------------------------------------

def eager_signature(fdef):
    return _memo("eager", fdef, None, lambda: _eager_signature(fdef))


def _eager_signature(fdef):
    """(T.const names in order, {tensor parameter: shape dims (ast nodes) or None}) of an eager
    factory, or None when ``fdef`` is not written in the eager style."""
    consts, tensors = [], {}
    params = {p.arg: p for p in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs}
    shapes = {}     # ``q_shape = [batch, seq_len, heads, dim]`` in the body: annotations may name it
    for stmt in ast.walk(fdef):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            value = stmt.value
            if isinstance(value, (ast.Tuple, ast.List)):
                shapes[stmt.targets[0].id] = list(value.elts)
            elif isinstance(value, ast.IfExp) and all(isinstance(v, (ast.Tuple, ast.List))
                                                      for v in (value.body, value.orelse)):
                shapes[stmt.targets[0].id] = value      # ``(K, M) if trans_A else (M, K)``: see _finish

    def _shape_of_ann(node):
        dims = _ann_shape(node)
        return shapes.get(dims.id) if isinstance(dims, ast.Name) else dims

    for p in params.values():
        if p.annotation is not None and _tensor_ann(p.annotation):
            tensors[p.arg] = _shape_of_ann(p.annotation)
    for stmt in ast.walk(fdef):
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and _t_call(stmt.value, "const"):
            arg = stmt.value.args[0] if stmt.value.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                consts += [n for n in arg.value.replace(",", " ").split() if n not in consts]
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is None and isinstance(stmt.target, ast.Name) \
                and stmt.target.id in params and _tensor_ann(stmt.annotation):
            tensors[stmt.target.id] = _shape_of_ann(stmt.annotation)
    if not consts and not tensors:
        return None
    return consts, tensors


def _t_call(call, name) -> bool:
    f = call.func
    return isinstance(f, ast.Attribute) and f.attr == name or isinstance(f, ast.Name) and f.id == name


def _tensor_ann(node) -> bool:
    target = node.func if isinstance(node, ast.Call) else node.value if isinstance(node, ast.Subscript) else node
    return isinstance(target, ast.Attribute) and target.attr in ("Tensor", "StridedTensor", "Buffer") or \
        isinstance(target, ast.Name) and target.id in ("Tensor", "StridedTensor")


def _ann_shape(node):
    """The shape of a ``T.Tensor(shape, dtype)`` / ``T.Tensor[shape, dtype]`` annotation: a list
    of dimension nodes, the Name of a local shape list, or None."""
    if isinstance(node, ast.Call) and node.args:
        shape = node.args[0]
    elif isinstance(node, ast.Subscript):
        sl = node.slice
        shape = sl.elts[0] if isinstance(sl, ast.Tuple) and sl.elts else sl
    else:
        return None
    if isinstance(shape, ast.Name):
        return shape
    return list(shape.elts) if isinstance(shape, (ast.Tuple, ast.List)) else None


def tensor_shape(node, env, resolver=None, depth=0):
    """The shape (ast nodes, in the environment of the tensor's creation) of a tensor
    expression built by ``torch.randn(M, K)``-like calls, and that environment; None if unknown."""
    if depth > 16:
        return None
    if isinstance(node, ast.Name):
        value = env.get(node.id)
        if isinstance(value, Raw):
            return tensor_shape(value.node, value.env, value.resolver, depth + 1)
        if node.id not in env and resolver is not None:     # a tensor the module makes at load time
            made = _module_assignment(resolver.where, node.id)
            if made is not None:
                return tensor_shape(made, {}, _Resolver(resolver.home, resolver.where), depth + 1)
        return None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ctx" and \
            isinstance(env.get("__ctx__"), dict) and isinstance(env["__ctx__"].get(node.attr), Raw):
        saved = env["__ctx__"][node.attr]        # ``ctx.block_indices``: what forward stored there
        return tensor_shape(saved.node, saved.env, saved.resolver, depth + 1)
    if isinstance(node, ast.Subscript) and _int(node.slice) in (0, 1) and isinstance(node.value, ast.Call) and \
            isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "sort" and \
            not _is_torch(node.value.func.value):      # ``x.sort(-1)[0]``: values (or indices) shaped as ``x``
        return tensor_shape(node.value.func.value, env, resolver, depth + 1)
    if isinstance(node, ast.BinOp):      # ``torch.randn(...) / 10``: a tensor and a number
        for tensor, other in ((node.left, node.right), (node.right, node.left)):
            if isinstance(other, ast.Constant) and isinstance(other.value, (int, float)):
                return tensor_shape(tensor, env, resolver, depth + 1)
        return None
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr in _SHAPE_KEEPING and not _is_torch(f.value):
        return tensor_shape(f.value, env, resolver, depth + 1)
    if isinstance(f, ast.Name) and resolver is not None and f.id not in env:
        fdef = _helper_def(node, resolver)        # ``_clone(t)`` that returns ``t.detach().clone()``
        if fdef is not None and isinstance(fdef.body[-1], ast.Return) and fdef.body[-1].value is not None:
            helper_env, inner = _helper_env(fdef, node, resolver, env)
            _env_at(fdef.body, fdef.body[-1], helper_env, inner)
            return tensor_shape(fdef.body[-1].value, helper_env, inner, depth + 1)
    if isinstance(f, ast.Attribute) and f.attr in ("view", "reshape", "expand", "new_empty", "new_zeros") \
            and not _is_torch(f.value) and node.args:
        dims = _dims(None, node.args)      # ``x.view(-1, N)``: the inferred dimension stays unknown
        dims = [ast.Name("<inferred>", ast.Load()) if _int(d) == -1 else d for d in dims or []]
        return (dims, env, resolver) if dims and sum(isinstance(d, ast.Name) and d.id == "<inferred>"
                                                     for d in dims) <= 1 else None
    if isinstance(f, ast.Attribute) and f.attr in ("empty_like", "zeros_like", "ones_like", "randn_like",
                                                   "rand_like", "full_like") and _is_torch(f.value) and node.args:
        return tensor_shape(node.args[0], env, resolver, depth + 1)
    if isinstance(f, ast.Attribute) and f.attr in _TENSOR_MAKERS and _is_torch(f.value):
        if f.attr in ("randint",):
            size = next((k.value for k in node.keywords if k.arg == "size"), None)
            size = size if size is not None else (node.args[2] if len(node.args) > 2 else
                                                  node.args[1] if len(node.args) == 2 else None)
            dims = _dims(size, [])
        elif f.attr in ("full",):
            dims = _dims(node.args[0] if node.args else None, [])
        elif f.attr == "tensor":
            count = _length(node.args[0], env, resolver) if node.args else None
            return ([ast.Constant(count)], env, resolver) if count is not None else None
        elif f.attr == "arange":
            return None
        else:
            size = next((k.value for k in node.keywords if k.arg == "size"), None)
            args = list(node.args)
            if size is None and len(args) == 1 and isinstance(args[0], ast.Name):
                bound = env.get(args[0].id)      # ``shape = (b, s, h, d)``, ``torch.randn(shape)``
                bound = bound.node if isinstance(bound, Raw) else bound
                if isinstance(bound, (ast.Tuple, ast.List)):
                    args = [bound]
            dims = _dims(size, []) if size is not None else _dims(None, args)
        return (dims, env, resolver) if dims else None
    return None


def _module_assignment(mod: Module, name: str):
    """The value of the one module-level ``name = value`` of ``mod`` (None if there are more)."""
    found = [stmt.value for stmt in mod.tree.body if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
             and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == name]
    return found[0] if len(found) == 1 else None


_SAME_LENGTH = {"accumulate", "list", "tuple", "sorted", "reversed"}


def _length(node, env, resolver, depth=0):
    """How many scalars a literal sequence holds (``[0, *itertools.accumulate(lengths)]`` with
    ``lengths`` a traced list literal), for ``torch.tensor(seq)``; None if unknown or nested."""
    if depth > 8:
        return None
    if isinstance(node, ast.Name):
        seq = _sequence(node, env, resolver) if resolver is not None else None
        return _length(seq, env, resolver, depth + 1) if seq is not None else None
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        return _length(node.args[0], env, resolver, depth + 1) if name in _SAME_LENGTH else None
    if not isinstance(node, (ast.List, ast.Tuple)):
        return None
    count = 0
    for elt in node.elts:
        if isinstance(elt, ast.Starred):
            inner = _length(elt.value, env, resolver, depth + 1)
            if inner is None:
                return None
            count += inner
        elif isinstance(elt, (ast.List, ast.Tuple, ast.ListComp)):
            return None
        else:
            count += 1
    return count


def _dims(size, args):
    if size is not None:
        return list(size.elts) if isinstance(size, (ast.Tuple, ast.List)) else None
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        return list(args[0].elts)
    return [a for a in args if not isinstance(a, ast.Starred)] or None


def _is_torch(node) -> bool:
    return isinstance(node, ast.Name) and node.id == "torch"


# ----- entry point ---------------------------------------------------------------------------

def sibling_modules(path: str, home: Module) -> list:
    """(Module, aliases) of the ``*.py`` files next to ``path`` that import it: aliases maps a
    name of theirs to the name of ours it reaches ("" for the module itself)."""
    directory, stem = os.path.dirname(path), os.path.splitext(os.path.basename(path))[0]
    out = []
    try:
        names = sorted(os.listdir(directory or "."))
    except OSError:
        return out
    for name in names:
        other = os.path.join(directory, name)
        if not name.endswith(".py") or other == path or len(out) >= 8:
            continue
        try:
            with open(other, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError):
            continue
        if stem not in text:
            continue
        mod = module_of(other, None)
        if mod is None:
            continue
        aliases = {}
        for alias, target in mod.imports.items():
            parts = target.lstrip(".").split(".")
            if target.lstrip(".") == stem or parts[-1] == stem and not target.startswith("tilelang"):
                aliases[alias] = ""
            elif len(parts) >= 2 and parts[-2] == stem:
                aliases[alias] = parts[-1]
        if aliases:
            out.append((mod, aliases))
    return out


def traced_bindings(path: str, text: str, factory_node, autotuned: bool, limit: int = 3) -> list:
    """[Traced] for the factory defined by ``factory_node`` in ``path`` (see the module docstring)."""
    home = module_of(path, text)
    if home is None:
        return []
    tracer = _Tracer(home, sibling_modules(path, home))
    eager = eager_signature(factory_node)
    results = tracer.trace(factory_node, home, MAX_DEPTH, eager=eager)
    defaults = _defaults_env(factory_node, home, home)
    out, seen = [], set()
    for result in results:
        traced = _finish(result.values_nodes, result.origin, factory_node, eager, defaults, home)
        if traced is None:
            continue
        key = tuple(sorted(traced.values.items()))
        if key in seen:
            continue
        seen.add(key)
        out.append(traced)
    if not out:
        namesake = _namesake_binding(tracer, factory_node, home, eager, defaults)
        if namesake is not None:
            out.append(namesake)
    full = [t for t in out if not t.unresolved]
    chosen = (full or ([] if not autotuned and not out else out))[:limit]
    return chosen


def _namesake_binding(tracer, fdef, home: Module, eager, defaults):
    """For a factory nothing calls: the values of same-named variables where the file runs as a
    script or test (the ``if __name__ == "__main__":`` block, ``main()``, ``test_*()``), when they
    cover every parameter without a default (and every ``T.const`` of an eager kernel)."""
    consts, tensors = eager if eager else ([], {})
    needed = [p for p in _param_names(fdef) if p not in tensors and not isinstance(defaults.get(p), ast.expr)]
    needed += [c for c in consts if c not in needed]
    wanted = [p for p in _param_names(fdef) if p not in tensors] + [c for c in consts if c not in tensors]
    if not needed:
        return None
    for env, resolver, label in _script_envs(tracer, home):
        found = {n: env[n] for n in wanted if isinstance(env.get(n), ast.expr)}
        if all(n in found for n in needed):
            texts = {n: ast.unparse(v) for n, v in found.items()}
            return Traced(texts, f"the values of {label}'s variables of the same names", bool(eager), [])
    return None


def _script_envs(tracer, home: Module):
    """(env at the end, resolver, label) of the parts of the file that run it as a script or test."""
    for stmt in home.tree.body:
        if isinstance(stmt, ast.If) and "__main__" in ast.unparse(stmt.test) and stmt.body:
            resolver = _Resolver(home, home, None, tracer.fallback())
            env = {}
            end = stmt.body[-1]
            try:
                _env_at(home.tree.body, ast.Call(lineno=(end.end_lineno or end.lineno)), env, resolver)
            except Exception:  # noqa: BLE001 - a block the trace cannot read: skipped
                continue
            yield env, resolver, "__main__"
    for name, fdef in home.functions.items():
        if name != "main" and not name.startswith("test"):
            continue
        resolver = _Resolver(home, home, fdef, tracer.fallback())
        for env0, _origin in tracer.envs_of(home, fdef, MAX_DEPTH)[:1]:
            env = dict(env0)
            end = fdef.body[-1]
            try:
                _env_at(fdef.body, ast.Call(lineno=(end.end_lineno or end.lineno) + 1), env, resolver)
            except Exception:  # noqa: BLE001
                continue
            yield env, resolver, f"{name}()"


def _finish(values, origin, fdef, eager, defaults, home=None):
    """Texts for the worker: our parameters (tensors of eager kernels dropped, their shapes
    turned into ``T.const`` values), defaults where the call gave nothing."""
    params = _param_names(fdef)
    texts, unresolved = {}, []
    consts, tensors = eager if eager else ([], {})
    for name, value in values.items():
        if name in tensors and eager:
            shape = tensor_shape(value.node, value.env, value.resolver) if isinstance(value, Raw) else \
                tensor_shape(value, {}, _Resolver(home, home)) if isinstance(value, ast.Name) and home else None
            dims = _branch_dims(tensors[name], values)
            if shape and dims and len(shape[0]) == len(dims):
                for dim, expr in zip(dims, shape[0]):
                    if isinstance(dim, ast.Name) and dim.id in consts and dim.id not in texts:
                        resolved = _try_resolve(expr, shape[1], shape[2])
                        if resolved is not None:
                            texts[dim.id] = resolved
            continue
        if isinstance(value, ast.expr):
            texts[name] = ast.unparse(value)
    namesakes = [c for c in consts if c not in texts and c in values.get("__caller__", {})]
    for name in namesakes:
        texts[name] = ast.unparse(values["__caller__"][name])
    if namesakes:
        origin = f"{origin}; {', '.join(namesakes)} from the caller's variables of the same names"
    for name in params:
        if name in texts or (eager and name in tensors):
            continue
        default = defaults.get(name)
        if isinstance(default, ast.expr):
            continue      # the factory's own default applies
        unresolved.append(name)
    if eager:
        unresolved += [c for c in consts if c not in texts]
    symbolic = [n for n in unresolved if not eager and isinstance(values.get(n), Raw)
                and _integerish(values[n].node, values[n].env) and symbolic_ok(fdef, n)]
    for name in symbolic:
        texts[name] = symbolic_text(name)
    if symbolic:
        unresolved = [n for n in unresolved if n not in symbolic]
        origin = f"{origin}; {', '.join(symbolic)} symbolic"
    if not texts:
        return None
    return Traced(texts, origin, bool(eager), unresolved)


# ----- symbolic sizes ----------------------------------------------------------------------

def symbolic_text(name: str) -> str:
    """Source text (evaluable in any module) of a symbolic size named ``name``, like ``T.dynamic``."""
    return f"__import__('tilelang.language', fromlist=['dynamic']).dynamic({name!r})"


def is_symbolic_text(text: str) -> bool:
    return text.startswith("__import__('tilelang.language', fromlist=['dynamic']).dynamic(")


_SIZE_CALLS = {"size", "item", "numel", "max", "min", "sum", "dim"}
_SIZE_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)


def _integerish(node, env, depth=0) -> bool:
    """Whether a value the trace could not compute is an integer read from data: a tensor's
    ``.shape[i]`` / ``.size(i)`` / ``.item()`` / ``.max()``, ``len(...)``, ``int(...)``, or
    integer arithmetic on such values (a local holding one is followed)."""
    if depth > 8:
        return False
    if isinstance(node, ast.Name):
        bound = env.get(node.id)
        return isinstance(bound, Raw) and _integerish(bound.node, bound.env, depth + 1)
    if isinstance(node, ast.Subscript):
        return isinstance(node.value, ast.Attribute) and node.value.attr == "shape"
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in _SIZE_CALLS:
            return True
        return isinstance(f, ast.Name) and f.id in ("len", "int") or \
            isinstance(f, ast.Name) and f.id in ("max", "min") and bool(node.args) and \
            all(_integerish(a, env, depth + 1) or _int(a) is not None for a in node.args)
    if isinstance(node, ast.BinOp) and isinstance(node.op, _SIZE_OPS):
        sides = (node.left, node.right)
        return any(_integerish(s, env, depth + 1) for s in sides) and \
            all(_integerish(s, env, depth + 1) or _int(s) is not None for s in sides)
    return False


_SHAPE_ARITH = (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.List, ast.Tuple, ast.Load, ast.operator,
                ast.unaryop)


def symbolic_ok(fdef, name: str) -> bool:
    """Whether the factory ``fdef`` uses its parameter ``name`` only where a symbolic size is legal:
    in plain shape arithmetic of its own body (``q_shape = [UQ, heads, dim]``, followed to the names
    it assigns), and in its ``@T.prim_func``/``@T.macro`` kernels anywhere but allocations and
    keyword arguments (``T.alloc_shared((n, 64))``, ``threads=n``: those need a number)."""
    tainted = {name}
    kernels = []
    for stmt in fdef.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            decorators = " ".join(ast.unparse(d) for d in stmt.decorator_list)
            reads = _reads(stmt, tainted)
            if not reads:
                continue
            if "prim_func" not in decorators and "macro" not in decorators:
                return False
            kernels.append(stmt)
            continue
        if not _reads(stmt, tainted):
            continue
        if not (isinstance(stmt, ast.Assign) and all(isinstance(n, _SHAPE_ARITH) for n in ast.walk(stmt.value))):
            return False
        for target in stmt.targets:
            if not isinstance(target, ast.Name):
                return False
            tainted.add(target.id)
    if not _bound_by_a_shape(fdef, kernels, name, tainted):
        return False
    for kernel in kernels:
        if any(_reads(d, tainted) for d in kernel.decorator_list) or any(
                _reads(a, tainted) for a in kernel.args.defaults + kernel.args.kw_defaults if a is not None):
            return False
        if not _legal_in_kernel(kernel.body, tainted):
            return False
    return True


def _bound_by_a_shape(fdef, kernels, name, tainted) -> bool:
    """Whether ``name`` is a whole dimension of a kernel parameter's tensor shape (written there or
    in a shape list the annotation names), so a call binds it from the tensor passed: a symbolic
    size read only by the grid or by ``n + 1`` would be undefined in the kernel."""
    lists = {}
    for stmt in fdef.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, (ast.List, ast.Tuple)):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    lists[target.id] = stmt.value
    for kernel in kernels:
        a = kernel.args
        for param in a.posonlyargs + a.args + a.kwonlyargs:
            shape = _ann_shape(param.annotation) if param.annotation is not None else None
            if isinstance(shape, ast.Name):
                shape = lists.get(shape.id)
                shape = list(shape.elts) if shape is not None else None
            if shape and any(isinstance(d, ast.Name) and d.id == name for d in shape):
                return True
    return False


def _reads(node, names) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _legal_in_kernel(body, names) -> bool:
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                f = node.func
                callee = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if callee.startswith("alloc") and _reads(node, names):
                    return False
                if any(_reads(k.value, names) for k in node.keywords):
                    return False
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and _reads(node, names):
                return False
    return True


def _branch_dims(dims, values):
    """``dims`` of an annotation; for ``(K, M) if trans_A else (M, K)``, the branch that the traced
    value of ``trans_A`` picks (the first when it is not a literal)."""
    if not isinstance(dims, ast.IfExp):
        return dims
    test = dims.test
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    test = test.operand if negated else test          # ``(M, K) if not trans_A else (K, M)``
    value = values.get(test.id) if isinstance(test, ast.Name) else None
    taken = dims.body
    if isinstance(value, ast.Constant):
        taken = dims.body if bool(value.value) != negated else dims.orelse
    return list(taken.elts)


def _try_resolve(expr, env, resolver):
    """``expr`` (a shape dimension read where the tensor was made) as a home-module text."""
    if resolver is None:
        return None
    try:
        return ast.unparse(resolver.resolve(expr, env))
    except Unresolved:
        return None
