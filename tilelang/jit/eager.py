"""The eager kernel style: a ``@tilelang.jit`` function that takes tensors and returns outputs.

    @tilelang.jit
    def matmul(A, B, block_M: int = 128):
        M, N, K = T.const("M, N, K")
        A: T.Tensor((M, K), T.float16)
        B: T.Tensor((K, N), T.float16)
        C = T.empty((M, N), T.float16)
        with T.Kernel(...) as (bx, by):
            ...
        return C

    c = matmul(a, b)          # compiles for a's and b's shapes, runs, returns C

Each call binds the ``T.const`` names from the tensors' shapes, rewrites the function into a
classic ``@T.prim_func`` (tensor parameters with their annotations, ``T.empty`` results appended
as output parameters) and parses it with TVM's parser against the function's own file and line
numbers, so every span still points at the user's source. Kernels are cached per shapes, dtypes
and scalar arguments.
"""

from __future__ import annotations

import ast
import inspect
import textwrap


from tilelang.frontend.eager import EagerError  # noqa: F401 - one class for both front ends
from tilelang.jit.impl import JITImpl
from tilelang.tvm_compat import tl_configs_key as _context_configs


def is_eager(func) -> bool:
    """True for a function written in the eager style: no inner ``@T.prim_func``, and it uses
    ``T.const``/``T.empty``, launches ``T.Kernel`` itself or annotates tensor parameters."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return False
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        return False
    for node in ast.walk(fdef):
        if isinstance(node, ast.FunctionDef) and node is not fdef and any(
                "prim_func" in ast.unparse(d) for d in node.decorator_list):
            return False
    if any(isinstance(n, ast.FunctionDef) and n is not fdef for n in ast.walk(fdef)) and _legacy():
        return False
    params = fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs
    return (any(_is_t_call(n, ("const", "empty")) for n in ast.walk(fdef))
            or any(isinstance(s, ast.With) and any(_is_t_call(i.context_expr, ("Kernel",)) for i in s.items)
                   for s in fdef.body)
            or any(isinstance(s, ast.AnnAssign) and s.value is None and _is_tensor_ann(s.annotation)
                   for s in fdef.body)
            or any(p.annotation is not None and _is_tensor_ann(p.annotation) for p in params))


def _legacy() -> bool:
    from tilelang.frontend.parser import builder_enabled

    return not builder_enabled()


def _is_t_call(node, names) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names
            and isinstance(node.func.value, ast.Name))


class EagerFunction:
    """Parsed once: which statements declare constants, tensors, outputs and the return."""

    def __init__(self, func):
        self.func = func
        self.file = inspect.getsourcefile(func)
        lines, self.first_line = inspect.getsourcelines(func)
        self.lines = [l.rstrip("\n") for l in lines]
        self.indent = len(self.lines[0]) - len(self.lines[0].lstrip())
        tree = ast.parse(textwrap.dedent("".join(lines)))
        self.fdef = tree.body[0]
        self.signature = inspect.signature(func)
        self.consts, self.annotations, self.outputs, self.returns, self.drop = [], {}, [], [], set()
        for p in self.fdef.args.args:
            if p.annotation is not None and _is_tensor_ann(p.annotation):
                self.annotations[p.arg] = p.annotation
        for stmt in self.fdef.body:
            self._classify(stmt)

    def _classify(self, stmt):
        value = getattr(stmt, "value", None)
        if isinstance(stmt, ast.Assign) and _is_t_call(value, ("const",)):
            names = [t.id for t in (stmt.targets[0].elts if isinstance(stmt.targets[0], ast.Tuple)
                                    else stmt.targets)]
            self.consts.extend(names)
            self._drop(stmt)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is None and _is_tensor_ann(stmt.annotation):
            self.annotations[stmt.target.id] = stmt.annotation
            self._drop(stmt)
        elif isinstance(stmt, ast.Assign) and _is_t_call(value, ("empty",)):
            self.outputs.append((stmt.targets[0].id, value))
            self._drop(stmt)
        elif isinstance(stmt, ast.Return):
            ret = stmt.value
            elts = ret.elts if isinstance(ret, ast.Tuple) else ([ret] if ret is not None else [])
            self.returns = [e.id for e in elts if isinstance(e, ast.Name)]
            self._drop(stmt)

    def _drop(self, stmt):
        self.drop.update(range(stmt.lineno, stmt.end_lineno + 1))

    # ----- specialisation ----------------------------------------------------------------
    def bind(self, args, kwargs):
        """(tensor arguments in parameter order, namespace of scalars and constants)."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        tensors, scalars = [], {}
        for name, value in bound.arguments.items():
            if name in self.annotations:
                tensors.append((name, value))
            else:
                scalars[name] = value
        return tensors, scalars

    def source(self, tensors, namespace) -> str:
        """The classic prim_func text, line-aligned with the user's file."""
        params = []
        for name, _ in tensors:
            params.append(f"{name}: {ast.unparse(self.annotations[name])}")
        for name, call in self.outputs:
            shape = ast.unparse(call.args[0]) if call.args else ast.unparse(call.keywords[0].value)
            dtype = ast.unparse(call.args[1]) if len(call.args) > 1 else '"float32"'
            params.append(f"{name}: T.Tensor({shape}, {dtype})")
        body_start = self.fdef.body[0].lineno
        out = ["@T.prim_func"] if self.fdef.decorator_list else []
        header_lines = body_start - 1 - len(out)
        out.append(f"def {self.func.__name__}({', '.join(params)}):")
        out.extend([""] * (header_lines - 1))
        pad = " " * (len(self.lines[body_start - 1]) - len(self.lines[body_start - 1].lstrip()) - self.indent)
        for lineno in range(body_start, len(self.lines) + 1):
            text = self.lines[lineno - 1][self.indent:] if len(self.lines[lineno - 1]) >= self.indent else ""
            out.append(pad + "pass" if lineno in self.drop else text)
        return "\n".join(out) + "\n"

    def const_values(self, tensors, scalars):
        """Bind every T.const name from the tensors' shapes."""
        import torch

        values = {}
        for name, tensor in tensors:
            if not isinstance(tensor, torch.Tensor):
                raise EagerError(f"argument '{name}' must be a torch.Tensor, got {type(tensor).__name__}")
            shape_node = self.annotations[name].args[0]
            dims = shape_node.elts if isinstance(shape_node, (ast.Tuple, ast.List)) else [shape_node]
            if len(dims) != tensor.dim():
                raise EagerError(f"argument '{name}' must have {len(dims)} dimensions, got shape {tuple(tensor.shape)}")
            for dim, size in zip(dims, tensor.shape):
                if isinstance(dim, ast.Name) and dim.id in self.consts:
                    if values.setdefault(dim.id, int(size)) != int(size):
                        raise EagerError(f"{dim.id} is {values[dim.id]} from an earlier tensor but {int(size)} "
                                         f"from '{name}'")
        missing = [c for c in self.consts if c not in values]
        if missing:
            raise EagerError(f"cannot infer {', '.join(missing)} from the tensor shapes")
        return values


def _is_tensor_ann(node) -> bool:
    if isinstance(node, ast.Subscript):
        node = ast.Call(func=node.value, args=[], keywords=[])
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
        "Tensor", "Buffer", "StridedTensor")


def parse_eager(ef: EagerFunction, tensors, scalars):
    """Build the PrimFunc for one specialisation and the output indices."""
    from tvm.script.ir_builder import IRBuilder
    from tvm.script.parser.core.diagnostics import Source
    from tvm.script.parser.core.parser import Parser

    from tilelang.frontend.parser import install

    install()
    namespace = dict(ef.func.__globals__)
    closure = inspect.getclosurevars(ef.func)
    namespace.update(closure.nonlocals)
    namespace.update(scalars)
    namespace.update(ef.const_values(tensors, scalars))
    text = ef.source(tensors, namespace)
    source = Source.__new__(Source)
    source.source_name = ef.file
    source.start_line = ef.first_line
    source.start_column = ef.indent
    source.source = text
    try:
        source.full_source = inspect.getsource(inspect.getmodule(ef.func))
    except (TypeError, OSError):
        source.full_source = text
    parser = Parser(source, {})
    with IRBuilder() as builder:
        parser.parse(extra_vars=namespace)
    func = builder.get()
    n_in = len(tensors)
    names = [name for name, _ in ef.outputs]
    out_idx = [n_in + names.index(r) for r in ef.returns if r in names]
    return func, out_idx


class EagerJit(JITImpl):
    """What ``@tilelang.jit`` returns for an eager-style function: call it with tensors.
    ``compile_fn`` is ``tilelang.jit.compile`` (handed in by the decorator, which imports this
    module: no import back)."""

    __test__ = False   # a kernel, not a test: pytest must not collect a ``test_*`` kernel as one

    def __init__(self, func, target, pass_configs, compile_flags, compile_fn):
        import functools

        functools.update_wrapper(self, func)
        self.target, self.pass_configs, self.compile_flags = target, pass_configs, compile_flags
        self._compile = compile_fn
        self._kernels = {}
        if _legacy():
            self.ef, self.program = EagerFunction(func), None
        else:
            from tilelang.frontend.eager import EagerProgram

            self.ef, self.program = None, EagerProgram(func)

    def _key(self, args, kwargs):
        def one(v):
            if hasattr(v, "shape") and hasattr(v, "dtype"):
                # Strides too: T.const values may be bound from a tensor's strides (T.StridedTensor).
                strides = tuple(v.stride()) if callable(getattr(v, "stride", None)) else None
                return ("tensor", tuple(int(s) for s in v.shape), str(v.dtype), strides)
            return repr(v)

        return (tuple(one(a) for a in args), tuple(sorted((k, one(v)) for k, v in kwargs.items())))

    def _specialise(self, args, kwargs):
        if self.program is None:
            tensors, scalars = self.ef.bind(args, kwargs)
            key = (tuple((n, tuple(t.shape), str(t.dtype)) for n, t in tensors),
                   tuple(sorted((k, repr(v)) for k, v in scalars.items())), _context_configs())
            kernel = self._kernels.get(key)
            if kernel is None:
                func, out_idx = parse_eager(self.ef, tensors, scalars)
                kernel = self._compile(func, out_idx, self.target, self.pass_configs, self.compile_flags)
                self._kernels[key] = kernel
            return kernel, [t for _, t in tensors]
        key = (self._key(args, kwargs), _context_configs())   # (a PassContext's tl.* configs: another kernel)
        entry = self._kernels.get(key)
        if entry is None:
            func, out_idx, params = self.program.build(args, kwargs)
            kernel = self._compile(func, out_idx, self.target, self.pass_configs, self.compile_flags)
            entry = self._kernels[key] = (kernel, params)
        kernel, params = entry
        arguments, _ = self.program.split(args, kwargs)
        return kernel, [arguments.get(p) for p in params]

    def compile(self, *args, **kwargs):
        """The JITKernel for these arguments (compiled, not run); keywords that are no parameter
        give ``T.const`` values (``compile(M=1024, N=1024, block_M=64)``)."""
        return self._specialise(args, kwargs)[0]

    def par_compile(self, configs, num_workers: int | None = None, ignore_error: bool = False) -> list:
        """``compile`` for each argument set (a tuple: positional, a dict: keywords), in order; with
        ``ignore_error`` a failing one is None instead of raising."""
        kernels = []
        for cfg in configs:
            if not isinstance(cfg, (tuple, dict)):
                raise ValueError(f"a par_compile config is a tuple of positional or a dict of keyword arguments, "
                                 f"not {type(cfg).__name__}")
            try:
                kernels.append(self.compile(*cfg) if isinstance(cfg, tuple) else self.compile(**cfg))
            except Exception:  # noqa: BLE001 - reported unless the caller asked to skip failures
                if not ignore_error:
                    raise
                kernels.append(None)
        return kernels

    def get_prim_func(self, *args, **kwargs):
        if self.program is None:
            tensors, scalars = self.ef.bind(args, kwargs)
            return parse_eager(self.ef, tensors, scalars)[0]
        return self.program.build(args, kwargs)[0]

    get_tir = get_prim_func

    def get_kernel_source(self, *args, **kwargs) -> str:
        return self.compile(*args, **kwargs).get_kernel_source()

    @staticmethod
    def key_of(value):
        """How an argument counts in a tuning record: a tensor by its shape and dtype."""
        if hasattr(value, "shape") and hasattr(value, "dtype"):
            return ["tensor", [int(s) for s in value.shape], str(value.dtype)]
        return value

    def run(self, kernel, args, kwargs):
        """Launch ``kernel`` (compiled from this function, e.g. by the autotuner) on the call's
        tensor and scalar arguments; returns what the kernel returns (its outputs)."""
        if self.program is None:
            return kernel(*[t for _, t in self.ef.bind(args, kwargs)[0]])
        arguments, _ = self.program.split(args, kwargs)
        kinds = self.program.kinds(arguments)
        return kernel(*[arguments.get(p) for p in self.program.rw.params if kinds[p] != "python"])

    def tuning_factory(self):
        """A kernel factory for ``@tilelang.autotune``: its keywords are the function's parameters
        (tensors optional: shapes may come as ``T.const`` keywords instead) plus ``T.const``
        values; it returns the compiled kernel (with the eager ``out_idx``)."""
        import inspect

        def factory(*args, **kwargs):
            return self.compile(*args, **kwargs)

        sig = inspect.signature(self.__wrapped__)
        params = [p if p.default is not p.empty or p.kind in (p.VAR_POSITIONAL,) else p.replace(default=None)
                  for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        params.append(inspect.Parameter("consts", inspect.Parameter.VAR_KEYWORD))
        factory.__signature__ = sig.replace(parameters=params)
        factory.__name__ = factory.__qualname__ = self.__name__
        factory.__wrapped__ = self.__wrapped__  # the tuning record's identity: the user's source
        return factory

    def __call__(self, *args, **kwargs):
        kernel, tensors = self._specialise(args, kwargs)
        return kernel(*tensors)
