"""The TileLang front end: TVM's TVMScript parser extended for the ``T`` namespace.

``prim_func`` parses a Python function into a TVM ``PrimFunc`` whose statements all carry the
user's source span. Parse failures become ``TileLangCompileError`` with a located diagnostic.
"""

from .parser import ParseError, parse_source, prim_func

__all__ = ["ParseError", "parse_source", "prim_func"]
