"""Pictures of layouts as coloured grids: the drawing half of ``plot_layout``, shared with the editor.

This module imports nothing from ``tilelang`` (nor tvm): the language server loads it by file path
(``tilelang_lsp.layout_images``) to draw a fragment from its hover data without importing the
compiler. Its inputs are plain Python values:

- ``fragment_cells(shape, num_threads, axes)``: the cells of a fragment in the compiler's axis
  form (``axes``: ``(kind, extent, stride, dim, coef)`` tuples, ``tilelang.layout.axes``): for
  each element, the threads holding it and its register index;
- ``fragment_grid(cells, num_threads, title, by_warp=False)``: such cells as a ``Grid`` labelled
  ``T<thread>`` / ``L<register>`` and coloured by thread (hue by lane, shade by warp, so the 32
  lanes of a warp are told apart and the warps too), or with ``by_warp`` by warp (hue) and
  lane (shade), for pictures too dense for labels; replicas list every thread;
- ``layout_grid(flat, out_total, title)``: a ``T.Layout`` drawn by where each element lands (its
  output index, flattened): coloured by 8-element chunk of the output for rows of 16 or more
  (the unit a 16-byte swizzle moves for 16-bit types), else by a gradient over the output.

A ``Grid`` is drawn on its input space: N-D shapes are flattened by the caller (last dimension the
columns, the others merged row-major into the rows). ``svg(grid)`` writes SVG by hand (one
``<rect>`` per cell, so it needs no package); ``save_matplotlib(grid, paths)`` writes png/pdf/svg
with matplotlib (ImportError when it is missing: the caller decides the fallback). Both draw the
same colours, a title, a legend line, row and column numbers, and grid lines. ``labels=False``
draws colours only (big tiles in the editor: thousands of labels are neither fast nor readable).
"""

from __future__ import annotations

import colorsys
import html
from dataclasses import dataclass, field

__all__ = ["Grid", "fragment_cells", "fragment_grid", "layout_grid", "save_matplotlib", "svg", "text_colour",
           "gradient", "thread_colour", "warp_colour"]

WARP = 32
_SVG_CELL = 44


@dataclass
class Grid:
    """What a picture shows: ``labels[r][c]`` (lines split by newline) on ``fills[r][c]`` ('#rrggbb')."""

    title: str
    labels: list
    fills: list
    legend: str = ""
    notes: list = field(default_factory=list)

    @property
    def rows(self) -> int:
        return len(self.labels)

    @property
    def cols(self) -> int:
        return len(self.labels[0]) if self.labels else 0


# ----- colours ------------------------------------------------------------------------------------
def _hex(r: float, g: float, b: float) -> str:
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def thread_colour(tid: int, num_threads: int = WARP) -> str:
    """Lane -> hue (golden-ratio steps: neighbouring lanes differ most); warp -> shade."""
    lane, warp = tid % WARP, tid // WARP
    hue = (lane * 0.6180339887) % 1.0
    if num_threads <= WARP:
        sat, val = 0.42, 0.98
    else:
        sat, val = ((0.38, 0.99), (0.58, 0.86), (0.24, 0.94), (0.66, 0.76))[warp % 4]
    return _hex(*colorsys.hsv_to_rgb(hue, sat, val))


def text_colour(fill: str) -> str:
    """Black on light cells, white on dark ones."""
    r, g, b = (int(fill[k:k + 2], 16) / 255 for k in (1, 3, 5))
    return "#000000" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "#ffffff"


_GRADIENT = ["#f7a6a6", "#fbc99a", "#fbeaa0", "#c9e8a9", "#a8dcd1", "#a9c6ec", "#c9b4e6"]


def gradient(x: float) -> str:
    """A pastel colour for ``x`` in [0, 1] (red, orange, yellow, green, teal, blue, violet)."""
    x = min(max(x, 0.0), 1.0) * (len(_GRADIENT) - 1)
    i = min(int(x), len(_GRADIENT) - 2)
    t = x - i
    a = [int(_GRADIENT[i][k:k + 2], 16) for k in (1, 3, 5)]
    b = [int(_GRADIENT[i + 1][k:k + 2], 16) for k in (1, 3, 5)]
    return "#" + "".join(f"{round(p + (q - p) * t):02x}" for p, q in zip(a, b))


# ----- grids --------------------------------------------------------------------------------------
def _rows_cols(shape) -> tuple:
    shape = [int(s) for s in shape]
    rows = 1
    for s in shape[:-1]:
        rows *= s
    return rows, (shape[-1] if shape else 1)


def fragment_cells(shape, num_threads: int, axes) -> list:
    """``cells[r][c] = (threads, register)`` of a fragment in axis form (see the module docstring)."""
    shape = [int(s) for s in shape]
    rows, cols = _rows_cols(shape)
    local_size = 1
    for kind, extent, _stride, _dim, _coef in axes:
        if kind == "local":
            local_size *= int(extent)
    strides, s = [], 1
    for extent in reversed(shape):
        strides.append(s)
        s *= extent
    strides.reverse()
    cells = [[[[], 0] for _ in range(cols)] for _ in range(rows)]
    for tid in range(int(num_threads)):
        for reg in range(local_size):
            flat = 0
            for kind, extent, stride, dim, coef in axes:
                if dim is None:
                    continue
                src = tid if kind == "thread" else reg
                flat += (src // stride) % extent * coef * strides[dim]
            cell = cells[flat // cols][flat % cols]
            cell[0].append(tid)
            cell[1] = reg
    return [[(tuple(sorted(t)), r) for t, r in row] for row in cells]


def warp_colour(tid: int) -> str:
    """Warp -> hue, lane -> a slight shade: the warp partition of a big tile at a glance."""
    lane, warp = tid % WARP, tid // WARP
    return _hex(*colorsys.hsv_to_rgb((warp * 0.6180339887 + 0.05) % 1.0, 0.5, 0.97 - 0.2 * ((lane * 0.618) % 1.0)))


def fragment_grid(cells, num_threads: int, title: str, by_warp: bool = False) -> Grid:
    """A fragment's cells (``fragment_cells``, or computed from a ``T.Fragment``) as a ``Grid``,
    coloured by thread, or (``by_warp``: pictures whose cells are too small for labels) by warp."""
    labels = [[f"T{'/'.join(map(str, threads)) if threads else '-'}\nL{reg}" for threads, reg in row] for row in cells]
    colour = warp_colour if by_warp else (lambda t: thread_colour(t, num_threads))
    fills = [[colour(threads[0]) if threads else "#eeeeee" for threads, _ in row] for row in cells]
    rep = max((len(t) for row in cells for t, _ in row), default=1)
    legend = (f"colour = warp (shade = lane) · {num_threads} threads" if by_warp else
              f"T: thread, L: register index; colour = thread · {num_threads} threads")
    if rep > 1:
        legend += f", each element held by {rep}"
    return Grid(title, labels, fills, legend)


def source_grid(sources, total: int, title: str) -> Grid:
    """A layout drawn on its output space: ``sources[r][c]`` = the input coordinates landing on that
    output cell (a tuple) and their flat index, or None; coloured by the flat input index."""
    labels = [["" if s is None else "[" + ",".join(map(str, s[0])) + "]" for s in row] for row in sources]
    fills = [["#eeeeee" if s is None else gradient(s[1] / max(total - 1, 1)) for s in row] for row in sources]
    return Grid(title, labels, fills, "output view: cell = input coordinates landing there; colour = input position")


def layout_grid(flat, out_total: int, title: str) -> Grid:
    """A ``T.Layout`` drawn by output index: ``flat[r][c]`` = flattened output index of the element."""
    rows, cols = len(flat), len(flat[0]) if flat else 0
    chunked = cols >= 16 and cols % 8 == 0
    def fill(f):
        if chunked:   # the chunk's place in an output row as wide as the input's
            return gradient((f // 8 % (cols // 8)) / max(cols // 8 - 1, 1))
        return gradient(f / max(out_total - 1, 1))
    legend = ("cell = output index; colour = 8-element chunk of the output row it lands in" if chunked
              else "cell = output index; colour = output position")
    return Grid(title, [[str(f) for f in row] for row in flat], [[fill(f) for f in row] for row in flat], legend)


# ----- SVG ----------------------------------------------------------------------------------------
def svg(grid: Grid, labels: bool = True) -> str:
    """The picture as SVG text: title, legend, numbered rows and columns, one ``<rect>`` per cell."""
    rows, cols, c = grid.rows, grid.cols, _SVG_CELL
    width, height = (cols + 1) * c, (rows + 2.5) * c
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:g}" height="{height:g}" '
           f'viewBox="0 0 {width:g} {height:g}" font-family="DejaVu Sans Mono, monospace">',
           f'<text x="{width / 2:g}" y="{c * 0.55:g}" text-anchor="middle" font-size="15" '
           f'font-weight="bold">{html.escape(grid.title)}</text>',
           f'<text x="{width / 2:g}" y="{c * 1.0:g}" text-anchor="middle" font-size="11" fill="#444">'
           f'{html.escape(grid.legend)}</text>']
    for j in range(cols):
        out.append(f'<text x="{(j + 1.5) * c:g}" y="{c * 2.3:g}" text-anchor="middle" font-size="10" '
                   f'fill="#666">{j}</text>')
    for i in range(rows):
        y = (i + 2.5) * c
        out.append(f'<text x="{c * 0.8:g}" y="{y + c / 2 + 3:g}" text-anchor="end" font-size="10" '
                   f'fill="#666">{i}</text>')
        for j in range(cols):
            x = (j + 1) * c
            out.append(f'<rect x="{x:g}" y="{y:g}" width="{c}" height="{c}" fill="{grid.fills[i][j]}" '
                       'stroke="#666" stroke-width="0.6"/>')
            if not labels:
                continue
            lines = grid.labels[i][j].split("\n")
            size = min(11, c * 1.6 / max(len(line) for line in lines))
            top = y + c / 2 - (len(lines) - 1) * size * 0.6 + size * 0.35
            for k, line in enumerate(lines):
                out.append(f'<text x="{x + c / 2:g}" y="{top + k * size * 1.2:.1f}" text-anchor="middle" '
                           f'font-size="{size:.1f}" fill="{text_colour(grid.fills[i][j])}">{html.escape(line)}</text>')
    return "\n".join(out + ["</svg>"]) + "\n"


# ----- matplotlib ---------------------------------------------------------------------------------
def _rgb(colour: str) -> tuple:
    return tuple(int(colour[k:k + 2], 16) / 255 for k in (1, 3, 5))


def save_matplotlib(grid: Grid, paths, labels: bool = True, cell_inches: float | None = None,
                    dpi: int = 110) -> None:
    """Write the picture to every path (format from its suffix) with matplotlib. A bare ``Figure``
    (no pyplot): the caller's backend and open figures are left alone."""
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure

    rows, cols = grid.rows, grid.cols
    if cell_inches is None:
        longest = max((len(line) for row in grid.labels for lab in row for line in lab.split("\n")), default=1)
        cell_inches = 0.55 if labels else min(0.3, 12.0 / max(rows, cols))
        if labels:
            cell_inches = max(cell_inches, 0.1 * longest)
    margin_x, margin_top, margin_bottom = 0.6, 0.95, 0.25
    grid_w, grid_h = cols * cell_inches, rows * cell_inches
    width = max(grid_w + 2 * margin_x, 0.075 * len(grid.legend) + 0.4, 0.12 * len(grid.title) + 0.4)
    height = grid_h + margin_top + margin_bottom
    fig = Figure(figsize=(width, height))
    ax = fig.add_axes(((width - grid_w) / 2 / width, margin_bottom / height, grid_w / width, grid_h / height))
    palette = sorted({f for row in grid.fills for f in row})
    index = {f: k for k, f in enumerate(palette)}
    ax.pcolormesh([[index[f] for f in row] for row in grid.fills], cmap=ListedColormap(palette),
                  vmin=-0.5, vmax=len(palette) - 0.5, edgecolors="#555555" if cell_inches >= 0.12 else "face",
                  linewidth=0.6 if cell_inches >= 0.2 else 0.2)
    if cell_inches < 0.12:      # cells too small for edges: a line every 8 rows and columns
        ax.hlines(range(8, rows, 8), 0, cols, colors="#333333", linewidth=0.5)
        ax.vlines(range(8, cols, 8), 0, rows, colors="#333333", linewidth=0.5)
    step_r = 1 if rows <= 32 else 8
    step_c = 1 if cols <= 32 else 8
    ax.set_xticks([j + 0.5 for j in range(0, cols, step_c)], [str(j) for j in range(0, cols, step_c)])
    ax.set_yticks([i + 0.5 for i in range(0, rows, step_r)], [str(i) for i in range(0, rows, step_r)])
    tick = 8 if labels else 7
    ax.tick_params(length=0, labelsize=tick, labelcolor="#555555", top=True, labeltop=True,
                   bottom=False, labelbottom=False)
    for spine in ax.spines.values():
        spine.set_linewidth(1.2)
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    if labels:
        pts = cell_inches * 72
        for i in range(rows):
            for j in range(cols):
                parts = grid.labels[i][j].split("\n")
                size = min(10.0, pts * 0.9 / (0.62 * max(len(p) for p in parts)), pts * 0.8 / (1.2 * len(parts)))
                ax.text(j + 0.5, i + 0.5, "\n".join(parts), ha="center", va="center", fontsize=size,
                        family="DejaVu Sans Mono", linespacing=1.1, parse_math=False,
                        color=text_colour(grid.fills[i][j]))
    fig.text(0.5, 1 - 0.28 / height, grid.title, ha="center", va="center", fontsize=12, weight="bold")
    fig.text(0.5, 1 - 0.55 / height, grid.legend, ha="center", va="center", fontsize=8.5, color="#444444")
    for path in paths:
        fig.savefig(path, dpi=dpi, facecolor="white")

