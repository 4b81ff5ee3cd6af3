"""Scalar math and expression helpers: ``T.exp``, ``T.max``, ``T.cast``, ``T.infinity`` ...

Most are TVM's own intrinsics; the ones taking a dtype accept every spelling ``normalize_dtype``
understands, and ``T.ceildiv``/``T.floordiv`` stay Python integers when given integers so grid
sizes computed from constants remain constants.
"""

from __future__ import annotations

import tvm
from tvm import tirx
from tvm.script import tirx as _T

from ._ops import as_expr
from .dtypes import is_narrow_float, normalize_dtype

exp = _T.exp
exp2 = _T.exp2
exp10 = _T.exp10
log = _T.log
log2 = _T.log2
log10 = _T.log10
sqrt = _T.sqrt
rsqrt = _T.rsqrt
sigmoid = _T.sigmoid
tanh = _T.tanh
sin = _T.sin
cos = _T.cos
erf = _T.erf
tan, sinh, cosh = _T.tan, _T.sinh, _T.cosh
asin, acos, atan, atan2 = _T.asin, _T.acos, _T.atan, _T.atan2
asinh, acosh, atanh = _T.asinh, _T.acosh, _T.atanh
log1p, hypot, copysign, nextafter, ldexp = _T.log1p, _T.hypot, _T.copysign, _T.nextafter, _T.ldexp
nearbyint = _T.nearbyint


def isfinite(x):
    """True where ``x`` is neither infinite nor NaN: CUDA's ``isfinite`` (16-bit floats widened to
    float32); integers are always finite."""
    x = as_expr(x)
    dtype = x.ty.dtype if hasattr(x.ty, "dtype") else x.ty
    if dtype.lanes == 1 and str(dtype) in ("float32", "float64", "float16", "bfloat16"):
        arg = x if str(dtype) in ("float32", "float64") else tirx.Cast("float32", x)
        return tirx.call_pure_extern("bool", "isfinite", arg)
    return _T.isfinite(x)


popcount, clz = _T.popcount, _T.clz
shift_left, shift_right = _T.shift_left, _T.shift_right
bitwise_and, bitwise_or, bitwise_xor, bitwise_not = _T.bitwise_and, _T.bitwise_or, _T.bitwise_xor, _T.bitwise_not
likely = _T.likely
call_intrin, call_pure_extern = _T.call_intrin, _T.call_pure_extern
# Expression nodes upstream's T re-exports (T.Cast("float32", x), T.Ramp(base, stride, lanes) ...).
Cast, Ramp, Broadcast, Shuffle, Let = tirx.Cast, tirx.Ramp, tirx.Broadcast, tirx.Shuffle, tirx.Let
floor = _T.floor
ceil = _T.ceil


def round(x, rounding_mode="ties-to-even", span=None):  # noqa: A001 - mirrors the T namespace
    """Round to the nearest integer value: halfway cases to even (the default, TVM's ``round``) or,
    with ``rounding_mode="ties-away-from-zero"``, away from zero (``tl::RoundTiesAwayFromZero``)."""
    if rounding_mode is None:
        rounding_mode = "ties-to-even"
    elif not isinstance(rounding_mode, str):  # the older positional span
        span, rounding_mode = rounding_mode, "ties-to-even"
    x = as_expr(x)
    if rounding_mode == "ties-to-even":
        return _T.round(x, span) if span is not None else _T.round(x)
    if rounding_mode == "ties-away-from-zero":
        dt = str(x.ty.dtype)
        if dt == "bool" or dt.startswith(("int", "uint")):
            return x
        return tirx.call_pure_extern(dt, "tl::RoundTiesAwayFromZero", x)
    raise ValueError(f"T.round: unsupported rounding_mode {rounding_mode!r}; "
                     "expected 'ties-to-even' or 'ties-away-from-zero'")


trunc = _T.trunc


def _widened(x):
    """``x`` as float32 where TVM's builder refuses its type (bfloat16, 8-bit floats), else ``x``."""
    x = as_expr(x)
    dtype = x.ty.dtype if hasattr(x.ty, "dtype") else None
    base = str(dtype.with_lanes(1)) if dtype is not None else ""
    if base != "bfloat16" and not is_narrow_float(base):
        return x
    return tirx.Cast("float32" if dtype.lanes == 1 else f"float32x{dtype.lanes}", x)


def isnan(x):
    """True where ``x`` is NaN (bfloat16 and 8-bit floats tested as float32, which holds them exactly)."""
    return _T.isnan(_widened(x))


def isinf(x):
    """True where ``x`` is infinite (bfloat16 and 8-bit floats tested as float32)."""
    return _T.isinf(_widened(x))


fmod = _T.fmod
Select = _T.Select
address_of = _T.address_of
call_extern = _T.call_extern


def reinterpret(value, dtype):
    """The bits of ``value`` read as ``dtype`` (same total width): ``T.reinterpret(x, T.uint32)``.
    The older order ``T.reinterpret(dtype, value)`` is accepted too."""
    if isinstance(dtype, tvm.ir.Expr) or isinstance(value, str) or getattr(value, "_dtype_str", None):
        value, dtype = dtype, value
    return tirx.reinterpret(normalize_dtype(dtype), as_expr(value))


def abs(x):  # noqa: A001 - mirrors the T namespace
    return tirx.abs(as_expr(x))


def pow(x, y):  # noqa: A001
    """``x`` to the power ``y``; bfloat16 and 8-bit floats (no TVM rule) computed in float32 and
    rounded back to ``x``'s type."""
    x, y = as_expr(x), as_expr(y)
    wx = _widened(x)
    if wx is x:
        return tirx.pow(x, y)
    wy = _widened(y)
    if str(wy.ty.dtype) != str(wx.ty.dtype):
        wy = tirx.Cast(wx.ty.dtype, wy)
    return tirx.Cast(x.ty.dtype, tirx.pow(wx, wy))


def max(a, b):  # noqa: A001
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a if a >= b else b
    return tirx.max(as_expr(a), as_expr(b))


def min(a, b):  # noqa: A001
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a if a <= b else b
    return tirx.min(as_expr(a), as_expr(b))


def clamp(dst, min_val, max_val):
    """``dst`` limited to [min_val, max_val] (upstream's T.clamp)."""
    return max(min(dst, max_val), min_val)


def cast(value, dtype, round="", sat=True, rbits=None, span=None):  # noqa: A002 - upstream's names
    """``value`` as ``dtype``; the rounding options are checked by ``tilelang.language.tir.ir.cast``."""
    from .tir.ir import cast as _cast

    return _cast(value, dtype, round=round, sat=sat, rbits=rbits, span=span)


def if_then_else(cond, t, f, span=None):
    """``t`` where ``cond`` holds, else ``f`` (both evaluated)."""
    return tirx.if_then_else(as_expr(cond), as_expr(t), as_expr(f))


# Types TVM has no infinity literal for: their +inf bit pattern, reinterpreted.
_INF_BITS = {"bfloat16": ("uint16", 0x7F80), "float8_e5m2": ("uint8", 0x7C)}


def infinity(dtype):
    name = normalize_dtype(dtype)
    if name in _INF_BITS:
        storage, bits = _INF_BITS[name]
        return tirx.reinterpret(name, tirx.const(bits, storage))
    return tirx.infinity(name)


def max_value(dtype):
    return tirx.max_value(normalize_dtype(dtype))


def min_value(dtype):
    return tirx.min_value(normalize_dtype(dtype))


def ceildiv(lhs, rhs, span=None):
    """``lhs / rhs`` rounded up (a Python int for two ints)."""
    if isinstance(lhs, int) and isinstance(rhs, int):
        return -(-lhs // rhs)
    return tirx.ceildiv(as_expr(lhs), as_expr(rhs))


def floordiv(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return tirx.floordiv(as_expr(a), as_expr(b))


def floormod(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    return tirx.floormod(as_expr(a), as_expr(b))


def truncdiv(a, b):
    return tirx.truncdiv(as_expr(a), as_expr(b))


def truncmod(a, b):
    return tirx.truncmod(as_expr(a), as_expr(b))
