"""Integer helpers upstream exports as ``tilelang.math`` (and at the top of ``tilelang``)."""

from __future__ import annotations

__all__ = ["cdiv", "next_power_of_2"]


def next_power_of_2(x: int) -> int:
    """The smallest power of two >= ``x`` (1 for ``x`` <= 1)."""
    x = int(x)
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def cdiv(a, b):
    """Ceiling division: of TIR expressions, ``T.ceildiv``; of anything else (ints, floats, torch
    tensors of chunk lengths on the host...), ``(a + b - 1) // b`` as upstream computes it."""
    from tvm import ir

    if isinstance(a, ir.PrimExpr) or isinstance(b, ir.PrimExpr):
        from tilelang.language import ceildiv

        return ceildiv(a, b)
    return (a + b - 1) // b
