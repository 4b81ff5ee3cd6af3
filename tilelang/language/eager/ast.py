"""``tilelang.language.eager.ast``: the source rewrite of the kernel front end, inspectable.

    gen = mutate(kernel_body)
    print(gen.source)     # the Python that runs against the IR builder ``__tb``

Contract: ``mutate(func)`` returns the front end's rewritten form of ``func`` (cached per code
object, the one ``@T.prim_func`` builds from): ``.source`` is the rewritten ``def`` as Python
text (statements as ``__tb`` builder calls, e.g. ``x -= 1`` as
``x = __tb.aug_assign('Sub', x, 1, name='x')``), ``.name``, ``.params`` and ``.file`` describe the
function. ``BaseBuilder`` is the builder class the rewritten code calls.
"""

from __future__ import annotations

from tilelang.frontend.builder import Builder as BaseBuilder
from tilelang.frontend.program import program

__all__ = ["BaseBuilder", "mutate"]


def mutate(func):
    """The rewritten form of ``func`` (see the module docstring)."""
    if not hasattr(func, "__code__"):
        raise TypeError(f"mutate() expects a Python function, got {type(func).__name__}")
    return program(func)
