"""Phase logging for the JIT (upstream's ``tilelang.jit.diagnostics``).

    with jit_phase("lower", kernel="gemm", target="sm_90a"):
        ...

Contract: when enabled (``enabled=True``, or by default TILELANG_JIT_DIAGNOSTICS=1) the block logs
``TileLang JIT phase start: <name>`` at INFO on the ``tilelang.jit.diagnostics`` logger, then
``... done: <name> (<seconds>)`` or, if it raises, ``... failed: <name>`` with the exception's
type and message; the context keywords follow each message as ``key='value'``. The exception
propagates unchanged. Disabled, the block runs with no logging at all. ``tilelang.compile`` wraps
its ``lower`` and ``nvcc`` steps in phases.
"""

from __future__ import annotations

import contextlib
import logging
import time

from tilelang import knobs

logger = logging.getLogger(__name__)

__all__ = ["jit_phase", "jit_diagnostics_enabled"]


def jit_diagnostics_enabled() -> bool:
    """TILELANG_JIT_DIAGNOSTICS as a boolean (default off)."""
    return knobs._bool("TILELANG_JIT_DIAGNOSTICS")


def _context(context: dict) -> str:
    return " ".join(f"{k}={v!r}" for k, v in context.items() if v is not None)


@contextlib.contextmanager
def jit_phase(name: str, enabled: bool | None = None, **context):
    """Log the start and the end (or failure) of one JIT phase (see the module docstring)."""
    if not (jit_diagnostics_enabled() if enabled is None else enabled):
        yield
        return
    where = _context(context)
    logger.info("TileLang JIT phase start: %s %s", name, where)
    start = time.perf_counter()
    try:
        yield
    except BaseException as err:
        logger.info("TileLang JIT phase failed: %s after %.3fs: %s: %s %s", name, time.perf_counter() - start,
                    type(err).__name__, err, where)
        raise
    logger.info("TileLang JIT phase done: %s (%.3fs) %s", name, time.perf_counter() - start, where)
