"""Language-server tests: a real ``tilelang-lsp`` process over stdio, driven by ``LspClient``.

One server (push diagnostics, execution allowed) serves the whole session; tests that need other
settings start their own. Documents are opened from ``tests/lsp/fixtures`` copied into a temporary
folder, so each test owns its URIs. Every wait is on an event (a response, or diagnostics for a
given version), bounded by a timeout; nothing sleeps and hopes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lsp_testing import FIXTURES, Doc, start_server


@pytest.fixture(scope="session")
def lsp_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("lsp")
    for f in FIXTURES.glob("*.py"):
        shutil.copy(f, folder / f.name)
    return folder


@pytest.fixture(scope="session")
def server(lsp_dir):
    client = start_server(lsp_dir)
    yield client
    assert client.shutdown() == 0


@pytest.fixture
def open_doc(server, lsp_dir):
    opened = []

    def make(name: str, text: str | None = None, as_name: str | None = None) -> Doc:
        path = lsp_dir / (as_name or name)
        if text is None:
            text = (FIXTURES / name).read_text()
        path.write_text(text)
        doc = Doc(server, path, text)
        opened.append(doc)
        return doc

    yield make
    for doc in opened:
        doc.close()
