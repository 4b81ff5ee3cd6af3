"""sm_100 operations beyond tensor memory (``tmem.py``): declared, refused.

Contract: ``T.clc_try_cancel_multicast``, ``T.clc_is_canceled``, ``T.clc_get_first_ctaid_x``
(cluster launch control), ``T.tcgen05_cp_warpx4``, ``T.tcgen05_sf_warp_transpose`` and
``T.tcgen05_gemm_blockscaled`` (block-scaled tcgen05 MMA and its scale-factor moves) take any
arguments and fail where they are called, with a ``NotImplementedError`` the front end locates,
naming the operation and its buffer operands: this TileLang generates no sm_100 code (its
targets are sm_80 and sm_90a). While ``tilelang.language.tmem.for_checks()`` is active the three
``clc_*`` calls build an opaque placeholder call (``tl::<name>()``, int32 / uint32) instead, so a
persistent kernel scheduled by cluster launch control builds for the static checks; nothing
lowers it.
"""

from __future__ import annotations

_WHY = "this TileLang does not generate sm_100 {what} code (targets: sm_80, sm_90a)"


def _names(args) -> str:
    out = []
    for a in args:
        name = getattr(a, "name", None) or getattr(getattr(a, "buffer", None), "name", None) \
            or getattr(getattr(a, "source", None), "name", None)
        if isinstance(name, str):
            out.append(name)
    return ", ".join(out)


def _refused(name, what, for_checks=None):
    def op(*args, **kwargs):
        from .tmem import checking

        if for_checks is not None and checking():
            from tvm import tirx
            return tirx.call_extern(for_checks, f"tl::{name}")
        raise NotImplementedError(f"T.{name}({_names(args)}): " + _WHY.format(what=what))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"sm_100 {what}: refused (see ``tilelang.language.sm100``)."
    return op


_CLC = "cluster launch control (clusterlaunchcontrol)"
clc_try_cancel_multicast = _refused("clc_try_cancel_multicast", _CLC, "int32")
clc_is_canceled = _refused("clc_is_canceled", _CLC, "int32")
clc_get_first_ctaid_x = _refused("clc_get_first_ctaid_x", _CLC, "uint32")
tcgen05_cp_warpx4 = _refused("tcgen05_cp_warpx4", "tcgen05.cp (shared to tensor memory)")
tcgen05_sf_warp_transpose = _refused("tcgen05_sf_warp_transpose", "tcgen05 scale-factor")
tcgen05_gemm_blockscaled = _refused("tcgen05_gemm_blockscaled", "block-scaled tcgen05 MMA")

__all__ = ["clc_get_first_ctaid_x", "clc_is_canceled", "clc_try_cancel_multicast", "tcgen05_cp_warpx4",
           "tcgen05_gemm_blockscaled", "tcgen05_sf_warp_transpose"]
