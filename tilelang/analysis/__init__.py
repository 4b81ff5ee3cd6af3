"""Static checks of TileLang kernels: ``check(func, target_arch, context) -> list[Diagnostic]``.

Contract (shared by the JIT, ``tilelang-check`` and the language server):
- ``check`` takes one parsed kernel (a ``PrimFunc`` from ``@T.prim_func``), the target's
  ``sm_XX`` architecture and a ``CheckContext`` (``out_idx``, the binding that produced the
  kernel, source text for operand-level spans). It does no IO of its own (the context may supply
  a reader) and never raises on a user mistake; an internal bug becomes one TL0003 diagnostic.
- Every diagnostic points at the user's line: the statement, or the operand / loop header /
  parameter when the source text is available.
- ``check_pass`` is the JIT's entry (``engine/pipeline.py``): it raises ``TileLangCompileError``
  on error-severity diagnostics and ``warnings.warn``s the others.
- ``source_checks`` (module ``ast_checks``) are the checks that need no values: they read only
  the Python source of a file and run even when a kernel factory's parameters cannot be bound.
"""

from __future__ import annotations

__all__ = ["CheckContext", "analyze", "check", "check_pass"]


def __getattr__(name):
    # Lazy, so that the value-free modules (syntax, source, ast_checks, suppress, merge, targets)
    # can be imported without tvm: the command line's own process never needs it.
    if name == "CheckContext":
        from tilelang.analysis.report import CheckContext

        return CheckContext
    raise AttributeError(f"module 'tilelang.analysis' has no attribute {name!r}")


def check(func, target_arch: str = "sm_90a", context=None):
    """All diagnostics for ``func`` on ``target_arch`` (see ``tilelang.analysis.checker``)."""
    from tilelang.analysis.checker import check as _check

    return _check(func, target_arch, context)


def analyze(func, target_arch: str = "sm_90a", context=None):
    """``(Kernel or None, diagnostics)``: ``check`` and the facts it computed, for the hover summary."""
    from tilelang.analysis.checker import analyze as _analyze

    return _analyze(func, target_arch, context)


def check_pass(state) -> None:
    """The ``check`` entry of the JIT's pass list: ``state`` is ``engine.lower.LowerState``."""
    from tilelang.analysis.jit import run_check_pass

    run_check_pass(state)
