"""Runs in the language-server process.

LSP method handlers, one module per method family; ``register(server)`` wires them all.

Each module's ``register(server)`` attaches its handlers with ``server.feature``/``server.command``.
Handlers never raise into pygls for a user's broken code: a failure is logged and the request
answered with an empty result.
"""

from __future__ import annotations


def register(server) -> None:
    from tilelang_lsp.handlers import (code_action, code_lens, completion, hover, lifecycle, navigation,
                                       text_sync)

    for module in (lifecycle, text_sync, hover, completion, navigation, code_lens, code_action):
        module.register(server)
