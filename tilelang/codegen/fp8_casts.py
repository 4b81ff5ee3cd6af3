"""Casts the CUDA code generator cannot print, rewritten into ones it can.

Contract. ``legalize_casts(func)`` (engine/pipeline._emit, before ``emit_cuda``) returns ``func``
with
- every cast to a dtype whose name is an alias of another storage type (``float8_e4m3``, what
  upstream's kernels write for ``float8_e4m3fn``: ``T.Cast("float8_e4m3", x)``,
  ``x.astype("float8_e4m3")``) a cast to that storage type, as tensors of the alias already are
  (``language.dtypes.normalize_dtype``); apache-tvm prints no CUDA type for the alias;
- every cast from one 8- or 4-bit float type to another (an e5m2 value stored into an e4m3
  tensor) a cast through float32, which holds every value of either exactly: CUDA's ``__nv_fp8_*``
  types convert from and to the wide float types only.
A function with neither is returned as it is (the same object).
"""

from __future__ import annotations

import tvm
from tvm import ir, tirx

from tilelang.language.dtypes import normalize_dtype
from tilelang.tir_utils import any_expr, dtype_of, ir_transform


def _split(dtype: str) -> tuple[str, int]:
    dt = tvm.DataType(dtype)
    return str(dt.with_lanes(1)), int(dt.lanes)


def _with_lanes(base: str, lanes: int) -> str:
    return base if lanes == 1 else f"{base}x{lanes}"


def _narrow_float(base: str) -> bool:
    return base.startswith(("float8", "float4", "float6"))


def _fix(cast) -> "ir.Expr | None":
    base, lanes = _split(dtype_of(cast))
    storage = normalize_dtype(base)
    src, _ = _split(dtype_of(cast.value))
    src = normalize_dtype(src)
    if _narrow_float(storage) and _narrow_float(src) and storage != src:
        wide = tirx.Cast(_with_lanes("float32", lanes), cast.value)
        return tirx.Cast(_with_lanes(storage, lanes), wide)
    if storage != base:
        return tirx.Cast(_with_lanes(storage, lanes), cast.value)
    return None


def legalize_casts(func):
    if not any_expr(func.body, lambda e: isinstance(e, tirx.Cast) and _fix(e) is not None):
        return func
    body = ir_transform(func.body, None, lambda e: _fix(e) if isinstance(e, tirx.Cast) else None,
                        only_enable=["tir.Cast"])
    return func.with_body(body)
