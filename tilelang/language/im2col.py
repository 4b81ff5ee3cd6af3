"""``T.im2col``: gather a 2-D convolution's input patches into a shared tile (``T.c2d_im2col``: the
deprecated spelling of it).

Contract: ``T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)`` with ``img`` an
NHWC global tensor and ``col`` a ``(block_M, block_K)`` shared tile emits ``tl.im2col(img region
(read), col region (write), nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy)``.
Row ``i`` of the tile is output pixel ``m = nhw_step * block_M + i`` (``n, oh, ow`` row-major over
``N x OH x OW``), column ``j`` is reduction index ``k = c_step * block_K + j`` over ``(kh, kw, c)``
row-major (``KH x KW x C``); the element is ``img[n, oh*stride + kh*dilation - pad,
ow*stride + kw*dilation - pad, c]``, zero where that lies in the padding or ``m`` / ``k`` are past
their ends. ``tilelang.transform.lower_im2col`` lowers it. Operand kinds are checked here (a
``TypeError`` / ``ValueError`` at the user's line); shapes and scopes when lowering.
"""

from __future__ import annotations

import warnings

from ._ops import emit
from .tile import READ, WRITE, _to_region

EVICTION_POLICIES = {"evict_normal": 0, "evict_first": 1, "evict_last": 2}


def _static_int(value, what: str) -> int:
    value = getattr(value, "value", value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"T.im2col: {what} must be a Python int (a compile-time constant), got {value!r}")
    return value


def im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None, annotations=None):
    """Gather the ``col`` tile (output pixels x ``kernel*kernel*C`` reduction columns) of the
    convolution of the NHWC tensor ``img`` (square ``kernel``, ``stride``, ``dilation`` and zero
    ``pad``), block ``nhw_step`` of the rows and ``c_step`` of the columns.

    ``eviction_policy`` ("evict_normal", "evict_first", "evict_last") is a cache hint;
    ``annotations`` are upstream's pass hints and carry nothing here."""
    del annotations
    kernel = _static_int(kernel, "kernel")
    stride = _static_int(stride, "stride")
    dilation = _static_int(dilation, "dilation")
    pad = _static_int(pad, "pad")
    for name, v, low in (("kernel", kernel, 1), ("stride", stride, 1), ("dilation", dilation, 1), ("pad", pad, 0)):
        if v < low:
            raise ValueError(f"T.im2col: {name} must be >= {low}, got {v}")
    if eviction_policy is None:
        policy = 0
    elif eviction_policy in EVICTION_POLICIES:
        policy = EVICTION_POLICIES[eviction_policy]
    else:
        raise ValueError(f"T.im2col: eviction_policy must be one of {sorted(EVICTION_POLICIES)} or None, "
                         f"got {eviction_policy!r}")
    img_r = _to_region(img, READ, what="im2col")
    col_r = _to_region(col, WRITE, what="im2col")
    emit("im2col", [img_r, col_r, nhw_step, c_step, kernel, stride, dilation, pad, policy])


def c2d_im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None, annotations=None):
    """Deprecated spelling of :func:`im2col` (upstream removes it in 0.14.0)."""
    warnings.warn("T.c2d_im2col is deprecated and will be removed in 0.14.0; use T.im2col instead",
                  DeprecationWarning, stacklevel=2)
    im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy, annotations)


__all__ = ["c2d_im2col", "im2col"]
