"""Record the check worker's reply for ``server_inputs.py``: ``python tests/lsp/recorded/record.py``.

``server_inputs.json`` is the ``check`` reply (``worker_check.CheckService``) with the file's path
replaced by ``<path>``; ``tests/lsp/test_lsp_imports.py`` replays it in a bare language server and
checks that it still matches what the worker sends.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "server_inputs.py"
RECORDING = HERE / "server_inputs.json"
VOLATILE = ("elapsed_ms", "hits", "misses")


def check_reply() -> dict:
    """The worker's reply for ``server_inputs.py`` now, with the path made portable."""
    from tilelang_lsp.worker_check import CheckService

    message = {"op": "check", "path": str(SOURCE), "text": SOURCE.read_text(), "target": "sm_90a",
               "exec": True, "timeout": 60}
    reply = CheckService().check(message)
    for key in VOLATILE:
        reply.pop(key, None)
    return json.loads(json.dumps(reply).replace(json.dumps(str(SOURCE))[1:-1], "<path>"))


if __name__ == "__main__":
    RECORDING.write_text(json.dumps(check_reply(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {RECORDING}")
