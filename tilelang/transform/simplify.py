"""Upstream's ``tilelang.transform.simplify``: TIR simplification a user applies to a kernel.

``apply_simplify(func)`` (and the ``@simplify_prim_func`` decorator for a function returning a
PrimFunc) runs apache-tvm's statement simplifier over the kernel before it is compiled: constant
folding, arithmetic simplification and removal of provably dead branches. With ``inline_let=True``
the simplifier runs twice (see ``LetInline``). The kernel's tile operations are left as they are; our
own lowering simplifies again after it has lowered them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import tvm
from tvm import IRModule
from tvm.tirx import PrimFunc


def Simplify(simplify_arguments: bool = False):  # noqa: N802 - upstream's name
    """The simplification pass (``simplify_arguments`` is accepted for upstream code)."""
    return tvm.tirx.transform.StmtSimplify()


def LetInline():  # noqa: N802 - upstream's name
    """Upstream's let-inlining pass. apache-tvm 0.27 has none of its own; its statement simplifier
    (what this returns) substitutes the lets it can prove trivial, and the lowering inlines the rest."""
    return tvm.tirx.transform.StmtSimplify()


def _one(mod: IRModule):
    if len(mod.functions) != 1:
        raise ValueError(f"apply_simplify expects a module with one function, got {len(mod.functions)}")
    return next(iter(mod.functions.values()))


def _drop_unused_params(func: PrimFunc) -> PrimFunc:
    """``func`` without the parameters its body never mentions (upstream's ``simplify_arguments``:
    the kernel is then called without them, e.g. an unused ``Bias``)."""
    import tvm_ffi

    seen = []
    tvm_ffi.structural_walk(func.body, [(tvm.ir.Var, lambda v: (seen.append(v), None)[1])], order="pre")
    for p in func.params:   # a symbol in another parameter's shape keeps its own parameter
        if tvm.tirx.is_buffer_var(p):
            for extent in list(p.shape) + list(p.strides or []):
                tvm_ffi.structural_walk(extent, [(tvm.ir.Var, lambda v: (seen.append(v), None)[1])], order="pre")
    keep = [p for p in func.params if any(p.same_as(v) for v in seen)]
    if len(keep) == len(func.params):
        return func
    return PrimFunc(keep, func.body, func.ret_type, func.attrs, span=func.span)


def apply_simplify(stmt: PrimFunc | IRModule, inline_let: bool = False) -> PrimFunc:
    """Simplify a PrimFunc (or a one-function IRModule) and return the simplified PrimFunc, without
    the parameters its body does not use (as upstream's ``Simplify(simplify_arguments=True)``)."""
    if isinstance(stmt, PrimFunc):
        name = stmt.attrs["global_symbol"] if stmt.attrs is not None and "global_symbol" in stmt.attrs else "main"
        mod = IRModule({name: stmt})
    elif isinstance(stmt, IRModule):
        mod = stmt
    else:
        raise TypeError(f"apply_simplify takes a PrimFunc or an IRModule, got {type(stmt).__name__}")
    passes = [LetInline(), Simplify(True)] if inline_let else [Simplify(True)]
    return _drop_unused_params(_one(tvm.transform.Sequential(passes)(mod)))


def simplify_prim_func(func: Callable) -> Callable:
    """Decorate a function that returns a PrimFunc so that it returns the simplified PrimFunc."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return apply_simplify(func(*args, **kwargs))

    return wrapper


__all__ = ["LetInline", "Simplify", "apply_simplify", "simplify_prim_func"]
