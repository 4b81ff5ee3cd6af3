"""The TileLang front end: a kernel's Python function becomes a TVM ``PrimFunc``.

``prim_func`` runs the kernel body as Python against TVM's IR builder (``builder``/``rewrite``/
``program``; the eager ``@tilelang.jit`` style in ``eager``); ``TILELANG_FRONTEND=tvm`` selects
the previous path, TVM's TVMScript parser with our hooks (``parser``). Every statement carries the
user's source span; failures become ``ParseError`` with a located diagnostic.
"""

from .errors import ParseError
from .parser import macro, parse_source, prim_func

__all__ = ["ParseError", "macro", "parse_source", "prim_func"]
