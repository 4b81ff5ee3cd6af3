"""Shared helpers of the language-server tests (imported by conftest and the tests)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tilelang_lsp.editor_client import LspClient

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def start_server(tmp: Path, options: dict | None = None, capabilities: dict | None = None,
                 name: str = "server") -> LspClient:
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "TILELANG_CACHE_DIR": str(tmp / "cache")}
    client = LspClient([sys.executable, "-m", "tilelang_lsp.server", "--log-level", "WARNING",
                        "--log-file", str(tmp / f"{name}.log")], cwd=str(REPO), env=env)
    client.initialize(str(tmp), options, capabilities)
    return client



class Doc:
    """An open document: its uri, text and version, with helpers to edit it and find positions."""

    def __init__(self, client: LspClient, path: Path, text: str | None = None):
        self.client, self.path = client, path
        self.uri = path.resolve().as_uri()
        self.text = path.read_text() if text is None else text
        self.version = 1
        client.open(self.uri, self.text, self.version)

    def replace(self, text: str) -> int:
        self.version += 1
        self.text = text
        self.client.change(self.uri, self.version, text)
        return self.version

    def diagnostics(self, timeout: float = 90.0) -> list:
        return self.client.wait_diagnostics(self.uri, self.version, timeout)

    def position(self, needle: str, offset: int = 0, nth: int = 0) -> tuple:
        """(line, character) of the ``nth`` occurrence of ``needle`` plus ``offset`` (ASCII text)."""
        start = -1
        for _ in range(nth + 1):
            start = self.text.index(needle, start + 1)
        line = self.text.count("\n", 0, start)
        return line, start - (self.text.rfind("\n", 0, start) + 1) + offset

    def at(self, method: str, needle: str, offset: int = 0, **extra):
        line, ch = self.position(needle, offset)
        return self.client.at(method, self.uri, line, ch, **extra)

    def close(self) -> None:
        self.client.close(self.uri)
