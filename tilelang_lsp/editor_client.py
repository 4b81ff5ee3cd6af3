"""Runs in an editor's place (tests, benchmarks): it starts the language server and talks LSP to it.

A small synchronous LSP client over a subprocess's stdio, for tests, benchmarks and smoke checks.

``LspClient([sys.executable, "-m", "tilelang_lsp.server"])`` starts the server; a reader thread
parses ``Content-Length`` frames, resolves responses by id, records notifications and answers the
server's own requests (``workspace/configuration`` with ``self.configuration``, the refresh and
registration requests with null, ``window/showDocument`` with success). ``request`` blocks until
its response (or raises ``TimeoutError``/``LspError``); ``wait_for`` blocks on a condition over the
notifications received (``publishDiagnostics`` for a version, say): tests wait on events, never
on sleeps. Raw JSON everywhere: this module does not import lsprotocol or pygls.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path


class LspError(Exception):
    def __init__(self, error: dict):
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.error = error


class LspClient:
    def __init__(self, command: list, cwd: str | None = None, env: dict | None = None, stderr_path=None):
        self.started = time.perf_counter()
        self._stderr = open(stderr_path, "wb") if stderr_path else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     cwd=cwd, env={**os.environ, **(env or {})})
        self._lock = threading.Condition()
        self._next_id = 0
        self._responses: dict = {}
        self.notifications: list = []
        self.server_requests: list = []
        self.diagnostics: dict = {}         # uri -> (version, [diagnostic])
        self.configuration: dict = {}
        self.closed = False
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()

    # ----- wire ---------------------------------------------------------------------------
    def _send(self, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def _read_message(self):
        length = None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                return None
            line = line.strip()
            if not line:
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        return json.loads(self.proc.stdout.read(length)) if length is not None else None

    def _read_loop(self) -> None:
        while True:
            message = self._read_message()
            if message is None:
                with self._lock:
                    self.closed = True
                    self._lock.notify_all()
                return
            if "id" in message and "method" in message:
                self._answer(message)
                continue
            with self._lock:
                if "id" in message:
                    self._responses[message["id"]] = message
                else:
                    self._note(message)
                self._lock.notify_all()

    def _note(self, message: dict) -> None:
        self.notifications.append(message)
        if message.get("method") == "textDocument/publishDiagnostics":
            p = message["params"]
            self.diagnostics[p["uri"]] = (p.get("version"), p["diagnostics"])

    def _answer(self, message: dict) -> None:
        with self._lock:
            self.server_requests.append(message)
            self._lock.notify_all()
        method, result = message["method"], None
        if method == "workspace/configuration":
            result = [self.configuration for _ in message["params"]["items"]]
        elif method == "window/showDocument":
            result = {"success": True}
        self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    # ----- calls --------------------------------------------------------------------------
    def send_request(self, method: str, params) -> int:
        with self._lock:
            self._next_id += 1
            rid = self._next_id
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid

    def response(self, rid: int, timeout: float = 30.0):
        deadline = time.monotonic() + timeout
        with self._lock:
            while rid not in self._responses:
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    raise TimeoutError(f"no response to request {rid} within {timeout} s")
                self._lock.wait(left)
            message = self._responses.pop(rid)
        if "error" in message:
            raise LspError(message["error"])
        return message.get("result")

    def request(self, method: str, params, timeout: float = 30.0):
        return self.response(self.send_request(method, params), timeout)

    def notify(self, method: str, params) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def wait_for(self, predicate, timeout: float = 30.0, what: str = "a condition"):
        """Block until ``predicate(self)`` is truthy (re-checked on every message); return its value."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                value = predicate(self)
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
                self._lock.wait(left)

    def wait_diagnostics(self, uri: str, version: int, timeout: float = 60.0) -> list:
        def ready(c):
            got = c.diagnostics.get(uri)
            return got is not None and got[0] == version and (got[1],)
        return self.wait_for(ready, timeout, f"diagnostics of {uri} version {version}")[0]

    # ----- lifecycle and documents --------------------------------------------------------
    def initialize(self, root: str | None = None, options: dict | None = None, capabilities: dict | None = None,
                   timeout: float = 30.0) -> dict:
        caps = capabilities if capabilities is not None else default_capabilities()
        params = {"processId": os.getpid(), "rootUri": Path(root).resolve().as_uri() if root else None,
                  "capabilities": caps, "initializationOptions": options or {}}
        result = self.request("initialize", params, timeout)
        self.notify("initialized", {})
        return result

    def open(self, uri: str, text: str, version: int = 1) -> None:
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python",
                                                              "version": version, "text": text}})

    def change(self, uri: str, version: int, text: str) -> None:
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                               "contentChanges": [{"text": text}]})

    def edit(self, uri: str, version: int, start: tuple, end: tuple, text: str) -> None:
        rng = {"start": {"line": start[0], "character": start[1]}, "end": {"line": end[0], "character": end[1]}}
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                               "contentChanges": [{"range": rng, "text": text}]})

    def close(self, uri: str) -> None:
        self.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    def at(self, method: str, uri: str, line: int, character: int, timeout: float = 30.0, **extra):
        params = {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}, **extra}
        return self.request(method, params, timeout)

    def shutdown(self, timeout: float = 10.0) -> int:
        try:
            if not self.closed:
                self.request("shutdown", None, timeout)
                self.notify("exit", None)
        except (TimeoutError, LspError, BrokenPipeError, OSError):
            pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)
        finally:
            if self._stderr is not subprocess.DEVNULL:
                self._stderr.close()


def default_capabilities(pull: bool = False) -> dict:
    caps = {"textDocument": {"hover": {"contentFormat": ["markdown", "plaintext"]},
                             "publishDiagnostics": {"versionSupport": True, "relatedInformation": True},
                             "completion": {"completionItem": {"snippetSupport": False}},
                             "codeAction": {"codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["quickfix"]}}}},
            "workspace": {"configuration": True, "workspaceEdit": {"documentChanges": True}},
            "window": {"showDocument": {"support": True}}}
    if pull:
        caps["textDocument"]["diagnostic"] = {"dynamicRegistration": False}
    return caps


def apply_edits(text: str, edits: list) -> str:
    """Apply LSP TextEdits (UTF-16 positions) to ``text``, last first."""
    lines = text.split("\n")

    def offset(pos):
        line = min(pos["line"], len(lines) - 1)
        before = sum(len(x) + 1 for x in lines[:line])
        units, col = 0, 0
        for ch in lines[line]:
            if units >= pos["character"]:
                break
            units += 2 if ord(ch) > 0xFFFF else 1
            col += 1
        return before + col

    for e in sorted(edits, key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["character"]),
                    reverse=True):
        start, end = offset(e["range"]["start"]), offset(e["range"]["end"])
        text = text[:start] + e["newText"] + text[end:]
    return text
