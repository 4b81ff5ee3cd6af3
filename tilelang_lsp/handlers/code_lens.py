"""Runs in the language-server process.

``textDocument/codeLens`` and the commands behind the lenses (``workspace/executeCommand``).

``tilelang.compile`` / ``tilelang.run`` take ``[uri, factory]``, send the document's current text
to the tools worker and return ``lenses.command_result``. Both execute user code, so they refuse
while ``tilelang.allowExecution`` is false. Unless the client said it shows results itself
(``clientHandlesResults``, set by the VS Code extension), the server also shows the report with
``window/showMessage`` and opens the CUDA source with ``window/showDocument`` when the client
supports it, so plain LSP clients (Neovim) see results. The source is written to
``$TMPDIR/tilelang-lsp/<workspace hash>/<file stem>.<factory>.cu``: two workspaces (or two servers)
never overwrite each other's file.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
from pathlib import Path

from tilelang_lsp import convert, lenses
from tilelang_lsp.worker_errors import WorkerDied, WorkerTimeout

log = logging.getLogger("tilelang_lsp")


def register(server) -> None:
    @server.feature("textDocument/codeLens", convert.code_lens_options())
    def text_document_code_lens(ls, params):
        uri = params.text_document.uri
        model = ls.model(uri)
        if model is None or not ls.settings.code_lens:
            return []
        found = lenses.lenses_for(model, uri, lens_target(ls, uri), ls.run_results)
        return [convert.to_lsp_code_lens(x["line"], x["title"], x["command"], x["arguments"]) for x in found]

    @server.command(lenses.COMPILE)
    async def compile_command(ls, *args):
        return await run_command(ls, "compile", args)

    @server.command(lenses.RUN)
    async def run_command_(ls, *args):
        return await run_command(ls, "run", args)


def lens_target(ls, uri: str) -> str:
    if ls.settings.target:
        return ls.settings.target
    st = ls.checks.docs.get(uri)
    return st.result.target if st is not None and st.result is not None and st.result.target else "sm_90a"


def _arguments(args) -> tuple:
    if len(args) == 1 and isinstance(args[0], dict):
        return args[0].get("uri"), args[0].get("factory")
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = args[0]
    return (args[0], args[1]) if len(args) >= 2 else (None, None)


async def run_command(ls, kind: str, args) -> dict:
    uri, factory = _arguments(args)
    if not uri or not factory:
        return lenses.refusal(kind, "expected the arguments [document uri, factory name]")
    if not ls.settings.allow_execution:
        result = lenses.refusal(kind, f"tilelang.allowExecution is false: the {kind} lens would run this "
                                      "file's code, so it is disabled")
        return _show(ls, result, uri)
    snap = ls.snapshot(uri)
    path = ls.path_of(uri)
    text = snap[1] if snap is not None else _read(path)
    if text is None:
        return lenses.refusal(kind, f"cannot read {path}")
    message = {"op": kind, "path": path, "text": text, "factory": factory, "target": ls.settings.target}
    try:
        data = await ls.request_tools(message)
    except (WorkerTimeout, WorkerDied) as err:
        data = {"ok": True, "error": f"the tools worker stopped: {err}"}
    if not data.get("ok"):
        data = {"ok": True, "error": (data.get("internal") or "internal error").splitlines()[0]}
    if kind == "compile" and not data.get("error"):
        ls.compile_results[(uri, factory)] = {k: v for k, v in data.items() if k != "cuda_source"}
    if kind == "run" and data.get("ran"):
        ls.run_results[(uri, factory)] = data           # the Run lens title and the kernel hover show it
        if convert.client_supports(ls.client_capabilities, "workspace", "code_lens", "refresh_support"):
            ls.workspace_code_lens_refresh(None)
    return _show(ls, lenses.command_result(kind, data), uri)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError:
        return None


def cuda_path(ls, uri: str, factory: str) -> Path:
    """Where the Compile lens writes the CUDA source of ``factory`` (see the module docstring)."""
    root = getattr(ls.workspace, "root_uri", None) or str(Path(ls.path_of(uri)).parent)
    digest = hashlib.sha1(root.encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / "tilelang-lsp" / digest / f"{Path(ls.path_of(uri)).stem}.{factory}.cu"


def _show(ls, result: dict, uri: str) -> dict:
    if ls.settings.client_handles_results:
        return result
    level = "info" if result["ok"] else "error"
    ls.window_show_message(convert.show_message_params(result["report"].replace("**", ""), level))
    if result.get("cuda_source") and convert.client_supports(ls.client_capabilities, "window", "show_document"):
        target = cuda_path(ls, uri, result["data"].get("factory", "kernel"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(result["cuda_source"], encoding="utf-8")
        ls.window_show_document(convert.show_document_params(target.as_uri()), lambda *_: None)
        result["cuda_path"] = str(target)
    return result
