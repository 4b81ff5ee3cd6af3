"""sm_100 tensor memory (TMEM) and tcgen05 MMA: declarations only.

Contract:
- ``T.alloc_tmem(shape, dtype)``: a 2-D buffer in scope ``shared.tmem`` (Blackwell's per-SM
  tensor memory, the accumulator of tcgen05 MMA). It builds like any allocation, so a kernel that
  declares one parses; compiling it fails with ``TL0002`` located at the allocation, because this
  TileLang generates no tcgen05 / tensor-memory code (its targets are sm_80 and sm_90a).
- ``T.tcgen05_gemm(A, B, C, ...)``: fails where it is called, naming the operands, with the same
  reason and the sm_90a spelling (``T.gemm`` into a fragment emits wgmma).
"""

from __future__ import annotations

from tvm.tirx.script.builder import ir as builder

from .dtypes import normalize_dtype

TMEM = "shared.tmem"
_WHY = "this TileLang does not generate sm_100 tcgen05 / tensor-memory code (targets: sm_80, sm_90a)"


def alloc_tmem(shape, dtype="float32"):
    """A tensor-memory tile (sm_100); see the module docstring."""
    shape = list(shape) if isinstance(shape, (list, tuple)) else [shape]
    if len(shape) != 2:
        raise ValueError(f"T.alloc_tmem: tensor memory tiles are 2-D ([rows, columns]), got shape {shape}")
    return builder.alloc_buffer(shape, normalize_dtype(dtype), scope=TMEM)


def tcgen05_gemm(A, B, C, *args, **kwargs):
    """sm_100 tcgen05 MMA; see the module docstring."""
    names = ", ".join(str(getattr(b, "name", getattr(getattr(b, "buffer", None), "name", "?"))) for b in (A, B, C))
    raise NotImplementedError(f"T.tcgen05_gemm({names}): {_WHY}; on sm_90a accumulate into a fragment with "
                              "T.gemm(A_shared, B_shared, C_local), which emits wgmma")
