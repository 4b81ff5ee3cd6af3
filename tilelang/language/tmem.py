"""sm_100 tensor memory (TMEM) and tcgen05 MMA: declarations only.

Contract:
- ``T.alloc_tmem(shape, dtype)``: a 2-D buffer in scope ``shared.tmem`` (Blackwell's per-SM
  tensor memory, the accumulator of tcgen05 MMA). It builds like any allocation, so a kernel that
  declares one parses; compiling it fails with ``TL0002`` located at the allocation, because this
  TileLang generates no tcgen05 / tensor-memory code (its targets are sm_80 and sm_90a).
- ``T.tcgen05_gemm(A, B, C, ...)`` and ``T.tcgen05_mma_arrive(mbar)``: fail where they are
  called, naming the operands, with the same reason and the sm_90a spelling (``T.gemm`` into a
  fragment emits wgmma).
- ``for_checks()``: while this context is active (``tilelang-check`` and the language server
  build kernels under it, never the compiler), the declarations build IR the analyses read:
  ``T.alloc_tmem`` allocates a fragment (the block's accumulator tile, which is what tensor
  memory is to a shape or dataflow check), also with leading stage modes (``[stages, rows,
  columns]``, a multi-buffered accumulator); the context's list records it as tensor memory, and
  a ``T.Parallel`` loop storing to every element follows, so that layout inference places each.
  ``T.tcgen05_gemm`` emits ``tl.tcgen05_gemm`` with ``T.gemm``'s argument layout (A, B, C
  regions, transpose flags, policy, clear_accum, k_pack 1, wg_wait 0), then use_2cta (the pair
  of CTAs each holds half of B's N); the completion mbarrier is not recorded.
  ``T.tcgen05_mma_arrive`` is one mbarrier arrival. Nothing lowers these: a kernel built this
  way is for the checks only.
"""

from __future__ import annotations

import contextlib
import contextvars

from tvm.tirx.script.builder import ir as builder

from .dtypes import normalize_dtype

TMEM = "shared.tmem"
FOR_CHECKS_SCOPE = "local.fragment"   # what a tensor-memory tile is to the checks: the CTA's accumulator
_WHY = "this TileLang does not generate sm_100 tcgen05 / tensor-memory code (targets: sm_80, sm_90a)"
_FOR_CHECKS = contextvars.ContextVar("tilelang_tmem_for_checks", default=None)


@contextlib.contextmanager
def for_checks():
    """Build sm_100 declarations as IR for the static checks (see the module docstring); yields
    the list that collects ``(buffer, shape, dtype)`` of every tensor-memory tile allocated (the
    buffer takes the user's name once bound)."""
    found = []
    token = _FOR_CHECKS.set(found)
    try:
        yield found
    finally:
        _FOR_CHECKS.reset(token)


def checking() -> bool:
    """Whether ``for_checks()`` is active."""
    return _FOR_CHECKS.get() is not None


def alloc_tmem(shape, dtype="float32"):
    """A tensor-memory tile (sm_100); see the module docstring."""
    shape = list(shape) if isinstance(shape, (list, tuple)) else [shape]
    found = _FOR_CHECKS.get()
    if found is not None and len(shape) >= 2:
        buf = builder.alloc_buffer(shape, normalize_dtype(dtype), scope=FOR_CHECKS_SCOPE)
        found.append((buf, list(shape), str(buf.dtype)))
        _touch_all(buf, shape)
        return buf
    if len(shape) != 2:
        raise ValueError(f"T.alloc_tmem: tensor memory tiles are 2-D ([rows, columns]), got shape {shape}")
    return builder.alloc_buffer(shape, normalize_dtype(dtype), scope=TMEM)


def _touch_all(buf, shape) -> None:
    """``for i, j in T.Parallel(*shape): buf[i, j] = 0``: the whole tile is the block's, so layout
    inference places every element of it (a copy of part of it then has a layout to follow)."""
    from tvm import tirx

    from .loops import Parallel

    with contextlib.ExitStack() as stack:
        loop_vars = [stack.enter_context(frame) for frame in Parallel(*shape).loop_frames()]
        builder.buffer_store(buf, tirx.const(0, str(buf.dtype)), loop_vars)


def _names(*operands) -> str:
    return ", ".join(str(getattr(b, "name", getattr(getattr(b, "buffer", None), "name", "?"))) for b in operands)


def tcgen05_gemm(A, B, C, transpose_A=False, transpose_B=False, policy=0, clear_accum=False, *args, mbar=None,
                 use_2cta=False, **kwargs):
    """sm_100 tcgen05 MMA; see the module docstring."""
    if not checking():
        raise NotImplementedError(f"T.tcgen05_gemm({_names(A, B, C)}): {_WHY}; on sm_90a accumulate into a "
                                  "fragment with T.gemm(A_shared, B_shared, C_local), which emits wgmma")
    from ._ops import emit
    from .tile import READ, READ_WRITE, _to_region

    a = _to_region(A, READ, what="tcgen05_gemm")
    b = _to_region(B, READ, what="tcgen05_gemm")
    c = _to_region(C, READ_WRITE, what="tcgen05_gemm")
    clear = clear_accum if not isinstance(clear_accum, bool) else int(clear_accum)
    emit("tcgen05_gemm", [a, b, c, int(bool(transpose_A)), int(bool(transpose_B)), int(policy), clear, 1, 0,
                          int(bool(use_2cta))])


def tcgen05_mma_arrive(mbar, arrive_2cta=False):
    """sm_100: arrive on ``mbar`` once the tcgen05 MMAs issued so far complete; see the module
    docstring."""
    if not checking():
        raise NotImplementedError(f"T.tcgen05_mma_arrive({_names(mbar)}): {_WHY}")
    from .barrier import mbarrier_arrive

    return mbarrier_arrive(mbar)
