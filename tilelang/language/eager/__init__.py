"""``tilelang.language.eager``: the kernel front end's public names under upstream's module path.

    from tilelang.language.eager import prim_func, macro, const
    from tilelang.language.eager.ast import mutate

Contract: the decorators and helpers here are the ones of ``tilelang.language`` (one front end,
``tilelang.frontend``, builds every kernel); ``PrimFunc`` is TVM's ``tirx.PrimFunc`` (what
``@T.prim_func`` returns). The dtype names (``float16``, ``int32`` ...) are
re-exported too. ``ast.mutate(func)`` shows the Python the front end runs for ``func``.
"""

from __future__ import annotations

from tvm.tirx import PrimFunc

from tilelang.language.alloc import Ref, const
from tilelang.language.builtins import annotate_compile_flags, annotate_pass_configs
from tilelang.language.dtypes import *  # noqa: F401,F403
from tilelang.frontend.parser import macro, prim_func

from . import ast  # noqa: F401


__all__ = ["prim_func", "macro", "PrimFunc", "Ref", "const", "annotate_compile_flags",
           "annotate_pass_configs"]
