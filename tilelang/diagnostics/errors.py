"""The one exception the compiler raises for mistakes in the user's kernel, and how it hides our frames.

Contract:
- ``TileLangCompileError(diagnostics)`` carries structured ``Diagnostic`` objects; ``str(err)`` is
  their text rendering, so an uncaught error prints ``error[TL0101]: ...`` with a caret snippet
  at the user's line. It pickles (it crosses process boundaries from the checker's worker and the
  parallel compiler).
- A user sees no compiler frames unless ``TILELANG_FRONTEND_DEBUG=1``. Three mechanisms, because
  frames are appended to a traceback as it unwinds, after the raise:
  1. ``raise_user_error`` raises ``from None`` (no chained internal exception) and marks its frame
     ``__tracebackhide__`` (pytest hides it).
  2. ``hide_internal_frames`` decorates public entry points (``@jit`` calls, ``compile``, ``lower``):
     on the way out it cuts every frame that belongs to the ``tilelang`` packages (Triton
     ``filter_traceback``), so ``traceback.print_exc()`` in user code stays clean too.
  3. The first ``raise_user_error`` installs a ``sys.excepthook`` that does the same cut for an
     uncaught error that never passed a decorated boundary; it chains to the previous hook (TVM
     installs one too).
  Real bugs (any other exception) keep their full traceback; they should become TL0003 at the
  boundary, with the traceback kept in debug mode.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Callable, NoReturn, TypeVar

from .. import knobs
from .codes import Severity
from .diagnostic import Diagnostic
from .render import render_text

# Module-name prefixes whose frames are "internal". tvm is included because its parser and passes
# sit between the user's kernel and our code.
INTERNAL_MODULES = ("tilelang", "tilelang_lsp", "tvm", "tvm_ffi")

_F = TypeVar("_F", bound=Callable[..., Any])


def frontend_debug() -> bool:
    """Whether ``TILELANG_FRONTEND_DEBUG`` asks for the compiler's own frames (read on every raise)."""
    try:
        return knobs.frontend_debug()
    except ValueError:
        # A malformed value must not replace the user's compile error with a knob error.
        return False


class TileLangCompileError(Exception):
    """A kernel could not be compiled because of the user's code; ``.diagnostics`` says why.

    ``sources`` optionally maps file names to text for the snippet (unsaved buffers, ``<str>``
    sources); otherwise files are read from disk when the error is printed.
    """

    def __init__(self, diagnostics: Iterable[Diagnostic], sources: Mapping[str, str] | None = None) -> None:
        self.diagnostics: list[Diagnostic] = list(diagnostics)
        self.sources: dict[str, str] | None = dict(sources) if sources else None
        super().__init__(self.diagnostics)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity is Severity.ERROR]

    def __str__(self) -> str:
        if not self.diagnostics:
            return "kernel compilation failed (no diagnostics were attached)"
        return render_text(self.diagnostics, self.sources)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.diagnostics, self.sources))

    def _render_traceback_(self) -> list[str]:
        # IPython and Jupyter call this instead of printing a traceback: show only the diagnostics.
        return str(self).splitlines()


def raise_user_error(diagnostics: Iterable[Diagnostic], sources: Mapping[str, str] | None = None) -> NoReturn:
    """Raise ``TileLangCompileError(diagnostics)`` the way a user should see it (module docstring)."""
    __tracebackhide__ = True  # noqa: F841  (read by pytest)
    error = TileLangCompileError(diagnostics, sources)
    if frontend_debug():
        raise error
    _install_excepthook()
    raise error from None


def is_internal_frame(tb: TracebackType) -> bool:
    name = tb.tb_frame.f_globals.get("__name__", "")
    return any(name == m or name.startswith(m + ".") for m in INTERNAL_MODULES)


def filter_traceback(error: BaseException) -> BaseException:
    """Drop internal frames from ``error.__traceback__`` in place (no-op in debug mode); returns ``error``."""
    if frontend_debug():
        return error
    kept = []
    tb = error.__traceback__
    while tb is not None:
        if not is_internal_frame(tb):
            kept.append(tb)
        tb = tb.tb_next
    for current, following in zip(kept, kept[1:]):
        current.tb_next = following
    if kept:
        kept[-1].tb_next = None
    error.__traceback__ = kept[0] if kept else None
    return error


def hide_internal_frames(function: _F) -> _F:
    """Decorate a public entry point so a ``TileLangCompileError`` leaves it without compiler frames."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # noqa: F841
        try:
            return function(*args, **kwargs)
        except TileLangCompileError as error:
            filter_traceback(error)
            # A bare re-raise adds no traceback entry for this frame.
            raise

    return wrapper  # type: ignore[return-value]


_hook_lock = threading.Lock()
_hook_installed = False


def _install_excepthook() -> None:
    global _hook_installed
    with _hook_lock:
        if _hook_installed:
            return
        previous = sys.excepthook

        def excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
            if isinstance(value, TileLangCompileError):
                value.__traceback__ = tb
                tb = filter_traceback(value).__traceback__
            previous(kind, value, tb)

        sys.excepthook = excepthook
        _hook_installed = True
