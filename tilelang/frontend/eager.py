"""Eager kernels on the builder front end: a ``@tilelang.jit`` function that takes tensors.

The body runs twice through the builder, as Python with its real closure and globals:

1. *signature*: ``T.const`` names are symbolic variables; the tensor annotations
   (``A: T.Tensor((M, K), dtype)`` in the body or the signature) are recorded; the run stops at
   the first ``T.Kernel`` launch. Matching the recorded shapes (and strides) against the
   arguments (tensors, or anything with ``shape``/``dtype``) and ``compile(M=...)`` keywords gives
   each constant its value.
2. *kernel*: ``T.const`` returns those values, so derived and conditional shapes, ``dtype = ...``
   in the body and Python ``assert``s are plain Python; ``T.dynamic`` dimensions stay symbolic.
   The parameters are the annotated tensors (and ``T.int32``-style scalar parameters) in signature
   order, then every ``T.empty`` output; what the body returns gives ``out_idx``.
"""

from __future__ import annotations

import inspect

import tvm
from tvm.script.ir_builder.base import IRBuilder
from tvm.tirx.script import builder as T

from .builder import Builder, _active
from .program import _annotations, instantiate, located, program


def build_eager_prim_func(func):
    """A ``@T.prim_func`` in the eager style (tensors annotated in the body, ``T.empty`` outputs
    returned): static shapes only; the outputs' indices go to the ``tilelang_out_idx`` attribute
    (negative, counted from the end), which ``tilelang.compile`` takes as ``out_idx``."""
    result, out_idx, _ = EagerProgram(func).build((), {})
    if out_idx:
        n = len(result.params)
        result = result.with_attr("tilelang_out_idx", [i - n for i in out_idx])
    result.__name__ = func.__name__
    return result


class EagerError(TypeError):
    """The eager function cannot be specialised for these arguments."""


class _SignatureDone(Exception):
    """The signature run reached the first kernel launch."""


def _is_buffer(value) -> bool:
    return tvm.tirx.is_buffer_var(value)


class EagerState:
    """``builder.eager`` during one run: constants, declared tensors, outputs."""

    def __init__(self, tensor_params, consts, discover):
        self.tensor_params = set(tensor_params)
        self.consts = dict(consts)
        self.discover = discover
        self.symbols = {}
        self.inputs = {}
        self.outputs = []

    def is_param(self, name) -> bool:
        return name in self.tensor_params

    def declare(self, name, ann):
        if callable(ann) and not _is_buffer(ann):
            ann = ann()
        if not _is_buffer(ann):
            raise TypeError(f"'{name}: ...' must annotate a tensor (T.Tensor / T.StridedTensor), got {ann!r}")
        IRBuilder.name(name, ann)
        self.inputs[name] = ann
        return ann

    def const(self, names, dtype):
        out = []
        for name in names.replace(",", " ").split():
            if name in self.consts:
                out.append(self.consts[name])
            elif self.discover:
                out.append(self.symbols.setdefault(name, tvm.tirx.Var(name, dtype)))
            else:
                raise EagerError(f"cannot infer {name} from the tensor shapes")
        return out[0] if len(out) == 1 else out

    def empty(self, shape, dtype):
        from tvm.tirx.script.builder import buffer

        buf = buffer(list(shape), dtype)
        self.outputs.append(buf)
        return buf

    def kernel_launched(self):
        if self.discover:
            raise _SignatureDone


class EagerProgram:
    """One eager function: binds arguments, specialises and builds PrimFuncs."""

    def __init__(self, func):
        self.func = func
        self.signature = inspect.signature(func)
        self.rw = program(func)
        self.body_annotated = self._body_annotated()

    def _body_annotated(self):
        import ast

        from .rewrite import function_ast

        fdef, _ = function_ast(self.func)
        return {s.target.id for s in ast.walk(fdef) if isinstance(s, ast.AnnAssign) and s.value is None
                and isinstance(s.target, ast.Name)}

    def split(self, args, kwargs):
        """(bound arguments, constant keywords that are no parameter)."""
        params = self.signature.parameters
        consts = {k: v for k, v in kwargs.items() if k not in params}
        kwargs = {k: v for k, v in kwargs.items() if k in params}
        bound = self.signature.bind_partial(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments), consts

    def kinds(self, arguments):
        """{param: 'tensor' | 'scalar' | 'python'}: tensors and runtime scalars become parameters."""
        anns = _annotations(self.func, self.rw)
        out = {}
        for name in self.rw.params:
            ann = anns.get(name)
            if name in self.body_annotated or (ann is not None and _is_tensor_annotation(ann)):
                out[name] = "tensor"
            elif ann is not None and _is_scalar_annotation(ann):
                out[name] = "scalar"
            else:
                out[name] = "python"
        return out

    def build(self, args, kwargs):
        """(PrimFunc, out_idx, runtime argument names in parameter order)."""
        arguments, consts = self.split(args, kwargs)
        kinds = self.kinds(arguments)
        self._check_python_arguments(kinds, arguments, consts)
        tensors = [n for n, k in kinds.items() if k == "tensor"]
        signature = self._run(arguments, kinds, EagerState(tensors, consts, discover=True))
        consts.update(_match(signature, arguments))
        state = EagerState(tensors, consts, discover=False)
        func, returned = self._run(arguments, kinds, state, build=True)
        params = [n for n in self.rw.params if kinds[n] != "python"]
        outs = state.outputs
        out_idx = []
        for r in returned:
            for i, o in enumerate(outs):
                if r is not None and o.same_as(r):
                    out_idx.append(len(params) + i)
        return func, out_idx, params

    def _check_python_arguments(self, kinds, arguments, consts):
        """A parameter that is neither a tensor nor a run-time scalar is a Python value the body
        computes with (a tile size): the call must give it (tensors may be left out of a
        ``compile``, their shapes coming from ``T.const`` keywords). Upstream's message, plus the
        keyword that was probably meant for it."""
        variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        missing = [n for n, k in kinds.items() if k == "python" and n not in arguments
                   and self.signature.parameters[n].kind not in variadic]
        if not missing:
            return
        msg = f"{self.func.__name__}() missing a required argument: '{missing[0]}'"
        close = [k for k in consts if k.lower() == missing[0].lower()]
        if close:
            msg += f" ({close[0]}= names no parameter: parameter names are case-sensitive)"
        raise EagerError(msg)

    def _run(self, arguments, kinds, state, build=False):
        builder = Builder(self.rw.spans, self.rw.file)
        builder.modes = ["eager"]
        builder.eager = state
        anns = _annotations(self.func, self.rw)
        try:
            with IRBuilder() as ib, _active(builder), builder.at(0):
                with T.prim_func():
                    T.func_name(self.func.__name__)
                    values = {}
                    for name in self.rw.params:
                        kind = kinds[name]
                        if kind == "tensor" and name in anns and name not in self.body_annotated:
                            values[name] = builder.define(name, state.declare(name, anns[name]))
                        elif kind == "scalar":
                            ann = anns[name]
                            var = ann() if callable(ann) else ann
                            IRBuilder.name(name, var)
                            if isinstance(var.ty, tvm.ir.PointerType):
                                # a T.ptr parameter: declared now, so that T.make_tensor can bind
                                # it to a tensor (match_buffer takes only declared parameters)
                                var = T.arg(name, var)
                            values[name] = builder.define(name, var)
                        else:
                            values[name] = arguments.get(name)
                    fn = instantiate(self.func, builder, self.rw)
                    try:
                        returned = fn(**{n: values[n] for n in self.rw.params})
                    except _SignatureDone:
                        returned = None
                    if not build:
                        return state
            returned = returned if isinstance(returned, (tuple, list)) else [returned]
            return self._with_params(ib.get(), state, kinds, values), returned
        except (EagerError, _SignatureDone):
            raise
        except Exception as err:  # noqa: BLE001 - a located diagnostic
            if not build and all(n in state.inputs for n in kinds if kinds[n] == "tensor"):
                return state  # the signature is known; the kernel run reports the error
            raise located(err, self.rw) from None

    def _with_params(self, func, state, kinds, values):
        """``func`` with its parameters: tensors and scalars in signature order, then outputs.
        (Declared after the body ran, since a body may open frames before its last ``T.empty``.)"""
        params = []
        declared = list(func.params)   # the T.ptr parameters (tensors once T.make_tensor made them)
        made = _pointer_params(func)
        pointers, pointers_seen = [], []
        for name in self.rw.params:
            if kinds[name] == "tensor":
                if name not in state.inputs:
                    raise EagerError(f"tensor argument '{name}' has no annotation: add '{name}: T.Tensor(shape, dtype)'")
                params.append(state.inputs[name])
            elif kinds[name] == "scalar" and isinstance(values[name], tvm.ir.Expr) \
                    and isinstance(values[name].ty, tvm.ir.PointerType):
                k = len(pointers_seen)   # declared in signature order, one T.arg each
                pointers_seen.append(name)
                if k in made:
                    pointers.append(len(params))
                params.append(declared[k])
            elif kinds[name] == "scalar":
                params.append(values[name])
        params.extend(state.outputs)
        result = tvm.tirx.PrimFunc(params, func.body, func.ret_type, func.attrs, func.span)
        # the pointer marks (tilelang.language.pointer) name declaration indices: renumber them
        for k in made:
            result = result.without_attr(f"{_POINTER_PARAM_ATTR}.{k}")
        for i in pointers:
            result = result.with_attr(f"{_POINTER_PARAM_ATTR}.{i}", True)
        return result


# PrimFunc attribute "tl.pointer_param.<index>": the parameter declared T.ptr and made a tensor by
# T.make_tensor (written by tilelang.language.pointer, which the front end does not import)
_POINTER_PARAM_ATTR = "tl.pointer_param"


def _pointer_params(func) -> set:
    attrs = func.attrs if func.attrs is not None else {}
    prefix = _POINTER_PARAM_ATTR + "."
    return {int(str(k)[len(prefix):]) for k in attrs.keys() if str(k).startswith(prefix)}


def _is_tensor_annotation(ann) -> bool:
    return _is_buffer(ann) or type(ann).__name__ in ("_TensorProxy", "BufferProxy") or getattr(ann, "tl_tensor", False)


def _is_scalar_annotation(ann) -> bool:
    if isinstance(ann, type):
        return False
    try:
        value = ann() if callable(ann) else ann
    except TypeError:
        return False
    return isinstance(value, tvm.tirx.Var) and not _is_buffer(value)


def _match(state, arguments):
    """Constant values from the arguments' shapes and strides."""
    values = {}
    for name, buf in state.inputs.items():
        arg = arguments.get(name)
        if arg is None or not hasattr(arg, "shape"):
            continue
        shape = [int(s) for s in arg.shape]
        if len(shape) != len(buf.shape):
            raise EagerError(f"argument '{name}' must have {len(buf.shape)} dimensions, got shape {tuple(shape)}")
        strides = [int(s) for s in arg.stride()] if buf.strides and hasattr(arg, "stride") else []
        pack = 8 // buf.dtype.bits if buf.dtype.bits < 8 else 1
        if pack > 1 and shape:  # packed sub-byte storage (fp4 in int8 ...): logical extents
            shape[-1] *= pack
            strides = [s * pack for s in strides[:-1]] + strides[-1:]
        pairs = list(zip(buf.shape, shape)) + list(zip(buf.strides, strides))
        for dim, size in pairs:
            key = next((n for n, v in state.symbols.items() if dim.same_as(v)), None)
            if key is None:
                continue
            if values.setdefault(key, size) != size:
                raise EagerError(f"{key} is {values[key]} from an earlier tensor but {size} from '{name}'")
    return values
