"""Compile-pipeline instrumentation: pass events, compile sessions and the tools that use them.

Contract:

- A **pass event** is one pass seen between TVM's ``run_before_pass`` / ``run_after_pass``
  callbacks. :class:`StackedPassInstrument` (a TVM ``PassInstrument``) pairs those callbacks,
  gives every observed pass a ``PassEvent`` (name, start-order ``sequence``, nesting ``depth``,
  ``parent_sequence``, the active ``phase``) and hands it to a :class:`PassEventObserver`.
  When a pass fails (no after-callback), the open frames are drained on context exit and
  reported as :class:`IncompletePass` entries, outermost first.
- Events come from two places: TVM passes (inside codegen: ``tirx.StmtSimplify``...) and our
  own Python stages (``tilelang.engine.pipeline.PASSES``), which ``tilelang.engine.lower`` runs
  as module passes named ``tl.<stage>`` when an instrumentation session is active.
- A **compile session** (:func:`compile_pass_instrumentation`) owns the tool state of one
  logical compilation: registered tool factories (:func:`register_pass_instrumentation_tool`)
  are snapshotted when it starts, nested compiles reuse it, each thread/context has its own.
  Every TVM ``PassContext`` of that compilation gets *fresh* instruments from
  :func:`create_pass_instruments`; pipelines run under :func:`pass_pipeline` (phase
  ``pipeline_<name>``); the explicit device code generation call goes through
  :func:`run_codegen_with_instrumentation` as a :class:`CodegenEvent`.
- Nothing here runs when no session is active and no tool is registered: ``lower`` checks
  :func:`instrumentation_requested` once and otherwise takes its plain path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from tvm.ir.instrument import pass_instrument

__all__ = [
    "CapturePredicate", "CodegenEvent", "abort_open_passes", "CompilePassInstrumentationSession", "IncompletePass",
    "PassEvent",
    "PassEventObserver", "PassInstrumentationTool", "SequenceAllocator", "StackedPassInstrument",
    "active_stacked_pass_instruments", "compile_pass_instrumentation", "create_pass_instruments",
    "current_compile_pass_instrumentation", "current_pass_instrument_context", "current_pass_phase",
    "instrument_current_pass_context", "instrumentation_requested", "pass_phase", "pass_pipeline",
    "register_pass_instrumentation_tool", "run_codegen_with_instrumentation", "unregister_pass_instrumentation_tool",
]

# ----------------------------------------------------------------------------- phases and events

_phase: ContextVar[str | None] = ContextVar("tilelang_pass_phase", default=None)
_active_instruments: ContextVar[tuple] = ContextVar("tilelang_active_stacked_instruments", default=())


@contextmanager
def pass_phase(name: str | None) -> Iterator[None]:
    """Label the pass events emitted inside this scope with ``name`` (restored on exit)."""
    token = _phase.set(None if name is None else str(name))
    try:
        yield
    finally:
        _phase.reset(token)


def current_pass_phase() -> str | None:
    """The phase label of the current execution context (None outside any phase)."""
    return _phase.get()


def active_stacked_pass_instruments() -> tuple:
    """The :class:`StackedPassInstrument` objects whose PassContext is entered here, in entry order."""
    return _active_instruments.get()


def abort_open_passes(error: BaseException | None) -> None:
    """Report the passes still open in this context's stacked instruments as incomplete, with
    ``error`` (what a compiler calls when a pass raised, before leaving its PassContext)."""
    for instrument in reversed(_active_instruments.get()):
        if instrument.pending_events:
            instrument.abort(error)


@dataclass(frozen=True)
class PassEvent:
    """One observed pass: ``sequence`` is its start order, ``parent_sequence`` the enclosing
    observed pass (None at the top), ``phase`` the label active when it started."""

    name: str
    sequence: int
    depth: int
    parent_sequence: int | None
    phase: str | None


@dataclass(frozen=True)
class IncompletePass:
    """A pass that started but never finished (it raised, or the callbacks got out of step)."""

    name: str
    depth: int
    event: PassEvent | None
    state: Any


class PassEventObserver:
    """What a :class:`StackedPassInstrument` reports to; every method is optional."""

    def enter_pass_context(self) -> None:
        """The PassContext was entered."""

    def exit_pass_context(self) -> None:
        """The PassContext was left."""

    def pass_started(self, mod, event: PassEvent):
        """A pass starts on ``mod``; the return value comes back to :meth:`pass_finished`."""
        return None

    def pass_finished(self, mod, event: PassEvent, state) -> None:
        """A pass finished; ``mod`` is its result, ``state`` what :meth:`pass_started` returned."""

    def passes_incomplete(self, passes: Sequence[IncompletePass], error: BaseException | None) -> None:
        """Passes that never finished (outermost first), with the error when one is known."""

    def callback_mismatch(self, actual: str, expected: str | None) -> None:
        """An after-pass callback named ``actual`` arrived while ``expected`` was the open pass."""


CapturePredicate = Callable[[str, int], bool]
SequenceAllocator = Callable[[], int]


@dataclass
class _Frame:
    name: str
    depth: int
    event: PassEvent | None
    state: Any = None


@pass_instrument
class StackedPassInstrument:
    """Pairs TVM's nested pass callbacks into :class:`PassEvent` objects for ``observer``.

    ``capture_nested=False`` reports only top-level passes (nested ones are still paired);
    ``capture_predicate(name, depth)`` filters further; ``sequence_allocator`` numbers events
    across several PassContexts (default: from 0 in each); ``phase_provider`` labels them.
    """

    def __init__(self, observer: PassEventObserver, *, capture_nested: bool = True,
                 capture_predicate: CapturePredicate | None = None,
                 sequence_allocator: SequenceAllocator | None = None,
                 phase_provider: Callable[[], str | None] = current_pass_phase) -> None:
        self.observer = observer
        self.capture_nested = capture_nested
        self.capture_predicate = capture_predicate
        self.sequence_allocator = sequence_allocator
        self.phase_provider = phase_provider
        self._frames: list[_Frame] = []
        self._count = 0

    @property
    def pending_events(self) -> tuple:
        """Events of passes that started and have not finished, outermost first."""
        return tuple(f.event for f in self._frames if f.event is not None)

    def _next_sequence(self) -> int:
        if self.sequence_allocator is not None:
            return self.sequence_allocator()
        self._count += 1
        return self._count - 1

    def _captures(self, name: str, depth: int) -> bool:
        if depth and not self.capture_nested:
            return False
        return self.capture_predicate is None or bool(self.capture_predicate(name, depth))

    def _leave(self) -> None:
        # TVM exits instruments in registration order (not LIFO): remove this one by identity
        active = list(_active_instruments.get())
        for i in range(len(active) - 1, -1, -1):
            if active[i] is self:
                del active[i]
                break
        _active_instruments.set(tuple(active))

    def enter_pass_ctx(self) -> None:
        self._frames.clear()
        self._count = 0
        _active_instruments.set(_active_instruments.get() + (self,))
        try:
            self.observer.enter_pass_context()
        except Exception:
            self._leave()
            raise

    def exit_pass_ctx(self) -> None:
        try:
            if self._frames:
                self.abort()
            self.observer.exit_pass_context()
        finally:
            self._leave()

    def run_before_pass(self, mod, info) -> None:
        name, depth = str(info.name), len(self._frames)
        event = state = None
        if self._captures(name, depth):
            parent = next((f.event.sequence for f in reversed(self._frames) if f.event is not None), None)
            event = PassEvent(name, self._next_sequence(), depth, parent, self.phase_provider())
            state = self.observer.pass_started(mod, event)
        self._frames.append(_Frame(name, depth, event, state))

    def run_after_pass(self, mod, info) -> None:
        name = str(info.name)
        if not self._frames or self._frames[-1].name != name:
            expected = self._frames[-1].name if self._frames else None
            self.observer.callback_mismatch(name, expected)
            self.abort(RuntimeError(f"after-pass callback for {name!r} while {expected!r} was running"))
            return
        frame = self._frames.pop()
        if frame.event is not None:
            self.observer.pass_finished(mod, frame.event, frame.state)

    def abort(self, error: BaseException | None = None) -> tuple:
        """Drop every open frame, reporting them to the observer (outermost first)."""
        open_passes = tuple(IncompletePass(f.name, f.depth, f.event, f.state) for f in self._frames)
        self._frames.clear()
        if open_passes:
            self.observer.passes_incomplete(open_passes, error)
        return open_passes


# ----------------------------------------------------------------------------- compile sessions

_session: ContextVar[CompilePassInstrumentationSession | None] = ContextVar("tilelang_compile_instrumentation",
                                                                              default=None)
_instrument_context: ContextVar[str | None] = ContextVar("tilelang_pass_instrument_context", default=None)
_registry_lock = threading.RLock()     # guards only the factory table, never a callback
_factories: dict[str, Callable[[], PassInstrumentationTool]] = {}


@dataclass(frozen=True)
class CodegenEvent:
    """One device code generation call: ``name`` is the TVM build function (``target.build.cuda``)."""

    name: str
    mod: Any
    target: Any


class PassInstrumentationTool:
    """A per-compilation developer tool; override what it needs."""

    pass_instrument_priority = 0
    """Order of this tool's instrument in a PassContext (lower first)."""

    def create_pass_instrument(self) -> object | None:
        """A fresh TVM instrument for one PassContext of the compilation, or None."""
        return None

    def pipeline_scope(self, base_phase: str) -> AbstractContextManager[None]:
        """A scope entered around one pass pipeline (``base_phase`` is ``pipeline_<name>``)."""
        return nullcontext()

    def run_codegen(self, event: CodegenEvent, next_call: Callable[[], Any]) -> Any:
        """Wrap a code generation call; must call ``next_call`` exactly once (or raise)."""
        return next_call()

    def finish(self, error: BaseException | None) -> None:
        """The compilation ended (``error`` is its exception, if it failed)."""


_Tool = TypeVar("_Tool", bound=PassInstrumentationTool)


class CompilePassInstrumentationSession:
    """The tools of one compilation, and how their hooks compose."""

    def __init__(self, tools: Sequence[PassInstrumentationTool], *, name: str | None = None) -> None:
        self.name = name
        self.tools = tuple(tools)

    def create_pass_instruments(self, *, context: str | None = None) -> list:
        """Fresh instruments for one PassContext, ordered by tool priority then registration;
        ``context`` (e.g. ``"stage=lower, kernel=main"``) is visible to the tools meanwhile."""
        token = _instrument_context.set(None if context is None else str(context))
        try:
            made = [(tool.pass_instrument_priority, i, tool.create_pass_instrument())
                    for i, tool in enumerate(self.tools)]
        finally:
            _instrument_context.reset(token)
        return [inst for _, _, inst in sorted((m for m in made if m[2] is not None), key=lambda m: m[:2])]

    @contextmanager
    def pipeline_scope(self, base_phase: str) -> Iterator[None]:
        with ExitStack() as stack:
            for tool in self.tools:
                stack.enter_context(tool.pipeline_scope(base_phase))
            yield

    def run_codegen(self, event: CodegenEvent, call: Callable[[], Any]) -> Any:
        """Run ``call`` through every tool's ``run_codegen``, the first registered outermost."""
        def wrap(tool, inner):
            return lambda: tool.run_codegen(event, inner)

        for tool in reversed(self.tools):
            call = wrap(tool, call)
        return call()

    def finish(self, error: BaseException | None) -> None:
        """Finish every tool (last registered first); a tool's failure is raised only when the
        compilation itself succeeded."""
        first = None
        for tool in reversed(self.tools):
            try:
                tool.finish(error)
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                first = first or exc
        if error is None and first is not None:
            raise first

    def find_tool(self, tool_type: type[_Tool]) -> _Tool | None:
        return next((t for t in self.tools if isinstance(t, tool_type)), None)


def register_pass_instrumentation_tool(name: str, factory: Callable[[], PassInstrumentationTool]) -> None:
    """Add (or replace) a tool factory; every later compile session gets one instance."""
    with _registry_lock:
        _factories[str(name)] = factory


def unregister_pass_instrumentation_tool(name: str) -> None:
    with _registry_lock:
        _factories.pop(str(name), None)


def current_compile_pass_instrumentation() -> CompilePassInstrumentationSession | None:
    return _session.get()


def current_pass_instrument_context() -> str | None:
    """The ``context`` of the PassContext whose instruments are being created right now."""
    return _instrument_context.get()


def instrumentation_requested() -> bool:
    """Whether a compilation starting now would be instrumented (a session or a registered tool)."""
    return _session.get() is not None or bool(_factories)


@contextmanager
def compile_pass_instrumentation(name: str | None = None, *, tools: Sequence[PassInstrumentationTool] = (),
                                 include_default_tools: bool = True,
                                 reuse_existing: bool = True) -> Iterator[CompilePassInstrumentationSession]:
    """The instrumentation session of one compilation. Inside an active session (and with
    ``reuse_existing``) that session is yielded; otherwise a new one holds the registered tools
    (unless ``include_default_tools=False``) plus ``tools``, finished on exit."""
    active = _session.get()
    if active is not None and reuse_existing:
        if tools or not include_default_tools:
            raise ValueError("compile_pass_instrumentation: a compile session is already active here; pass "
                             "reuse_existing=False to start one with its own tools")
        yield active
        return
    own = []
    if include_default_tools:
        with _registry_lock:
            factories = list(_factories.values())
        own = [factory() for factory in factories]
    session = CompilePassInstrumentationSession([*own, *tools], name=name)
    token = _session.set(session)
    error = None
    try:
        yield session
    except BaseException as exc:
        error = exc
        raise
    finally:
        try:
            session.finish(error)
        finally:
            _session.reset(token)


def create_pass_instruments(*, context: str | None = None) -> list:
    """Fresh instruments of the active session for one PassContext ([] without a session)."""
    session = _session.get()
    return [] if session is None else session.create_pass_instruments(context=context)


@contextmanager
def instrument_current_pass_context(*, context: str | None = None) -> Iterator[None]:
    """Add the active session's instruments to the PassContext already entered, for this scope."""
    session = _session.get()
    instruments = session.create_pass_instruments(context=context) if session is not None else []
    if not instruments:
        yield
        return
    from tvm.ir.transform import PassContext

    ctx = PassContext.current()
    previous = list(ctx.instruments)
    try:
        ctx.override_instruments(previous + instruments)
    except BaseException:
        ctx.override_instruments(previous)
        raise
    try:
        yield
    finally:
        ctx.override_instruments(previous)


_R = TypeVar("_R")


def run_codegen_with_instrumentation(name: str, mod, target, call: Callable[[], _R]) -> _R:
    """Run the code generation ``call`` through the active session's tools (plainly without one)."""
    session = _session.get()
    if session is None:
        return call()
    return session.run_codegen(CodegenEvent(name=name, mod=mod, target=target), call)


@contextmanager
def pass_pipeline(name: str) -> Iterator[None]:
    """Run one pass pipeline: phase ``pipeline_<name>``, inside every tool's pipeline scope."""
    base = f"pipeline_{name}"
    session = _session.get()
    with pass_phase(base):
        if session is None:
            yield
        else:
            with session.pipeline_scope(base):
                yield
