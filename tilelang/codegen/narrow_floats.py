"""Narrow-float expressions the CUDA code generator cannot print, rewritten into ones it can.

Contract. ``legalize(func)`` (engine/pipeline._emit, before ``emit_cuda``) returns ``func`` with
- every cast to a dtype whose name is an alias of another storage type (``float8_e4m3``, what
  upstream's kernels write for ``float8_e4m3fn``: ``T.Cast("float8_e4m3", x)``,
  ``x.astype("float8_e4m3")``) a cast to that storage type, as tensors of the alias already are
  (``language.dtypes.normalize_dtype``); apache-tvm prints no CUDA type for the alias;
- every cast from one 8- or 4-bit float type to another (an e5m2 value stored into an e4m3
  tensor) a cast through float32, which holds every value of either exactly: CUDA's ``__nv_fp8_*``
  types convert from and to the wide float types only;
- arithmetic, min / max and comparisons of 8-bit floats (``A[i] * C[i]`` of two fp8 tensors, the
  running sum of an fp8 reduction) computed in float32 and rounded back once (``__nv_fp8_*`` have
  no operators);
- the float16 / bfloat16 math calls CUDA has no 16-bit function for (``T.sinh``, ``T.fmod``,
  ``T.asin``...: TVM prints ``hsinh`` or finds no rule), and every math call on 8-bit floats
  (``T.exp2`` of an fp8 value), computed in float32 the same way;
- ``T.popcount`` (TVM has no CUDA rule for it) as CUDA's ``__popc`` / ``__popcll``.
A function with none of these is returned as it is (the same object).
"""

from __future__ import annotations

import tvm
from tvm import ir, tirx

from tilelang.language.dtypes import is_narrow_float, normalize_dtype
from tilelang.tir_utils import any_expr, dtype_of, ir_transform

_ARITH = ("Add", "Sub", "Mul", "Div", "Min", "Max")
_COMPARE = ("EQ", "NE", "LT", "LE", "GT", "GE")
# 16-bit math without a CUDA function or TVM rule of its own (every other one prints h<name>)
_WIDE_MATH = {"tirx.sinh", "tirx.cosh", "tirx.asin", "tirx.acos", "tirx.asinh", "tirx.acosh", "tirx.atanh",
              "tirx.nearbyint", "tirx.log1p", "tirx.fmod", "tirx.atan2", "tirx.hypot", "tirx.copysign",
              "tirx.nextafter", "tirx.ldexp"}


def _split(dtype: str) -> tuple[str, int]:
    dt = tvm.DataType(dtype)
    return str(dt.with_lanes(1)), int(dt.lanes)


def _with_lanes(base: str, lanes: int) -> str:
    return base if lanes == 1 else f"{base}x{lanes}"


def _narrow_value(e) -> bool:
    """Whether ``e`` is a (vector of) 8-, 6- or 4-bit float value (pointers and handles are not)."""
    dtype = dtype_of(e)
    return isinstance(dtype, str) and is_narrow_float(dtype)


def _wide(e):
    _, lanes = _split(dtype_of(e))
    return tirx.Cast(_with_lanes("float32", lanes), e)


def _fix_cast(cast):
    base, lanes = _split(dtype_of(cast))
    storage = normalize_dtype(base)
    src = normalize_dtype(_split(dtype_of(cast.value))[0])
    if is_narrow_float(storage) and is_narrow_float(src) and storage != src:
        return tirx.Cast(_with_lanes(storage, lanes), _wide(cast.value))
    if storage != base:
        return tirx.Cast(_with_lanes(storage, lanes), cast.value)
    return None


def _fix(e):
    name = type(e).__name__
    if name == "Cast":
        return _fix_cast(e)
    if name in _ARITH or name in _COMPARE:
        if not _narrow_value(e.a):
            return None
        out = getattr(tirx, name)(_wide(e.a), _wide(e.b))
        return out if name in _COMPARE else tirx.Cast(dtype_of(e), out)
    if isinstance(e, ir.Call) and isinstance(e.op, ir.Op) and e.op.name == "tirx.popcount":
        return _popcount(e)
    if isinstance(e, ir.Call) and isinstance(e.op, ir.Op) and e.op.name.startswith("tirx.") \
            and e.args and _narrow_value(e) and all(_narrow_value(a) for a in e.args):
        return _in_float32(e)      # fp8 math (T.exp2 of an fp8 value): no CUDA function takes __nv_fp8_*
    if isinstance(e, ir.Call) and isinstance(e.op, ir.Op) and e.op.name in _WIDE_MATH \
            and _split(dtype_of(e))[0] in ("float16", "bfloat16"):
        return _in_float32(e)
    return None


def _in_float32(call):
    """The math ``call`` on its arguments widened to float32, rounded back to its type once."""
    return tirx.Cast(dtype_of(call), ir.Call(call.op, [_wide(a) for a in call.args],
                                             ret_ty=_with_lanes("float32", _split(dtype_of(call))[1])))


def _popcount(e):
    """``T.popcount``: TVM's CUDA printer has no rule; CUDA's ``__popc`` / ``__popcll`` count the
    bits of a 32- / 64-bit unsigned word (narrower integers are zero-extended, so a negative int8
    counts its 8 bits, not 32)."""
    base, lanes = _split(dtype_of(e))
    bits = tvm.DataType(base).bits
    if lanes != 1 or not base.startswith(("int", "uint")) or bits > 64:
        return None
    word = "uint64" if bits == 64 else "uint32"
    x = e.args[0]
    if bits < 32:
        x = tirx.Cast(f"uint{bits}", x) if base.startswith("int") else x
    count = tirx.call_extern("int32", "__popcll" if bits == 64 else "__popc", tirx.Cast(word, x))
    return tirx.Cast(base, count) if base != "int32" else count


def legalize(func):
    if not any_expr(func.body, lambda e: _fix(e) is not None):
        return func
    return func.with_body(ir_transform(func.body, None, _fix))
