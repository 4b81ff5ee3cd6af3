"""``tilelang.carver.roller``: the records a configuration recommendation is made of.

Contract: ``Hint`` (one recommended tile configuration) and the rasterization plans
(``NoRasterization``, ``Rasterization2DRow``, ``Rasterization2DColumn``) a hint carries. The
recommenders themselves are the templates' (``tilelang.carver.template``); upstream's general
roller policies over arbitrary PrimFuncs are not provided.
"""

from tilelang.carver.roller.hint import Hint
from tilelang.carver.roller.rasterization import (NoRasterization, Rasterization, Rasterization2DColumn,
                                                  Rasterization2DRow)

__all__ = ["Hint", "NoRasterization", "Rasterization", "Rasterization2DColumn", "Rasterization2DRow"]
