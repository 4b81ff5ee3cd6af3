"""What ``T.use_swizzle`` does to the L2 traffic of a tiled GEMM: an estimate for the hover.

Contract: pure functions of integers; no TVM. The block order is the compiler's
(``lower_tile_ops.Lowerer._block_swizzle``) in row order: panels of ``panel`` block rows
(blockIdx.y), and within a panel the blocks go down the rows first, then to the next column
(left to right in even panels, right to left in odd ones, as upstream's rasterization2DRow).
(Column order linearises the blocks differently from the launch order; no estimate for it.)
A wave is ``wave`` consecutive blocks of the launch (one per SM); per K step it reads one A tile
per block row it touches and one B tile per block column. Fewer bytes per wave means fewer L2
reads and DRAM refills, and on a power-capped H200 a higher clock: 128x256 tiles at 8192^3 ran
1-2 % faster with the panel this estimate calls best (16) than with 10, and 3-7 % faster than in
plain launch order (benchmarks/RESULTS.md, session 8).
"""

from __future__ import annotations

import functools

NEAR_BEST = 0.01     # panels within 1 % of the fewest bytes count as the best


def block_of(lin: int, panel: int, gx: int, gy: int) -> tuple[int, int]:
    """(block row, block column) of the ``lin``-th block launched (blockIdx.y * gx + blockIdx.x)
    under ``T.use_swizzle(panel)`` in row order."""
    per_group = gx * panel
    first = (lin // per_group) * panel
    size = min(gy - first, panel)
    rem = lin % per_group
    col = rem // size
    return first + rem % size, (gx - 1 - col if (lin // per_group) % 2 else col)


def wave_bytes(panel: int | None, gx: int, gy: int, wave: int, a_tile: int, b_tile: int,
               max_waves: int = 16) -> float:
    """Bytes of A and B tiles one wave of ``wave`` consecutive blocks reads per K step (each block
    row it touches costs ``a_tile``, each block column ``b_tile``), averaged over the grid's
    waves (at most ``max_waves``); ``panel`` None: plain order (blockIdx.x fastest)."""
    n = gx * gy
    starts = list(range(0, n, wave))[:max_waves]
    total = 0
    for s in starts:
        blocks = [(i // gx, i % gx) if panel is None else block_of(i, panel, gx, gy)
                  for i in range(s, min(n, s + wave))]
        total += len({r for r, _ in blocks}) * a_tile + len({c for _, c in blocks}) * b_tile
    return total / len(starts)


def raster_estimate(panel: int, gx: int, gy: int, wave: int, a_tile: int, b_tile: int) -> dict:
    """Bytes per K step of a wave with ``panel``, with the best panel (the nearest to ``panel`` of
    those within ``NEAR_BEST`` of the fewest bytes: a panel 0.3 % off the minimum is not worth
    changing) and in plain order; ``a_tile`` / ``b_tile``: one block's A / B tile per K step."""
    cost = dict(_panel_costs(gx, gy, wave, a_tile, b_tile))
    least = min(cost.values())
    best = min(cost, key=lambda p: (cost[p] > least * (1 + NEAR_BEST), abs(p - panel), cost[p]))
    mine = cost.get(panel) if panel in cost else wave_bytes(panel, gx, gy, wave, a_tile, b_tile)
    return {"panel": panel, "wave": min(wave, gx * gy), "bytes": mine, "best_panel": best,
            "best_bytes": cost[best], "plain_bytes": wave_bytes(None, gx, gy, wave, a_tile, b_tile)}


@functools.lru_cache(maxsize=64)
def _panel_costs(gx: int, gy: int, wave: int, a_tile: int, b_tile: int) -> tuple:
    """((panel, bytes per wave), ...) for every panel up to 64: the simulation costs ~30 ms for a
    large grid, and a kernel rebuilt while its author types keeps the same grid and tiles."""
    return tuple((p, wave_bytes(p, gx, gy, wave, a_tile, b_tile)) for p in range(1, min(gy, 64) + 1))
