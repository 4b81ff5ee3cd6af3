"""``from tilelang.tileop.base import GemmWarpPolicy``: the warp partition policy of ``T.gemm``
(the same enum as ``T.GemmWarpPolicy``)."""

from tilelang.language.tile import GemmWarpPolicy

__all__ = ["GemmWarpPolicy"]
