"""Runs in the language-server process.

``tilelang-lsp``: the TileLang language server (pygls 2, stdio by default, ``--tcp HOST:PORT``).

Process model: this process parses documents with ``ast`` (symbols, definitions, completion,
hover targets) and never imports tvm, torch or ``tilelang`` (start-up ~1 s, ~45 MiB; a kernel
that hangs cannot freeze the editor; ``tests/lsp/test_lsp_imports.py`` guards it). Everything
that executes user code or needs the compiler runs in two worker processes
(``worker_client.WorkerClient``; their side is ``worker_main``): the *check* worker
(diagnostics and the hover data computed from the same analysis, started at ``initialized``)
and the *tools* worker (code lenses: compile, run; started on first use). The workers' replies
are plain dicts; this process only formats them. ``tilelang.allowExecution = false`` keeps user
code from running at all: the checker then runs only its value-free checks and the lenses refuse.

Wiring: ``TileLangServer`` holds the settings (``server_state.Settings``), the diagnostics
scheduler (``server_state.Checks``), a ``SourceModel`` (``server_source``) per document version
and the completion index; the handlers in ``tilelang_lsp/handlers`` (one module per LSP method
family) use it. ``convert`` is the only module that builds LSP types.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from pygls.lsp.server import LanguageServer

from tilelang_lsp import convert
from tilelang_lsp.server_source import SourceModel
from tilelang_lsp.server_state import Checks, Settings
from tilelang_lsp.worker_client import WorkerClient

VERSION = "0.1.0"
TOOLS_TIMEOUT = 300.0
log = logging.getLogger("tilelang_lsp")


class TileLangServer(LanguageServer):
    """Server state shared by the handlers (see the module docstring)."""

    def __init__(self):
        super().__init__("tilelang-lsp", VERSION)
        self.settings = Settings()
        self.check_worker = WorkerClient("tilelang-lsp-check")
        self.tools_worker = WorkerClient("tilelang-lsp-tools")
        self.checks = Checks(self)
        self.pull_mode = False
        self.init_problems: list = []              # settings problems found at initialize
        self.language: dict | None = None          # {"T": [member], "tilelang": [member]}
        self.compile_results: dict = {}            # (uri, factory) -> compile lens result
        self.run_results: dict = {}                # (uri, factory) -> last Run lens result that ran
        self._models: dict = {}                    # uri -> (version, SourceModel)
        self._good_models: dict = {}               # uri -> last SourceModel that parsed
        self._locks: dict = {}

    # ----- documents ----------------------------------------------------------------------
    def snapshot(self, uri: str):
        doc = self.workspace.text_documents.get(uri)
        return None if doc is None else (doc.version, doc.source)

    @staticmethod
    def path_of(uri: str) -> str:
        return convert.uri_to_path(uri)

    def codec(self):
        return self.workspace.position_codec

    def line_index(self, text: str) -> convert.LineIndex:
        return convert.LineIndex(text, self.codec())

    def model(self, uri: str) -> SourceModel | None:
        """The ``SourceModel`` of the document's current text (last parseable one if broken)."""
        snap = self.snapshot(uri)
        if snap is None:
            return None
        cached = self._models.get(uri)
        if cached is not None and cached[0] == snap[0] and cached[1].text == snap[1]:
            model = cached[1]
        else:
            model = SourceModel(snap[1])
            self._models[uri] = (snap[0], model)
        if model.ok:
            self._good_models[uri] = model
            return model
        return self._good_models.get(uri, model)

    def forget(self, uri: str) -> None:
        self._models.pop(uri, None)
        self._good_models.pop(uri, None)

    # ----- workers ------------------------------------------------------------------------
    def _lock(self, name: str) -> asyncio.Lock:
        if name not in self._locks:
            self._locks[name] = asyncio.Lock()
        return self._locks[name]

    def check_worker_idle(self) -> bool:
        """Whether a check request would reach the (started) check worker at once."""
        return self.check_worker.ready and not self._lock("check").locked()

    async def request_check(self, message: dict, timeout: float) -> dict:
        async with self._lock("check"):
            return await asyncio.to_thread(self.check_worker.request, message, timeout)

    async def request_tools(self, message: dict, timeout: float = TOOLS_TIMEOUT) -> dict:
        async with self._lock("tools"):
            return await asyncio.to_thread(self.tools_worker.request, message, timeout)

    def stop_workers(self) -> None:
        self.check_worker.stop()
        self.tools_worker.stop()

    # ----- diagnostics --------------------------------------------------------------------
    def add_fixes(self, uri: str, result, text: str) -> None:
        from tilelang_lsp.handlers.code_action import add_missing_fixes

        try:
            add_missing_fixes(result, text, self.path_of(uri))
        except Exception:  # noqa: BLE001 - a fix builder bug must not lose the diagnostics
            log.exception("building quick fixes failed")

    def publish(self, uri: str, result, text: str) -> None:
        result.lsp = convert.to_lsp_diagnostics(result.diagnostics, text, self.codec(), self.path_of(uri), uri)
        if not self.pull_mode:
            self.text_document_publish_diagnostics(convert.publish_params(uri, result.version, result.lsp))

    def clear(self, uri: str) -> None:
        if not self.pull_mode:
            self.text_document_publish_diagnostics(convert.publish_params(uri, None, []))


def build_server() -> TileLangServer:
    from tilelang_lsp import handlers

    server = TileLangServer()
    handlers.register(server)
    return server


def _parse_args(argv):
    parser = argparse.ArgumentParser(prog="tilelang-lsp", description="The TileLang language server.")
    parser.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    parser.add_argument("--tcp", metavar="HOST:PORT", help="listen on a TCP socket instead of stdio")
    parser.add_argument("--log-file", help="write the server's log here (default: stderr)")
    parser.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    parser.add_argument("--version", action="version", version=f"tilelang-lsp {VERSION}")
    return parser.parse_args(argv)


def _freeze_heap() -> None:
    """Exempt what start-up built (modules, pygls, lsprotocol's types) from garbage collection, so
    that a full collection during an edit only visits what the session created (~30 ms less).
    No collection first: it would cost start-up ~20 ms to free a few kB."""
    import gc

    gc.freeze()


def main(argv=None) -> int:
    args = _parse_args(argv)
    handler = logging.FileHandler(args.log_file) if args.log_file else logging.StreamHandler(sys.stderr)
    logging.basicConfig(level=args.log_level, handlers=[handler],
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    server = build_server()
    _freeze_heap()
    try:
        if args.tcp:
            host, _, port = args.tcp.rpartition(":")
            server.start_tcp(host or "127.0.0.1", int(port))
        else:
            server.start_io()
    finally:
        server.stop_workers()
    return 0


if __name__ == "__main__":
    sys.exit(main())
