"""The layouts a compile inferred, printed and drawn (upstream's ``TL_LAYOUT_VISUALIZATION_*``).

    @tilelang.jit(pass_configs={tilelang.PassConfigKey.TL_LAYOUT_VISUALIZATION_ENABLE: True,
                                tilelang.PassConfigKey.TL_LAYOUT_VISUALIZATION_FORMATS: "png,svg"})

Contract (``visualize(layouts, pass_configs)``, called by the compile pipeline right after
``infer_layouts``; it does nothing unless ``tl.layout_visualization_enable`` is true):

- ``tl.layout_visualization_formats``: "txt", "png", "pdf", "svg", "all" or a comma list of them
  (case-insensitive). Unset or empty means "txt". Anything else raises ``ValueError`` naming the
  bad entries and the valid ones.
- Every fragment layout is printed (``txt`` or not), like upstream::

      C_local inferred layout:
        Shape: [32, 32] -> [8]
        Thread: _j // 16 * 64 + _i // 16 * 32 + _i % 8 * 4 + _j % 8 // 2
        Index:  [_j % 16 // 8 * 4 + _i // 8 % 2 * 2 + _j % 2]
        Replicate:  1

- For each picture format, every fragment is drawn to ``./tmp/<buffer>_layout.<format>`` (as
  upstream; the directory is relative to the working directory) by
  ``tilelang.tools.plot_layout``: T<thread> / L<register> on a colour per thread; a tile of more
  than ``LABEL_CELLS`` elements is drawn in colour only (hue per warp, shade per lane) in png and
  pdf, its SVG keeps the labels. A swizzled shared-memory tile is drawn too,
  ``./tmp/<buffer>_layout.<format>``: its first 8 rows (the swizzle's period), each cell the
  element's offset in shared memory. Without matplotlib, png/pdf become SVG with a warning.
- The list of files written is returned (and each is printed as ``Saved <path>``).
"""

from __future__ import annotations

ENABLE = "tl.layout_visualization_enable"
FORMATS = "tl.layout_visualization_formats"
VALID = ("txt", "png", "pdf", "svg", "all")
LABEL_CELLS = 4096
SAVE_DIRECTORY = "./tmp"
SWIZZLE_ROWS = 8


def formats_of(pass_configs: dict) -> list:
    """The formats ``tl.layout_visualization_formats`` asks for (see the module docstring)."""
    value = pass_configs.get(FORMATS) or ""
    if not isinstance(value, str):
        raise ValueError(f"{FORMATS} must be a string such as 'png' or 'txt,svg', not {type(value).__name__}")
    names = [f.strip().lower() for f in value.split(",") if f.strip()] or ["txt"]
    bad = [f for f in names if f not in VALID]
    if bad:
        raise ValueError(f"invalid formats for TL_LAYOUT_VISUALIZATION_FORMATS ({FORMATS}): {bad}; "
                         f"valid formats are {list(VALID)}, or a comma-separated list of them (e.g. 'txt,png')")
    if "all" in names:
        return ["txt", "png", "pdf", "svg"]
    return list(dict.fromkeys(names))


def fragment_text(name: str, frag) -> str:
    """Upstream's printout of one inferred fragment: shape, thread and register expressions."""
    from tilelang.layout.layout import bound_analyzer, placeholders

    shape = [int(s) for s in frag.shape]
    variables = placeholders(len(shape))
    ana = bound_analyzer(tuple(shape), variables)
    thread = ana.simplify(frag.thread_of(variables))
    index = ana.simplify(frag.local_of(variables))
    return "\n".join([f"{name} inferred layout:",
                      f"  Shape: {shape} -> [{frag.local_size}]",
                      f"  Thread: {thread}",
                      f"  Index:  [{index}]",
                      f"  Replicate:  {frag.replication}"])


def visualize(layouts, pass_configs: dict, save_directory=SAVE_DIRECTORY) -> list:
    """Print and draw the inferred layouts when the pass configs ask for it; the files written."""
    if not pass_configs.get(ENABLE) or layouts is None:
        return []
    formats = formats_of(pass_configs)
    pictures = ",".join(f for f in formats if f != "txt")
    written = []
    for buf, frag in layouts.fragments.items():
        print(fragment_text(buf.name, frag))
        if pictures:
            written += _draw_fragment(buf.name, frag, pictures, save_directory)
    if pictures:
        for buf, shared in layouts.shared.items():
            if getattr(shared, "group", 1) > 1 and len(shared.shape) >= 2:
                written += _draw(buf.name, shared, pictures, save_directory, max_rows=SWIZZLE_ROWS)
    for path in written:
        print(f"Saved {path}")
    return written


def _draw_fragment(name, frag, formats, directory) -> list:
    from tilelang.tools.plot_layout import layout_picture, write_picture

    cells = 1
    for s in frag.shape:
        cells *= int(s)
    if cells <= LABEL_CELLS:
        return _draw(name, frag, formats, directory)
    written = []
    if "svg" in formats.split(","):
        written += write_picture(layout_picture(frag, name), directory, f"{name}_layout", "svg")
    drawn = ",".join(f for f in formats.split(",") if f != "svg")
    if drawn:
        grid = layout_picture(frag, name, by_warp=True)
        grid.legend += f" · {cells} elements: labels left out"
        side = max(grid.rows, grid.cols)
        written += write_picture(grid, directory, f"{name}_layout", drawn, labels=False,
                                 cell_inches=min(0.3, 12.0 / side))
    return written


def _draw(name, layout, formats, directory, max_rows=None) -> list:
    from tilelang.tools.plot_layout import layout_picture, write_picture

    return write_picture(layout_picture(layout, name, max_rows=max_rows), directory, f"{name}_layout", formats)
