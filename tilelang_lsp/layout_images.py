"""Runs in the language-server process.

The picture of a fragment's layout for its hover: ``fragment_image_markdown(name, entry)`` draws
the layout from the hover data (``entry["fragment"]["picture"]``: shape, thread count and the
axis form, ``tilelang.analysis.summary``) into a PNG and returns a Markdown image plus a link to
it (VS Code shows file images in hovers; other editors show the link).

- Lazy and cached: nothing is drawn until a fragment is hovered; the file is named by a hash of
  what it shows (layout, buffer name, dtype, this module's ``VERSION``), so an unchanged layout is
  drawn once, across edits and sessions. Files live in ``$TILELANG_CACHE_DIR/layout_images``
  (default ``~/.cache/tilelang/layout_images``) and are written atomically (temporary file, then
  rename).
- Fast: tiles of more than ``LABEL_CELLS`` elements are drawn in colour only (hue per warp, shade
  per lane), at most about ``MAX_PIXELS`` wide; smaller ones carry ``T<thread>`` / ``L<register>``
  on a colour per thread.
- Safe: without matplotlib the picture is an SVG (written without any package); any failure to
  draw or write leaves the image out and says why in one line. Nothing here raises.

The drawing is ``tilelang/tools/layout_render.py``, loaded by file path so that this process never
imports ``tilelang`` (tvm): that module imports only the standard library (and matplotlib).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import sys
from pathlib import Path

log = logging.getLogger("tilelang_lsp")

VERSION = 1                 # bump when the pictures change: old cache entries are then not reused
LABEL_CELLS = 256           # at most this many elements get text labels
MAX_PIXELS = 900            # longest side of a colour-only picture, about
_RENDER = None


def cache_dir() -> Path:
    root = os.environ.get("TILELANG_CACHE_DIR")
    return (Path(root).expanduser() if root else Path("~/.cache/tilelang").expanduser()) / "layout_images"


def _render_module():
    """``tilelang.tools.layout_render``, executed on its own (tilelang's ``__init__`` is not run)."""
    global _RENDER
    if _RENDER is None:
        spec = importlib.util.find_spec("tilelang")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("the tilelang package is not installed")
        path = Path(list(spec.submodule_search_locations)[0]) / "tools" / "layout_render.py"
        name = "tilelang_lsp._layout_render"
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module          # dataclasses look their module up while defining
        try:
            module_spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        _RENDER = module
    return _RENDER


def _has_matplotlib() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def _key(name: str, entry: dict, picture: dict, suffix: str) -> str:
    text = json.dumps([VERSION, name, entry.get("dtype"), picture, suffix], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _draw(name: str, entry: dict, picture: dict, path: Path) -> None:
    render = _render_module()
    shape, threads = picture["shape"], picture["num_threads"]
    cells = render.fragment_cells(shape, threads, [tuple(a) for a in picture["axes"]])
    labels = len(cells) * len(cells[0]) <= LABEL_CELLS
    grid = render.fragment_grid(cells, threads, f"{name}: {entry.get('dtype', '')}{list(shape)} over {threads} threads",
                                by_warp=not labels)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}{path.suffix}")
    if path.suffix == ".svg":
        tmp.write_text(render.svg(grid, labels=labels))
    else:
        cell = None if labels else min(0.3, MAX_PIXELS / 80 / max(grid.rows, grid.cols))
        render.save_matplotlib(grid, [tmp], labels=labels, cell_inches=cell, dpi=80)
    os.replace(tmp, path)


def fragment_image(name: str, entry: dict) -> Path | str:
    """The picture's path (drawn now unless cached), or a sentence saying why there is none."""
    picture = (entry.get("fragment") or {}).get("picture")
    if not picture:
        return "no picture: this hover data has no layout to draw"
    suffix = ".png" if _has_matplotlib() else ".svg"
    path = cache_dir() / f"{_key(name, entry, picture, suffix)}{suffix}"
    if path.is_file():
        return path
    try:
        _draw(name, entry, picture, path)
    except Exception as err:  # noqa: BLE001 - a picture is optional: the hover must still come
        log.warning("layout picture of %s failed: %s: %s", name, type(err).__name__, err)
        return f"no picture: drawing it failed ({type(err).__name__}: {err})"
    return path


def fragment_image_markdown(name: str, entry: dict) -> str:
    """Markdown for the hover: the image and a link to it, or a one-line note."""
    found = fragment_image(name, entry)
    if isinstance(found, str):
        return f"_{found}_"
    uri = found.resolve().as_uri()
    note = "" if found.suffix == ".png" else " (SVG: matplotlib is not installed)"
    return f"![{name} layout]({uri})\n\n[layout picture of {name}]({uri}){note}"
