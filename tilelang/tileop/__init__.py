"""``tilelang.tileop``: upstream's home of tile-operator definitions; here only the names user
code imports from it (``from tilelang.tileop.base import GemmWarpPolicy``). Our tile operators
are lowered in ``tilelang.transform`` and declared in ``tilelang.language``."""

from tilelang.tileop.base import GemmWarpPolicy

__all__ = ["GemmWarpPolicy"]
