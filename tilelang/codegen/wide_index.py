"""64-bit element offsets for tensors of 2**31 elements or more.

Contract. ``widen_large_tensors(func, symbolic=False)`` returns ``func`` with every tensor
parameter whose static shape spans more than ``2**31 - 1`` elements (``A: T.Tensor((65536,
65536), T.float32)``, or a ``T.const`` size that makes it so) declared with 64-bit extents (and
strides), and every access to it in the lowered body rebuilt on that declaration. TVM then
flattens its indices in int64 (``(int64_t)blockIdx.x * (int64_t)65536 + ...``), as upstream's
generated code does, instead of overflowing the 32-bit product of the extents (a ``Divide by
zero`` inside TVM for exactly ``2**32`` elements). Tensors of fewer elements, and symbolic shapes
(their width is the symbol's own dtype), are left as they are, so the code of every other kernel
is unchanged. ``symbolic=True`` (pass config ``tl.enable_wide_index``: the variant the launcher
compiles when a call binds a symbolic-shape tensor of more than ``2**31`` elements) widens every
tensor parameter with a symbolic shape too, its symbols cast to int64 in the extents.
"""

from __future__ import annotations

from tvm import ir, tirx
from tvm.tirx import is_buffer_var

from tilelang.tir_utils import ExprRewriter, dtype_of, seq
from tilelang.transform.pass_config import PassConfigKey

INT32_MAX = 2**31 - 1
WIDE_INDEX = PassConfigKey.TL_ENABLE_WIDE_INDEX.value   # pass config: widen the symbolic-shape tensors too


def _static(values) -> list | None:
    out = []
    for v in values:
        if not isinstance(v, tirx.IntImm):
            return None
        out.append(int(v.value))
    return out


def _span(buf) -> int | None:
    shape = _static(buf.shape)
    if shape is None:
        return None
    if not buf.strides:
        n = 1
        for e in shape:
            n *= e
        return n
    strides = _static(buf.strides)
    if strides is None:
        return None
    return 1 + sum((e - 1) * s for e, s in zip(shape, strides) if e > 0)


def _wide(values):
    """``values`` (extents or strides) as int64: constants as 64-bit immediates, an int32
    expression of symbols cast."""
    out = []
    for v in values:
        if isinstance(v, tirx.IntImm):
            out.append(tirx.IntImm("int64", int(v.value)))
        else:
            out.append(v if dtype_of(v) == "int64" else tirx.Cast("int64", v))
    return out


class _Remap(ExprRewriter):
    def __init__(self, remap):
        self.remap = remap      # [(old buffer, new buffer)]

    def _new(self, buf):
        return next((new for old, new in self.remap if old.same_as(buf)), None)

    def _or_same(self, buf):
        new = self._new(buf)
        return buf if new is None else new

    def visit_var(self, var):
        return self._or_same(var)

    def visit_load(self, load, indices):
        new = self._new(load.source)
        if new is None:
            return super().visit_load(load, indices)
        return tirx.BufferLoad(new, indices)

    def visit_Call(self, e):
        args = [self._or_same(a) if is_buffer_var(a) else self.visit(a) for a in e.args]
        if all((x is y) or (hasattr(x, "same_as") and x.same_as(y)) for x, y in zip(args, e.args)):
            return e
        return ir.Call(e.op, args, attrs=e.attrs, ret_ty=e.ty)


def _rebuild(stmt, rw: _Remap):
    def go(s):
        if s is None:
            return None
        if isinstance(s, tirx.SeqStmt):
            return seq([go(x) for x in s.seq])
        if isinstance(s, tirx.BufferStore):
            buf = rw._or_same(s.buffer)
            return tirx.BufferStore(buf, rw.visit(s.value), [rw.visit(i) for i in s.indices], span=s.span)
        if isinstance(s, tirx.IfThenElse):
            return tirx.IfThenElse(rw.visit(s.condition), go(s.then_case), go(s.else_case), span=s.span)
        if isinstance(s, tirx.Evaluate):
            return tirx.Evaluate(rw.visit(s.value), span=s.span)
        if isinstance(s, tirx.Bind):
            return tirx.Bind(s.var, rw.visit(s.value), span=s.span)
        if isinstance(s, tirx.For):
            return tirx.For(s.loop_var, rw.visit(s.min), rw.visit(s.extent), s.kind, go(s.body),
                            thread_binding=s.thread_binding, annotations=s.annotations, step=s.step, span=s.span)
        if isinstance(s, tirx.AttrStmt):
            return tirx.AttrStmt(s.node, s.attr_key, rw.visit(s.value), go(s.body), span=s.span)
        if isinstance(s, tirx.While):
            return tirx.While(rw.visit(s.condition), go(s.body), span=s.span)
        return s

    return go(stmt)


def widen_large_tensors(func, symbolic: bool = False):
    """``func`` with 64-bit extents for its tensors of more than 2**31 - 1 elements, and with
    ``symbolic`` for every tensor of a symbolic shape (see the module docstring); ``func`` itself
    when it has none."""
    remap, params = [], []
    for param in func.params:
        wide = False
        if is_buffer_var(param):
            span = _span(param)
            wide = span > INT32_MAX if span is not None else symbolic
        if not wide:
            params.append(param)
            continue
        new = tirx.decl_buffer(_wide(param.shape), param.dtype, param.name,
                               strides=_wide(param.strides) if param.strides else None,
                               elem_offset=param.elem_offset, scope=param.scope(),
                               data_alignment=param.data_alignment, offset_factor=param.offset_factor)
        remap.append((param, new))
        params.append(new)
    if not remap:
        return func
    body = _rebuild(func.body, _Remap(remap))
    return tirx.PrimFunc(params, body, func.ret_type, func.attrs, span=func.span)


__all__ = ["WIDE_INDEX", "widen_large_tensors"]
