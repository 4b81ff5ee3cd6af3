"""Draw a layout as a coloured grid (upstream's ``tilelang.tools.plot_layout``).

    plot_layout(T.Fragment(...), name="acc")                      # ./tmp/acc.pdf
    plot_layout(make_full_bank_swizzled_layout(8, 64, 16), formats="png,svg")

Contract:
- The input is a ``T.Fragment`` or the compiler's fragment (``tilelang.layout.axes.AxisFragment``,
  what layout inference gives a buffer): each cell shows ``T<thread>`` and ``L<register index>``,
  coloured by thread (replicas list every thread, ``T0/64``); or a ``T.Layout``: each cell shows
  where the element lands, its output index flattened row-major over the output shape; or a
  shared-memory layout of the compiler (``tilelang.layout.swizzle.SharedLayout``): the same, with
  the element offset. An N-D input is drawn flattened to 2-D: the last dimension is the columns
  and every leading dimension is merged row-major into the rows (``[2, 4, 8]`` draws 8 rows of 8).
  Upstream's ``T.Layout`` options: ``grid_shape=(rows, cols)`` redraws the input row-major on
  another grid of as many cells; ``view="output"`` draws the output space instead, each cell
  labelled with the input coordinates that land there (empty cells grey). Other values of either
  raise ``ValueError``.
- ``formats``: "svg", "png", "pdf", "all" or a comma list. png and pdf are drawn with matplotlib,
  SVG by ``tilelang.tools.layout_render`` itself (same colours; one ``<rect>`` per cell). When
  matplotlib is missing, png/pdf are written as SVG instead with a ``UserWarning`` naming it.
- Files go to ``save_directory/name.<format>``; the paths written are returned (upstream returns
  None) and printed when ``verbose``. ``colormap`` is accepted for upstream's signature; the
  colours are ours (hue per lane, shade per warp). Drawing and colours: ``layout_render``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from tilelang.tools import layout_render

__all__ = ["cell_labels", "layout_picture", "plot_layout", "write_picture"]


def _flat_shape(shape) -> tuple:
    shape = [int(d) for d in shape]
    if not shape:
        raise ValueError("plot_layout: the layout has no input dimensions")
    rows = 1
    for d in shape[:-1]:
        rows *= d
    return rows, shape[-1]


def _unflatten(flat: int, shape) -> list:
    out = []
    for d in reversed([int(s) for s in shape]):
        out.append(flat % d)
        flat //= d
    return out[::-1]


def _ints(exprs) -> list:
    from tilelang.tir_utils import eval_int

    return [eval_int(e) for e in exprs]


def _is_axis_fragment(layout) -> bool:
    return hasattr(layout, "owners") and hasattr(layout, "axes") and hasattr(layout, "num_threads")


def _axis_cells(frag) -> list:
    axes = [(a.kind, a.extent, a.stride, a.dim, a.coef) for a in frag.axes]
    return layout_render.fragment_cells(frag.shape, frag.num_threads, axes)


def _user_fragment_cells(frag) -> tuple:
    """(cells, thread count) of a ``T.Fragment``: numpy over the whole tile when the maps are plain
    index arithmetic, else one element at a time."""
    import numpy as np

    shape = [int(d) for d in frag.get_input_shape()]
    rows, cols = _flat_shape(shape)
    reps = max(1, int(getattr(frag, "replicate_size", 1) or 1))
    try:
        from tilelang.layout.axes import evaluate_index_expr
        from tilelang.layout.layout import REPLICA, placeholders

        grid = np.indices((reps, *shape), dtype=np.int64)
        env = list(zip(placeholders(len(shape)), list(grid[1:]))) + [(REPLICA, grid[0])]
        threads = np.broadcast_to(np.asarray(evaluate_index_expr(frag.forward_thread, env)), grid.shape[1:])
        threads = threads.reshape(reps, rows, cols)
        index = [np.broadcast_to(np.asarray(evaluate_index_expr(e, env)), grid.shape[1:])[0]
                 for e in frag.forward_index]
        if index:
            out_shape = [int(v.max()) + 1 for v in index]
            local = np.zeros(tuple(shape), dtype=np.int64)
            for v, extent in zip(index, out_shape):
                local = local * extent + v
            local = local.reshape(rows, cols)
        else:   # no register map: each thread numbers its elements in row-major order
            local, seen = np.zeros((rows, cols), dtype=np.int64), {}
            for i in range(rows):
                for j in range(cols):
                    t = int(threads[0, i, j])
                    local[i, j] = seen.get(t, 0)
                    seen[t] = local[i, j] + 1
        cells = [[(tuple(int(t) for t in threads[:, i, j]), int(local[i, j])) for j in range(cols)]
                 for i in range(rows)]
    except (ValueError, AttributeError, TypeError):
        cells = []
        for i in range(rows):
            cells.append([])
            for j in range(cols):
                idx = _unflatten(i * cols + j, shape)
                ts = tuple(_ints([frag.map_forward_thread(idx, r)])[0] for r in range(reps))
                local = 0
                for v, extent in zip(_ints(frag.map_forward_index(idx)), [int(d) for d in frag.get_output_shape()]):
                    local = local * extent + v
                cells[-1].append((ts, local))
    count = max(t for row in cells for ts, _ in row for t in ts) + 1
    return cells, count


def _layout_flat(layout) -> tuple:
    """(flat output index per cell, output size) of a ``T.Layout``."""
    import numpy as np

    shape = [int(d) for d in layout.get_input_shape()]
    rows, cols = _flat_shape(shape)
    out_shape = [int(d) for d in layout.get_output_shape()]
    from tilelang.layout.layout import _evaluate_outputs

    outs = _evaluate_outputs(shape, layout.forward_index)
    if outs is not None:
        flat = np.zeros(tuple(shape), dtype=np.int64)
        for v, extent in zip(outs, out_shape):
            flat = flat * extent + v
        flat = flat.reshape(rows, cols).tolist()
    else:
        flat = []
        for i in range(rows):
            flat.append([])
            for j in range(cols):
                f = 0
                for v, extent in zip(_ints(layout.map_forward_index(_unflatten(i * cols + j, shape))), out_shape):
                    f = f * extent + v
                flat[-1].append(f)
    return flat, int(np.prod(out_shape))


def _shared_flat(layout, max_rows: int | None) -> tuple:
    """(element offset per cell, tile size, rows drawn) of a compiler ``SharedLayout``."""
    import numpy as np
    from tvm import tirx

    shape = [int(d) for d in layout.shape]
    rows, cols = _flat_shape(shape)
    drawn = rows if max_rows is None else min(rows, max_rows)
    variables = [tirx.Var(f"i{k}", "int32") for k in range(len(shape))]
    expr = layout.offset(variables)
    grid = np.indices(tuple(shape), dtype=np.int64).reshape(len(shape), rows, cols)[:, :drawn]
    try:
        from tilelang.layout.axes import evaluate_index_expr

        values = evaluate_index_expr(expr, list(zip(variables, grid)))
        flat = np.broadcast_to(np.asarray(values), (drawn, cols)).tolist()
    except ValueError:
        flat = [[_ints([layout.offset([int(v) for v in grid[:, i, j]])])[0] for j in range(cols)] for i in range(drawn)]
    return flat, int(np.prod(shape)), drawn


def layout_picture(layout, name: str = "layout", max_rows: int | None = None, by_warp: bool = False,
                   view: str = "input", grid_shape=None) -> layout_render.Grid:
    """The ``layout_render.Grid`` of any layout ``plot_layout`` takes (see the module docstring);
    ``max_rows`` limits a shared-memory layout to its first rows (its pattern repeats);
    ``by_warp`` colours a fragment by warp instead of thread (pictures without labels)."""
    view = _view(view)
    grid_shape = _grid_shape(grid_shape, layout) if grid_shape is not None and view == "input" else None
    if _is_axis_fragment(layout):
        shape = list(layout.shape)
        grid = layout_render.fragment_grid(_axis_cells(layout), layout.num_threads, "", by_warp=by_warp)
        grid.title = (f"{name}: fragment {shape} over {layout.num_threads} threads, "
                      f"{layout.local_size} register(s) per thread")
        return grid
    if hasattr(layout, "map_forward_thread"):
        cells, count = _user_fragment_cells(layout)
        grid = layout_render.fragment_grid(cells, count, "", by_warp=by_warp)
        per_thread = max(r for row in cells for _, r in row) + 1
        grid.title = f"{name}: fragment {list(layout.get_input_shape())} over {count} threads, {per_thread} per thread"
        return grid
    if hasattr(layout, "offset") and hasattr(layout, "elem_bytes"):
        flat, total, drawn = _shared_flat(layout, max_rows)
        grid = layout_render.layout_grid(flat, total, "")
        rows = _flat_shape(layout.shape)[0]
        shown = f" (rows 0-{drawn - 1} of {rows})" if drawn < rows else ""
        grid.title = f"{name}: shared {list(layout.shape)}, {layout.describe()}{shown}"
        grid.legend = "cell = element offset in shared memory; colour = 8-element chunk it lands in"
        return grid
    if hasattr(layout, "map_forward_index"):
        flat, total = _layout_flat(layout)
        shape, out_shape = list(layout.get_input_shape()), list(layout.get_output_shape())
        title = f"{name}: {shape} -> {out_shape}"
        if view == "output":
            rows, cols = _flat_shape(out_shape)
            sources = [[None] * cols for _ in range(rows)]
            for k, f in enumerate(v for row in flat for v in row):
                sources[f // cols][f % cols] = (tuple(_unflatten(k, shape)), k)
            return layout_render.source_grid(sources, len(flat) * len(flat[0]), title + " (output view)")
        if grid_shape is not None:
            values = [v for row in flat for v in row]
            flat = [values[r * grid_shape[1]:(r + 1) * grid_shape[1]] for r in range(grid_shape[0])]
        grid = layout_render.layout_grid(flat, total, title)
        return grid
    raise TypeError(f"plot_layout: expected a T.Fragment or T.Layout, not {type(layout).__name__}")


def _view(view) -> str:
    norm = str(view or "input").strip().lower()
    for name, spellings in (("input", ("input", "in", "src")), ("output", ("output", "out", "dst"))):
        if norm in spellings:
            return name
    raise ValueError(f"plot_layout: unknown view {view!r}; use 'input' (the default) or 'output'")


def _grid_shape(grid_shape, layout) -> tuple:
    if len(grid_shape) != 2 or any(int(g) <= 0 for g in grid_shape):
        raise ValueError(f"plot_layout: grid_shape must be (rows, cols) of positive sizes, got {grid_shape!r}")
    rows, cols = (int(g) for g in grid_shape)
    total = 1
    for d in layout.get_input_shape() if hasattr(layout, "get_input_shape") else layout.shape:
        total *= int(d)
    if rows * cols != total:
        raise ValueError(f"plot_layout: grid_shape {rows}x{cols} = {rows * cols} cells, "
                         f"the layout has {total} elements")
    return rows, cols


def cell_labels(layout) -> tuple:
    """(text, colour key) of every cell: fragments ``"T<threads>\\nL<register>"`` keyed by the first
    thread; layouts the flat output index, keyed by it."""
    if _is_axis_fragment(layout) or hasattr(layout, "map_forward_thread"):
        cells = _axis_cells(layout) if _is_axis_fragment(layout) else _user_fragment_cells(layout)[0]
        text = [[f"T{'/'.join(map(str, ts))}\nL{r}" for ts, r in row] for row in cells]
        return text, [[ts[0] if ts else -1 for ts, _ in row] for row in cells]
    flat, _ = _layout_flat(layout)
    return [[str(f) for f in row] for row in flat], flat


def _formats(formats) -> list:
    if not isinstance(formats, str):
        raise TypeError(f"formats must be a string such as 'svg', 'png,pdf' or 'all', not {type(formats).__name__}")
    names = ["pdf", "png", "svg"] if formats.strip().lower() == "all" else [
        f.strip().lower() for f in formats.split(",") if f.strip()]
    bad = [f for f in names if f not in ("pdf", "png", "svg")]
    if bad or not names:
        raise ValueError(f"unknown plot format(s) {bad or formats!r}; use svg, png, pdf or all")
    return list(dict.fromkeys(names))


def write_picture(grid: layout_render.Grid, directory, name: str, formats: str = "pdf", labels: bool = True,
                  cell_inches: float | None = None) -> list:
    """Write ``grid`` as ``directory/name.<format>`` for each format (see the module docstring);
    ``labels=False`` draws colours only, ``cell_inches`` the size of a cell (default: fit the labels)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    wanted = _formats(formats)
    drawn = [f for f in wanted if f != "svg"]
    written = []
    if drawn:
        paths = [directory / f"{name}.{f}" for f in drawn]
        try:
            layout_render.save_matplotlib(grid, paths, labels=labels, cell_inches=cell_inches)
            written += paths
        except ImportError:
            warnings.warn(f"plot_layout: {', '.join(drawn)} need matplotlib, which is not installed; "
                          f"writing {name}.svg instead", stacklevel=3)
            wanted = sorted(set(wanted) | {"svg"})
    if "svg" in wanted:
        path = directory / f"{name}.svg"
        path.write_text(layout_render.svg(grid, labels=labels))
        written.append(path)
    return written


def plot_layout(layout, save_directory="./tmp", name: str = "layout", colormap=None, verbose: bool = False,
                formats: str = "pdf", view: str = "input", grid_shape=None) -> list:
    """Draw ``layout`` (see the module docstring); returns the files written."""
    del colormap
    picture = layout_picture(layout, name, view=view, grid_shape=grid_shape)
    written = write_picture(picture, save_directory, name, formats)
    if verbose:
        for path in written:
            print(f"Saved {path}")
    return written
