"""Registration of TileLang's tile operators as TVM ``Op``s, and the helpers that emit them.

Every tile-level statement (``T.copy``, ``T.gemm``, ``T.reduce_sum`` ...) becomes
``Evaluate(Call(Op("tl.<name>"), args))`` in the PrimFunc. Buffer operands are passed as
``tl.region(TensorLoad(buffer, starts), access_mask, *extents)`` so that passes see the whole
accessed box. The parser stamps the user's source span on the Evaluate statement; we copy it
onto the Call so that analyses can locate an operand-level problem too.
"""

from __future__ import annotations

import functools
import threading
from typing import Sequence

import tvm
from tvm import ir, tirx
from tvm.ir import _ffi_api as _ir_ffi

OPAQUE = 3  # tirx.CallEffectKind.Opaque as the plain int the registry requires.
PURE = 0
_REGISTER_LOCK = threading.Lock()   # two threads tracing their first kernel at once

TILE_OPS = (
    "copy", "fill", "gemm", "reduce", "cumsum", "atomic", "annotate_layout", "use_swizzle",
    "sync_threads", "print",
)


@functools.cache
def get_op(name: str, pure: bool = False) -> ir.Op:
    """Return the ``tl.<name>`` Op, registering it on first use."""
    full = f"tl.{name}"
    with _REGISTER_LOCK:
        if full not in set(_ir_ffi.ListOpNames()):
            _ir_ffi.RegisterOp(full, name)
            op = ir.Op.get(full)
            op.set_attr("TCallEffectKind", PURE if pure else OPAQUE)
            op.set_attr("TScriptPrinterName", f"tl_{name}")
    return ir.Op.get(full)


def region(buffer, starts: Sequence, extents: Sequence, access: int) -> ir.Call:
    """Build ``tl.region(buffer[starts], access, *extents)``; access: 1 read, 2 write, 3 both."""
    load = tirx.BufferLoad(buffer, [as_expr(s) for s in starts])
    args = [load, tirx.IntImm("int32", access)] + [as_expr(e) for e in extents]
    return ir.Call(get_op("region", pure=True), args, ret_ty="handle")


def as_expr(value):
    """Convert Python numbers to TIR immediates; pass PrimExprs through."""
    if isinstance(value, bool):
        return tirx.IntImm("bool", int(value))
    if isinstance(value, int):
        # int32 where it fits, else the narrowest of int64 / uint64 that holds it, as tirx.const
        # (``T.if_then_else(lane < 16, 0x0000FFFF, 0xFFFF0000)``: a shuffle mask)
        if -(1 << 31) <= value < (1 << 31):
            return tirx.IntImm("int32", value)
        return tirx.IntImm("int64" if -(1 << 63) <= value < (1 << 63) else "uint64", value)
    if isinstance(value, float):
        return tirx.FloatImm("float32", value)
    if isinstance(value, str):
        return ir.StringImm(value)
    return value


def emit(name: str, args: Sequence) -> None:
    """Emit ``Evaluate(tl.<name>(*args))`` into the current IR builder frame."""
    from tvm.tirx.script.builder import ir as builder

    call = ir.Call(get_op(name), [as_expr(a) for a in args], ret_ty="handle")
    builder.evaluate(call)


def is_tl_call(node, name: str | None = None) -> bool:
    """True if ``node`` is a Call of a tl Op (of ``tl.<name>`` when name is given)."""
    if not isinstance(node, ir.Call) or not isinstance(node.op, ir.Op):
        return False
    op_name = node.op.name
    if name is None:
        return op_name.startswith("tl.")
    return op_name == f"tl.{name}"
