"""2:4 structured-sparsity metadata facts shared by the compressor and ``T.gemm_sp``.

Contract (upstream's ``tilelang.cuda.intrinsics.sparse_layout``):
- ``GROUP_CONFIG[dtype] = (kept, group)``: ``kept`` nonzeros out of every ``group`` consecutive
  K elements (2:4 for 16- and 8-bit types, 1:2 for float32).
- The metadata of a row is natural row-major: each group takes 4 bits (the in-group indices of
  its kept elements, 2 bits each, first kept element lowest), groups packed little-endian into
  the metadata integer. ``get_e_factor(a_dtype, meta_dtype)`` = logical K elements one metadata
  element describes; ``get_e_replicate_factor(a_dtype)`` = how many consecutive lanes of an
  ``mma.sp`` quad hold the same metadata value (2 for 16/32-bit A, else 1).
Depends only on ``tilelang.language.dtypes``.
"""

from __future__ import annotations

import tilelang.language.dtypes as _dtypes
from tilelang.language.dtypes import dtype

__all__ = ["GROUP_CONFIG", "get_e_factor", "get_e_replicate_factor"]

GROUP_CONFIG: dict = {
    _dtypes.float: (1, 2),
    _dtypes.float16: (2, 4),
    _dtypes.bfloat16: (2, 4),
    _dtypes.int8: (2, 4),
    _dtypes.uint8: (2, 4),
    _dtypes.float8_e4m3: (2, 4),
    _dtypes.float8_e5m2: (2, 4),
}

_METADATA_BITS_PER_GROUP = 4


def get_e_factor(a_dtype, meta_dtype) -> int:
    """Logical ``a_dtype`` elements (along K) indexed by one ``meta_dtype`` metadata element."""
    try:
        _, group = GROUP_CONFIG[dtype(a_dtype)]
    except KeyError:
        raise ValueError(f"2:4 sparsity has no group configuration for {a_dtype}; supported: "
                         f"{', '.join(str(k) for k in GROUP_CONFIG)}") from None
    return dtype(meta_dtype).bits // _METADATA_BITS_PER_GROUP * group


def get_e_replicate_factor(a_dtype) -> int:
    """Consecutive lanes sharing one metadata value (2 for 16/32-bit A, 1 for 8-bit)."""
    return 1 if dtype(a_dtype).bits <= 8 else 2
