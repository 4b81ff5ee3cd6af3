"""The fragment hover's layout picture (``tilelang_lsp.layout_images``): over the real server the
hover links a valid PNG; drawn once and cached by hash; SVG without matplotlib; never a crash; and
the server process still never imports the compiler to draw it."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from lsp_testing import REPO, Doc
from tilelang_lsp import layout_images

pytestmark = pytest.mark.timeout(180)

IMAGE = re.compile(r"!\[(\w+) layout\]\((file://[^)\s]+)\)")


def linked_file(markdown: str) -> Path:
    found = IMAGE.search(markdown)
    assert found is not None, markdown[-600:]
    return Path(unquote(urlparse(found.group(2)).path))


def png_size(path: Path) -> tuple:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_fragment_hover_links_a_valid_png(server, lsp_dir):
    image = pytest.importorskip("matplotlib.image")
    doc = Doc(server, lsp_dir / "gemm_kernel.py")
    try:
        assert doc.diagnostics() == []
        text = doc.at("textDocument/hover", "C_local = ", 2)["contents"]["value"]
    finally:
        doc.close()
    assert "fragment `float32[128, 128]`" in text
    png = linked_file(text)
    assert png.suffix == ".png" and png.is_file()
    assert png.parent == lsp_dir / "cache" / "layout_images"      # TILELANG_CACHE_DIR of the test server
    width, height = png_size(png)
    assert image.imread(png).shape[:2] == (height, width) and min(width, height) > 300


ENTRY = {"dtype": "float32", "fragment": {"picture": {
    "shape": [16, 16], "num_threads": 32,
    "axes": [["thread", 4, 1, 1, 2], ["thread", 8, 4, 0, 1], ["local", 2, 1, 1, 1], ["local", 2, 2, 0, 8],
             ["local", 2, 4, 1, 8]]}}}


def test_drawn_once_then_served_from_the_cache(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    first = layout_images.fragment_image("acc", ENTRY)
    assert isinstance(first, Path) and first.suffix == ".png" and first.parent == tmp_path / "layout_images"
    stamp = first.stat().st_mtime_ns

    def fail(*args):
        raise AssertionError("drawn again")

    monkeypatch.setattr(layout_images, "_draw", fail)
    assert layout_images.fragment_image("acc", ENTRY) == first and first.stat().st_mtime_ns == stamp
    other = {**ENTRY, "dtype": "float16"}     # another picture: another file (the name hashes the content)
    assert "drawing it failed (AssertionError" in layout_images.fragment_image("acc", other)


def test_without_matplotlib_the_picture_is_svg(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(layout_images, "_has_matplotlib", lambda: False)
    markdown = layout_images.fragment_image_markdown("acc", ENTRY)
    svg = linked_file(markdown)
    assert svg.suffix == ".svg" and "matplotlib is not installed" in markdown
    assert svg.read_text().count("<rect") == 256


def test_a_failure_leaves_a_note_not_an_exception(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "file"))
    (tmp_path / "file").write_text("not a directory")
    note = layout_images.fragment_image_markdown("acc", ENTRY)
    assert note.startswith("_no picture: drawing it failed") and "](" not in note
    assert layout_images.fragment_image_markdown("acc", {"fragment": {}}).startswith("_no picture")


def test_drawing_never_imports_the_compiler(tmp_path):
    code = ("import sys, json\n"
            "from tilelang_lsp import hover\n"
            f"entry = json.loads({json.dumps(json.dumps(ENTRY))})\n"
            "entry.update(scope='local.fragment', shape=[16, 16], bytes=1024)\n"
            "entry['fragment'].update(num_threads=32, local_size=8, origin='T.gemm', registers=8, replication=1,\n"
            "                         axes=[], table=[[[0, 0]]], describe='acc')\n"
            "text = hover.buffer_markdown('acc', entry, {}, None)\n"
            "assert '![acc layout](file://' in text, text\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tilelang', 'tvm', 'torch')))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={"TILELANG_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
