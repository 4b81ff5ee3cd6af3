"""Imported by every process of the TileLang language server and ``tilelang-check``.

This package must stay cheap to import: the language server, the CLI and their worker processes
all start from it, and only the worker imports ``tilelang`` (tvm, torch). Each module's docstring
opens with the process it runs in; ``docs/architecture.md`` lists them by side of the pipe.
"""
