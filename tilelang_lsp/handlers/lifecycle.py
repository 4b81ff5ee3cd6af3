"""Runs in the language-server process.

``initialize``, ``initialized``, ``workspace/didChangeConfiguration``, ``shutdown``.

Settings come from ``initializationOptions`` (``{"allowExecution": false, ...}`` or nested under
``"tilelang"``), then from ``workspace/configuration`` (section ``tilelang``) when the client
offers it, and again on every ``didChangeConfiguration``; a change re-checks every open document.
Diagnostics are pulled (``textDocument/diagnostic``) when the client supports it and
``diagnosticMode`` is ``auto`` or ``pull``, pushed otherwise, never both.

At ``initialized`` the check worker starts importing tvm, and the completion index of
``tilelang.language`` is read from its disk cache (keyed by the language sources' mtimes) or,
once the worker is ready, fetched from it and cached; until then an index read from the sources
with ``ast`` (``completion.static_index``) serves.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import logging
import os
from pathlib import Path

from tilelang_lsp import convert

log = logging.getLogger("tilelang_lsp")


def register(server) -> None:
    from tilelang_lsp.handlers import text_sync

    @server.feature("initialize")
    def initialize(ls, params):
        ls.init_problems = ls.settings.update(params.initialization_options or {})
        mode = ls.settings.diagnostic_mode
        pull = convert.client_supports(params.capabilities, "text_document", "diagnostic") is not None
        ls.pull_mode = mode == "pull" or (mode == "auto" and pull)
        if ls.pull_mode:
            ls.feature("textDocument/diagnostic", convert.diagnostic_options())(text_sync.diagnostic)

    @server.feature("initialized")
    async def initialized(ls, params):
        ls.check_worker.start()
        ls.language = read_cached_index()
        cached = ls.language is not None
        if not cached:
            from tilelang_lsp.completion import static_index

            ls.language = static_index()
        await fetch_configuration(ls)
        for problem in getattr(ls, "init_problems", []):
            ls.window_show_message(convert.show_message_params(problem, "warning"))
        if not cached:
            asyncio.get_running_loop().create_task(load_language_index(ls))

    @server.feature("workspace/didChangeConfiguration")
    async def did_change_configuration(ls, params):
        settings = getattr(params, "settings", None)
        if isinstance(settings, dict) and settings.get("tilelang"):
            report(ls, ls.settings.update(settings))
        else:
            await fetch_configuration(ls)
        ls.checks.recheck_all()
        if convert.client_supports(ls.client_capabilities, "workspace", "code_lens", "refresh_support"):
            ls.workspace_code_lens_refresh(None)

    @server.feature("shutdown")
    def shutdown(ls, *args):
        ls.stop_workers()


def report(ls, problems) -> None:
    for problem in problems:
        ls.window_show_message(convert.show_message_params(problem, "warning"))


async def fetch_configuration(ls) -> None:
    if not convert.client_supports(ls.client_capabilities, "workspace", "configuration"):
        return
    try:
        values = await asyncio.wait_for(ls.workspace_configuration_async(convert.configuration_params()), 5)
    except Exception:  # noqa: BLE001 - a client that cannot answer keeps the current settings
        log.warning("workspace/configuration failed", exc_info=True)
        return
    if values and isinstance(values[0], dict):
        report(ls, ls.settings.update(values[0]))


# ----- the completion index -----------------------------------------------------------------------

def _cache_path() -> Path | None:
    spec = importlib.util.find_spec("tilelang")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0])
    files = sorted([root / "__init__.py", *(root / "language").glob("*.py")])
    stamp = "|".join(f"{f}:{f.stat().st_mtime_ns}:{f.stat().st_size}" for f in files if f.exists())
    key = hashlib.sha1(stamp.encode()).hexdigest()[:16]
    base = Path(os.environ.get("TILELANG_CACHE_DIR") or "~/.cache/tilelang").expanduser()
    return base / "lsp" / f"language-{key}.json"


def read_cached_index() -> dict | None:
    try:
        path = _cache_path()
        return json.loads(path.read_text()) if path is not None and path.is_file() else None
    except (OSError, ValueError):
        return None


def _write_cached_index(index: dict) -> None:
    try:
        path = _cache_path()
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(index))
        os.replace(tmp, path)
    except OSError:
        log.warning("cannot write the completion index cache", exc_info=True)


async def load_language_index(ls) -> None:
    from tilelang_lsp.worker_errors import WorkerDied, WorkerTimeout

    try:
        reply = await ls.request_check({"op": "language"}, 60.0)
    except (WorkerTimeout, WorkerDied):
        return
    if reply.get("ok"):
        ls.language = reply["members"]
        _write_cached_index(ls.language)
