"""Block rasterization plans: the order in which a 2-D grid of output tiles is visited.

Contract: ``NoRasterization()`` (row-major launch order); ``Rasterization2DRow(panel_width)`` /
``Rasterization2DColumn(panel_width)`` visit the grid in panels ``panel_width`` tiles wide along
rows / columns, so tiles that share operand panels run close in time (L2 reuse). In a kernel the
plan is ``T.use_swizzle(panel_size=plan.panel_width, order=plan.order)``; ``NoRasterization`` has
``panel_width`` 0 and no swizzle. Plans compare equal by kind and width.
"""

from __future__ import annotations


class Rasterization:
    order: str | None = None

    def __init__(self, panel_width: int = 0) -> None:
        self.panel_width_ = int(panel_width)

    @property
    def panel_width(self) -> int:
        return self.panel_width_

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.panel_width == other.panel_width

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.panel_width))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.panel_width})" if self.panel_width else f"{type(self).__name__}()"


class NoRasterization(Rasterization):
    def __init__(self) -> None:
        super().__init__(0)


class Rasterization2DRow(Rasterization):
    order = "row"

    def __init__(self, panel_width: int = 4) -> None:
        super().__init__(panel_width)


class Rasterization2DColumn(Rasterization):
    order = "column"

    def __init__(self, panel_width: int = 4) -> None:
        super().__init__(panel_width)
