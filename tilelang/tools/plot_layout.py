"""Draw a layout as a grid (upstream's ``tilelang.tools.plot_layout``).

    plot_layout(T.Fragment(...), name="acc")           # ./tmp/acc.pdf (or .svg)
    plot_layout(make_full_bank_swizzled_layout(8, 64, 16), formats="svg")

Contract:
- The input is a ``Fragment`` (each cell shows ``T<thread>`` and ``L<local index>``, coloured
  by thread; replicas list every thread) or a ``Layout`` (each cell shows where the element
  lands: its output index, flattened row-major over the output shape, coloured by 16-byte chunk
  of the row it lands in). An N-D input is drawn flattened to 2-D: its last dimension is the
  columns and every leading dimension is merged row-major into the rows (``[2, 4, 8]`` draws
  8 rows of 8; a 1-D input is one row).
- ``formats``: "svg", "png", "pdf", "all" or a comma list. SVG is written by this module; png and
  pdf need matplotlib. When matplotlib is missing those formats are written as SVG instead, with
  a ``UserWarning`` naming the package. Files go to ``save_directory/name.<format>``; the paths
  written are returned (and printed when ``verbose``).
"""

from __future__ import annotations

import colorsys
import html
import warnings
from pathlib import Path

__all__ = ["cell_labels", "plot_layout"]

_CELL = 44


def _ints(exprs) -> list[int]:
    from tilelang.tir_utils import eval_int

    return [eval_int(e) for e in exprs]


def _shape(layout) -> list[int]:
    """(rows, cols) of the drawing: leading dimensions merged into rows, the last one the columns."""
    shape = [int(d) for d in layout.get_input_shape()]
    if not shape:
        raise ValueError("plot_layout: the layout has no input dimensions")
    rows = 1
    for d in shape[:-1]:
        rows *= d
    return [rows, shape[-1]]


def _index(layout, i: int, j: int) -> list[int]:
    """The input index drawn at row ``i``, column ``j`` (see ``_shape``)."""
    shape = [int(d) for d in layout.get_input_shape()]
    lead = []
    for d in reversed(shape[:-1]):
        lead.append(i % d)
        i //= d
    return lead[::-1] + [j]


def cell_labels(layout) -> tuple[list[list[str]], list[list[int]]]:
    """(text, colour key) of every cell of the drawing (see the module docstring)."""
    rows, cols = _shape(layout)
    if hasattr(layout, "map_forward_thread"):
        reps = max(1, int(getattr(layout, "replicate_size", 1) or 1))
        text, keys = [], []
        for i in range(rows):
            text.append([])
            keys.append([])
            for j in range(cols):
                idx = _index(layout, i, j)
                threads = [_ints([layout.map_forward_thread(idx, r)])[0] for r in range(reps)]
                local = _ints(layout.map_forward_index(idx))
                text[-1].append(f"T{','.join(map(str, threads))}\nL{','.join(map(str, local))}")
                keys[-1].append(threads[0])
        return text, keys
    out_shape = [int(d) for d in layout.get_output_shape()]
    text, keys = [], []
    for i in range(rows):
        text.append([])
        keys.append([])
        for j in range(cols):
            flat = 0
            for value, extent in zip(_ints(layout.map_forward_index(_index(layout, i, j))), out_shape):
                flat = flat * extent + value
            text[-1].append(str(flat))
            keys[-1].append(flat % max(cols, 1) // 8)
    return text, keys


def _colour(key: int, n: int) -> str:
    r, g, b = colorsys.hsv_to_rgb((key % max(n, 1)) / max(n, 1), 0.35, 0.97)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def _svg(text, keys, title: str) -> str:
    rows, cols = len(text), len(text[0])
    n = len({k for row in keys for k in row})
    width, height = (cols + 1) * _CELL, (rows + 2) * _CELL
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace">',
             f'<text x="{width / 2}" y="{_CELL * 0.6}" text-anchor="middle" font-size="14">{html.escape(title)}</text>']
    for j in range(cols):
        parts.append(f'<text x="{(j + 1.5) * _CELL}" y="{_CELL * 1.8}" text-anchor="middle" font-size="10">{j}</text>')
    for i, row in enumerate(text):
        y = (i + 2) * _CELL
        parts.append(f'<text x="{_CELL * 0.5}" y="{y + _CELL / 2}" text-anchor="middle" font-size="10">{i}</text>')
        for j, label in enumerate(row):
            x = (j + 1) * _CELL
            parts.append(f'<rect x="{x}" y="{y}" width="{_CELL}" height="{_CELL}" fill="{_colour(keys[i][j], n)}" '
                         'stroke="#555" stroke-width="0.5"/>')
            for k, line in enumerate(label.split("\n")):
                parts.append(f'<text x="{x + _CELL / 2}" y="{y + 16 + 12 * k}" text-anchor="middle" '
                             f'font-size="9">{html.escape(line)}</text>')
    return "\n".join(parts + ["</svg>"]) + "\n"


def _formats(formats) -> list[str]:
    if not isinstance(formats, str):
        raise TypeError(f"formats must be a string such as 'svg', 'png,pdf' or 'all', not {type(formats).__name__}")
    names = ["pdf", "png", "svg"] if formats.strip().lower() == "all" else [
        f.strip().lower() for f in formats.split(",") if f.strip()]
    bad = [f for f in names if f not in ("pdf", "png", "svg")]
    if bad or not names:
        raise ValueError(f"unknown plot format(s) {bad or formats!r}; use svg, png, pdf or all")
    return names


def _matplotlib_save(text, keys, title: str, paths: list[Path]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, cols = len(text), len(text[0])
    n = len({k for row in keys for k in row})
    fig, ax = plt.subplots(figsize=(max(4, cols * 0.6), max(3, rows * 0.6)))
    for i in range(rows):
        for j in range(cols):
            ax.add_patch(plt.Rectangle((j, rows - 1 - i), 1, 1, facecolor=_colour(keys[i][j], n), edgecolor="#555"))
            ax.text(j + 0.5, rows - 0.5 - i, text[i][j], ha="center", va="center", fontsize=6)
    ax.set_xlim(0, cols)
    ax.set_ylim(0, rows)
    ax.set_axis_off()
    ax.set_title(title)
    for path in paths:
        fig.savefig(path, bbox_inches="tight")
    plt.close(fig)


def plot_layout(layout, save_directory="./tmp", name: str = "layout", colormap=None, verbose: bool = False,
                formats: str = "pdf") -> list[Path]:
    """Draw ``layout`` (see the module docstring); returns the files written."""
    text, keys = cell_labels(layout)
    directory = Path(save_directory)
    directory.mkdir(parents=True, exist_ok=True)
    wanted = _formats(formats)
    raster = [f for f in wanted if f != "svg"]
    written = []
    if raster:
        try:
            paths = [directory / f"{name}.{f}" for f in raster]
            _matplotlib_save(text, keys, name, paths)
            written += paths
        except ImportError:
            warnings.warn(f"plot_layout: {', '.join(raster)} need matplotlib, which is not installed; "
                          f"writing {name}.svg instead", stacklevel=2)
            wanted = sorted(set(wanted) | {"svg"})
    if "svg" in wanted:
        path = directory / f"{name}.svg"
        path.write_text(_svg(text, keys, name))
        written.append(path)
    if verbose:
        for path in written:
            print(f"Saved {path}")
    return written
