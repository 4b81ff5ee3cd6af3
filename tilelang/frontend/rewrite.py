"""The AST rewrite behind the builder front end.

``rewrite(func)`` turns a kernel, macro or eager function into Python that runs its body against
a builder object ``__tb``: statements become builder calls (assignments bind or store, ``for``,
``while``, ``if`` and ``with`` open IR frames, ``assert`` and ``return`` go through the builder),
and the expressions that TVMScript evaluates specially (``and``/``or``/``not``, comparisons,
conditional expressions) as well as every call, arithmetic operation and subscript are routed
through it so that each one runs inside its own source span. Everything else (names, closures,
module globals, comprehensions, lambdas, helper functions) is plain Python.

Each generated node keeps the location of the node it replaces, and the code is compiled against
the user's file with the user's line numbers, so a traceback position is a user position.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import textwrap
import weakref
from dataclasses import dataclass, field

_SKIP_STEP_CALLS = ("reads", "writes", "match_buffer")
_MAX_BLOCKS = 20   # CPython's limit on statically nested blocks in one code object
ANNOTATION_CODES = weakref.WeakSet()   # code objects of parameter annotations (user positions)


@dataclass
class Rewritten:
    """The compiled factory of one rewritten function and what the builder needs to run it."""

    factory: object            # factory(__tb, UNBOUND, *closure values) -> the rewritten function
    freevars: tuple
    spans: list                # span id -> (line, col, end_line, end_col), 1-based columns
    name: str
    file: str
    params: list               # parameter names in order
    annotations: dict = field(default_factory=dict)   # param -> compiled annotation expression
    eager_body: bool = False   # the body declares outputs (``T.empty``)
    tree: object = None        # the rewritten ``def`` (ast.FunctionDef)

    @property
    def source(self) -> str:
        """The rewritten function as Python source (what runs against the builder ``__tb``)."""
        return ast.unparse(self.tree) if self.tree is not None else ""

    @property
    def def_span(self):
        return self.spans[0]


def _load(name, node):
    return ast.copy_location(ast.Name(id=name, ctx=ast.Load()), node)


def _store(name, node):
    return ast.copy_location(ast.Name(id=name, ctx=ast.Store()), node)


def _const(value, node):
    return ast.copy_location(ast.Constant(value=value), node)


class _Rewriter(ast.NodeTransformer):
    def __init__(self):
        self.spans = []
        self.tmp = 0
        self.depth = 0   # statically nested blocks (with/for/try) the statement being visited sits in

    # ----- helpers ------------------------------------------------------------------------
    def sid(self, node) -> ast.Constant:
        self.spans.append((node.lineno, node.col_offset + 1, node.end_lineno, node.end_col_offset + 1))
        return _const(len(self.spans) - 1, node)

    def new_tmp(self) -> str:
        self.tmp += 1
        return f"__tl_t{self.tmp}"

    def tb_call(self, method, args, node, keywords=()):
        func = ast.copy_location(ast.Attribute(value=_load("__tb", node), attr=method, ctx=ast.Load()), node)
        call = ast.Call(func=func, args=list(args), keywords=list(keywords))
        return ast.copy_location(call, node)

    def fits(self, inner: int, *bodies) -> bool:
        """Whether a statement that opens ``inner`` nested blocks itself can also get its ``at``
        block. CPython refuses more than 20 statically nested blocks in one function; where the
        span block would cross that, the statement runs under its enclosing statement's span (the
        rewrite then nests exactly as the source does, plus one block per ``with``/``if``)."""
        below = max((_blocks_needed(b) for b in bodies), default=0)
        return self.depth + 1 + inner + below <= _MAX_BLOCKS

    @contextlib.contextmanager
    def nested(self, blocks: int):
        self.depth += blocks
        try:
            yield
        finally:
            self.depth -= blocks

    def at(self, node, body, wrap=None):
        """``with __tb.at(span): body`` - the statement's span is active while it runs."""
        if not (self.fits(0) if wrap is None else wrap):
            return body
        item = ast.withitem(context_expr=self.tb_call("at", [self.sid(node)], node), optional_vars=None)
        return ast.copy_location(ast.With(items=[item], body=body), node)

    def expr_stmt(self, value, node):
        return ast.copy_location(ast.Expr(value=value), node)

    def lam(self, body, node):
        args = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                             defaults=[])
        return ast.copy_location(ast.Lambda(args=args, body=body), node)

    def names_of(self, target):
        """The name structure of a binding target: 'x', ('a', ('b', 'c')) or None (not a name)."""
        if isinstance(target, ast.Name):
            return target.id
        if isinstance(target, (ast.Tuple, ast.List)) and all(
                not isinstance(e, ast.Starred) for e in target.elts):
            inner = [self.names_of(e) for e in target.elts]
            if all(i is not None for i in inner):
                return tuple(inner)
        return None

    def body(self, stmts):
        out = []
        for s in stmts:
            r = self.visit(s)
            if r is None:
                continue
            out.extend(r if isinstance(r, list) else [r])
        return out or [ast.Pass()]

    # ----- expressions --------------------------------------------------------------------
    def visit_Lambda(self, node):
        return node

    def visit_ListComp(self, node):
        return node

    visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_JoinedStr = visit_ListComp

    def visit_Call(self, node):
        attr = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if attr is not None and attr not in _SKIP_STEP_CALLS:
            for a in node.args:
                _add_unit_step(a)
        node = self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "eval" and len(node.args) == 1 and not node.keywords:
            # ``eval("r[0]")`` in a kernel reads the kernel's own names (upstream's body runs as Python):
            # the builder calls it, so it gets this function's namespaces, evaluated here
            node.args += [ast.copy_location(ast.Call(func=_load(f, node), args=[], keywords=[]), node)
                          for f in ("globals", "locals")]
        return self.tb_call("call", [self.sid(node), node.func, *node.args], node, node.keywords)

    def visit_BinOp(self, node):
        _add_unit_step(node.left)
        _add_unit_step(node.right)
        node = self.generic_visit(node)
        op = _const(type(node.op).__name__, node)
        return self.tb_call("binop", [self.sid(node), op, node.left, node.right], node)

    def visit_UnaryOp(self, node):
        _add_unit_step(node.operand)
        node = self.generic_visit(node)
        op = _const(type(node.op).__name__, node)
        return self.tb_call("unary", [self.sid(node), op, node.operand], node)

    def visit_Compare(self, node):
        for a in [node.left, *node.comparators]:
            _add_unit_step(a)
        node = self.generic_visit(node)
        ops = ast.copy_location(ast.Tuple(elts=[_const(type(o).__name__, node) for o in node.ops],
                                          ctx=ast.Load()), node)
        return self.tb_call("compare", [self.sid(node), ops, node.left, *node.comparators], node)

    def visit_BoolOp(self, node):
        node = self.generic_visit(node)
        op = _const(type(node.op).__name__, node)
        thunks = [self.lam(v, v) for v in node.values[1:]]
        return self.tb_call("boolop", [self.sid(node), op, node.values[0], *thunks], node)

    def visit_IfExp(self, node):
        node = self.generic_visit(node)
        return self.tb_call("ifexp", [self.sid(node), node.test, self.lam(node.body, node.body),
                                      self.lam(node.orelse, node.orelse)], node)

    def visit_Subscript(self, node):
        if not isinstance(node.ctx, ast.Load):
            return self.generic_visit(node)
        node = self.generic_visit(node)
        return self.tb_call("getitem", [self.sid(node), node.value, _index_value(node.slice)], node)

    # ----- statements ---------------------------------------------------------------------
    def visit_FunctionDef(self, node):
        return node  # nested helpers stay plain Python (a @T.macro rewrites itself)

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Expr(self, node):
        if isinstance(node.value, ast.Constant):
            return None  # docstrings and bare constants
        value = self.visit(node.value)
        return self.at(node, [self.expr_stmt(self.tb_call("expr", [value], node), node)])

    def visit_Assign(self, node):
        if isinstance(node.value, ast.Subscript):
            _add_unit_step(node.value)
        value = self.visit(node.value)
        if len(node.targets) == 1:
            return self.at(node, self.assign_target(node.targets[0], value, node))
        tmp = self.new_tmp()
        stmts = [ast.copy_location(ast.Assign(targets=[_store(tmp, node)], value=value), node)]
        for t in node.targets:
            stmts.extend(self.assign_target(t, _load(tmp, node), node))
        return self.at(node, stmts)

    def assign_target(self, target, value, node, ann=None):
        if isinstance(target, ast.Name):
            args = [_const(target.id, target), value]
            if ann is not None:
                args.append(ann)
            call = self.tb_call("assign" if ann is None else "ann_assign", args, target)
            return [ast.copy_location(ast.Assign(targets=[_store(target.id, target)], value=call), node)]
        if isinstance(target, ast.Subscript):
            buf = self.visit(target.value)
            idx = self.store_index(target.slice)
            return [self.expr_stmt(self.tb_call("store", [buf, idx, value], target), node)]
        if isinstance(target, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in target.elts):
            return self.assign_tuple(target, value, node)
        # attributes, starred targets: plain Python
        target = self.visit(target)
        return [ast.copy_location(ast.Assign(targets=[target], value=value), node)]

    def assign_tuple(self, target, value, node):
        """``a, b = x, y``: unpack through the builder (which snapshots values when a target is a
        mutable scalar or an element store), then bind or store each target in order."""
        tmps = [self.new_tmp() for _ in target.elts]
        names = ast.copy_location(ast.Tuple(elts=[_const(self.names_of(e) if isinstance(e, ast.Name) else None, e)
                                                  for e in target.elts], ctx=ast.Load()), target)
        stores = _const(any(isinstance(e, ast.Subscript) for e in target.elts), target)
        unpack = self.tb_call("unpack", [value, _const(len(tmps), target), names, stores], target)
        lhs = ast.copy_location(ast.Tuple(elts=[_store(t, target) for t in tmps], ctx=ast.Store()), target)
        stmts = [ast.copy_location(ast.Assign(targets=[lhs], value=unpack), node)]
        for t, elt in zip(tmps, target.elts):
            stmts.extend(self.assign_target(elt, _load(t, elt), node))
        return stmts

    def store_index(self, sl):
        """Indices of an element store as TVMScript passes them: a list for ``A[i, j]``, the value
        itself for ``A[i]``."""
        if isinstance(sl, ast.Tuple):
            elts = [self.visit(e) for e in sl.elts]
            return ast.copy_location(ast.List(elts=elts, ctx=ast.Load()), sl)
        return self.visit(sl)

    def visit_AugAssign(self, node):
        op = _const(type(node.op).__name__, node)
        value = self.visit(node.value)
        target = node.target
        if isinstance(target, ast.Name):
            call = self.tb_call("aug_assign", [op, _load(target.id, target), value], node,
                                [ast.keyword(arg="name", value=_const(target.id, target))])
            stmt = ast.copy_location(ast.Assign(targets=[_store(target.id, target)], value=call), node)
            return self.at(node, [stmt])
        if isinstance(target, ast.Subscript):
            buf = self.visit(target.value)
            idx = self.store_index(target.slice)
            single = _const(not isinstance(target.slice, ast.Tuple), target)
            call = self.tb_call("aug_store", [buf, idx, single, op, value], node)
            return self.at(node, [self.expr_stmt(call, node)])
        return self.at(node, [self.generic_visit(node)])

    def visit_AnnAssign(self, node):
        ann = self.visit(node.annotation)
        value = self.visit(node.value) if node.value is not None else self.tb_call("missing", [], node)
        if not isinstance(node.target, ast.Name):
            return self.at(node, self.assign_target(node.target, value, node))
        return self.at(node, self.assign_target(node.target, value, node, ann=ann))

    def visit_For(self, node):
        it = node.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
            args = [self.visit(a) for a in it.args]
            it = self.tb_call("range_", [self.sid(it), *args], it,
                              [ast.keyword(arg=k.arg, value=self.visit(k.value)) for k in it.keywords])
        else:
            it = self.visit(it)
        tmp = self.new_tmp()
        wrap = self.fits(1, node.body, node.orelse)
        bind = self.tb_call("bind_for", [_const(self.names_of(node.target), node.target), _load(tmp, node)],
                            node.target)
        target = self.visit(node.target) if self.names_of(node.target) is None else node.target
        first = ast.copy_location(ast.Assign(targets=[target], value=bind), node.target)
        with self.nested(1 + wrap):
            loop = ast.For(target=_store(tmp, node), iter=self.tb_call("for_", [it], node),
                           body=[first] + self.body(node.body), orelse=self.body(node.orelse) if node.orelse else [])
        return self.at(node, [ast.copy_location(loop, node)], wrap)

    def visit_While(self, node):
        cond = self.lam(self.visit(node.test), node.test)
        wrap = self.fits(1, node.body)
        with self.nested(1 + wrap):
            loop = ast.For(target=_store("_", node), iter=self.tb_call("while_", [cond], node),
                           body=self.body(node.body), orelse=[])
        return self.at(node, [ast.copy_location(loop, node)], wrap)

    def visit_Break(self, node):
        return self._jump(node, "break_", ast.Break())

    def visit_Continue(self, node):
        return self._jump(node, "continue_", ast.Continue())

    def _jump(self, node, method, stmt):
        test = self.tb_call(method, [], node)
        return self.at(node, [ast.copy_location(ast.If(test=test, body=[ast.copy_location(stmt, node)], orelse=[]),
                                                node)])

    def visit_If(self, node):
        tmp = self.new_tmp()
        cond = self.tb_call("cond", [self.visit(node.test), _const(bool(node.orelse), node)], node.test)
        wrap = self.fits(1, node.body, node.orelse)
        with self.nested(1 + wrap):
            then_body = self.body(node.body)
            else_body = self.body(node.orelse) if node.orelse else None
        stmts = [ast.copy_location(ast.Assign(targets=[_store(tmp, node)], value=cond), node)]
        then_with = ast.With(items=[ast.withitem(context_expr=self.tb_call("then", [_load(tmp, node)], node))],
                             body=then_body)
        stmts.append(ast.copy_location(ast.If(test=_load(tmp, node), body=[ast.copy_location(then_with, node)],
                                              orelse=[]), node))
        if node.orelse:
            else_with = ast.With(items=[ast.withitem(context_expr=self.tb_call("else_", [_load(tmp, node)], node))],
                                 body=else_body)
            test = self.tb_call("has_else", [_load(tmp, node)], node)
            stmts.append(ast.copy_location(ast.If(test=test, body=[ast.copy_location(else_with, node)], orelse=[]),
                                           node))
        return self.at(node, stmts, wrap)

    def visit_With(self, node):
        items, first = [], []
        for item in node.items:
            ctx = self.tb_call("with_", [self.sid(item.context_expr), self.visit(item.context_expr)],
                               item.context_expr)
            if item.optional_vars is None:
                items.append(ast.withitem(context_expr=ctx, optional_vars=None))
                continue
            tmp = self.new_tmp()
            items.append(ast.withitem(context_expr=ctx, optional_vars=_store(tmp, item.optional_vars)))
            names = self.names_of(item.optional_vars)
            target = item.optional_vars if names is not None else self.visit(item.optional_vars)
            bind = self.tb_call("bind_with", [_const(names, target), _load(tmp, target)], target)
            first.append(ast.copy_location(ast.Assign(targets=[target], value=bind), target))
        scope = ast.withitem(context_expr=self.tb_call("scope", [], node), optional_vars=None)
        wrap = self.fits(1 + len(items), node.body)
        with self.nested(1 + len(items) + wrap):
            body = self.body(node.body)
        with_ = ast.With(items=[scope] + items, body=first + body)
        return self.at(node, [ast.copy_location(with_, node)], wrap)

    def visit_Assert(self, node):
        msg = self.lam(self.visit(node.msg) if node.msg is not None else _const(None, node), node)
        call = self.tb_call("assert_", [self.visit(node.test), msg], node)
        return self.at(node, [self.expr_stmt(call, node)])

    def visit_Return(self, node):
        value = self.visit(node.value) if node.value is not None else _const(None, node)
        tail = _const(getattr(node, "tl_tail", False), node)
        ret = ast.copy_location(ast.Return(value=self.tb_call("ret", [value, tail], node)), node)
        return self.at(node, [ret])


def _mark_tail_return(stmts) -> None:
    """Mark a bare ``return`` that ends the function, directly or as the last statement of the
    ``with`` blocks that end it (the end of a ``with T.Kernel`` body): nothing follows it."""
    last = stmts[-1] if stmts else None
    if isinstance(last, ast.Return) and last.value is None:
        last.tl_tail = True
    elif isinstance(last, ast.With):
        _mark_tail_return(last.body)


def _blocks_needed(stmts) -> int:
    """The fewest nested blocks the rewrite of ``stmts`` opens (no span blocks): one per loop,
    ``try`` and ``if`` (its then/else scope), one plus one per item for a ``with``."""
    most = 0
    for s in stmts:
        if isinstance(s, (ast.For, ast.While, ast.If, ast.AsyncFor)):
            n = 1 + max(_blocks_needed(s.body), _blocks_needed(s.orelse))
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            n = 1 + len(s.items) + _blocks_needed(s.body)
        elif isinstance(s, ast.Try):
            n = 1 + max(_blocks_needed(b) for b in (s.body, s.orelse, s.finalbody,
                                                   *[h.body for h in s.handlers]))
        else:
            n = 0
        most = max(most, n)
    return most


def _index_value(sl):
    """The value a subscript passes to ``__getitem__`` (a tuple for ``A[i, j]``)."""
    return sl


def _add_unit_step(node):
    """TVMScript gives ``a:b`` slices of a subscript argument an explicit step of 1."""
    if not isinstance(node, ast.Subscript):
        return
    slices = [node.slice] if isinstance(node.slice, ast.Slice) else (
        [e for e in node.slice.elts if isinstance(e, ast.Slice)] if isinstance(node.slice, ast.Tuple) else [])
    for s in slices:
        if s.step is None and s.upper is not None and s.lower is not None:
            s.step = ast.Constant(value=1, lineno=s.upper.lineno, col_offset=s.upper.end_col_offset + 1,
                                  end_lineno=s.upper.lineno, end_col_offset=s.upper.end_col_offset + 2)


def function_ast(func):
    """(FunctionDef with the user's absolute lines and columns, file name)."""
    file = inspect.getsourcefile(func) or inspect.getfile(func)
    try:
        lines, first = inspect.getsourcelines(func)
    except OSError as err:
        where = getattr(getattr(func, "__code__", None), "co_filename", None) or file
        raise OSError(
            f"cannot read the source of '{getattr(func, '__qualname__', func)}' (defined in {where}): TileLang "
            "parses a kernel from its source text, which Python does not keep for code read from stdin, "
            "given to `python -c` or run through exec() of a string. Put the kernel in a .py file (or, "
            "with exec, compile the text under a file name registered in linecache).") from err
    src = "".join(lines)
    indent = len(lines[0]) - len(lines[0].lstrip())
    tree = ast.parse(textwrap.dedent(src))
    fdef = tree.body[0]
    for node in ast.walk(tree):
        if hasattr(node, "lineno"):
            node.lineno += first - 1
            node.end_lineno = (node.end_lineno or node.lineno) + first - 1
            node.col_offset += indent
            node.end_col_offset = (node.end_col_offset or 0) + indent
    return fdef, file


def rewrite(func) -> Rewritten:
    """Rewrite ``func`` for the builder and compile it against its own file."""
    fdef, file = function_ast(func)
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise TypeError(f"{func!r} is not defined by a def statement")
    rw = _Rewriter()
    params = [a.arg for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs]
    annotations = {}
    for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs:
        if a.annotation is not None:
            annotations[a.arg] = compile(ast.Expression(body=a.annotation), file, "eval")
            ANNOTATION_CODES.add(annotations[a.arg])
        a.annotation = None
    for a in (fdef.args.vararg, fdef.args.kwarg):
        if a is not None:
            a.annotation = None
    fdef.args.defaults = [_const(None, d) for d in fdef.args.defaults]
    fdef.args.kw_defaults = [None if d is None else _const(None, d) for d in fdef.args.kw_defaults]
    fdef.decorator_list = []
    fdef.returns = None
    eager_body = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "empty"
                     for n in ast.walk(fdef))
    rw.sid(fdef)  # span 0: the whole definition
    _mark_tail_return(fdef.body)
    fdef.body = rw.body(fdef.body)
    freevars = func.__code__.co_freevars
    factory_args = ast.arguments(posonlyargs=[], args=[ast.arg(arg="__tb"), ast.arg(arg="__tl_unbound")]
                                 + [ast.arg(arg=v) for v in freevars],
                                 vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    # a closure variable the enclosing function never assigned (``if grouped: per_group = ...``)
    # stays unbound: only a use that runs (not one under a Python-false ``if``) is a NameError
    unbind = [ast.If(test=ast.Compare(left=ast.Name(id=v, ctx=ast.Load()), ops=[ast.Is()],
                                      comparators=[ast.Name(id="__tl_unbound", ctx=ast.Load())]),
                     body=[ast.Delete(targets=[ast.Name(id=v, ctx=ast.Del())])], orelse=[]) for v in freevars]
    ret = ast.Return(value=ast.Name(id=fdef.name, ctx=ast.Load()))
    factory = ast.FunctionDef(name="__tl_factory", args=factory_args, body=unbind + [fdef, ret], decorator_list=[],
                              returns=None)
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, file, "exec")
    namespace = {}
    exec(code, func.__globals__, namespace)  # noqa: S102 - the user's own kernel, rewritten
    return Rewritten(namespace["__tl_factory"], freevars, rw.spans, fdef.name, file, params, annotations,
                     eager_body, fdef)
