"""Lower tracing as a per-compilation instrumentation tool (``tilelang.instrumentation``).

Contract:

- ``enable(mode=, trace_dir=, codegen_output=)`` registers a tool factory: every compilation
  that starts afterwards gets its own :class:`LowerTraceSession` built from a snapshot of the
  configuration (mode: ``TL_LOWER_TRACE``, directory: ``TL_LOWER_TRACE_DIR``, unless given);
  ``disable()`` unregisters it. Nothing global in TVM is patched; a running compilation keeps
  the configuration it started with.
- A session records one :class:`LowerRecord` per pass (our ``tl.<stage>`` passes and TVM's,
  nested ones with ``depth``/``parent_index``) with the module text before and after, and one
  ``codegen`` record per device code generation (the TIR before, the generated source after).
  ``index`` is the start order across the whole compilation. Pipelines are phases
  (``pipeline_cuda``, then ``run2_pipeline_cuda``... for more kernels in one compilation).
- Output: one status line per record; terminal/both modes print the diffs; html/both modes
  rewrite ``<trace_dir>/<script>/.run_records/<run>/report.html`` after each record and point
  ``<trace_dir>/<script>/report.html`` at it. Raw before/after files of every record are kept
  next to the run's report. Tracing failures are warnings, never compile failures.
- Edit and recompile: the generated source is also written to the codegen output file
  (``<trace_dir>/<script>/codegen.cpp`` by default in html modes, or ``codegen_output``), with a
  ``.original`` baseline and a ``.latest`` copy. When the user edited the file and the compiler
  still generates the baseline, the edited source is used instead (for code generators whose
  output is compiled from source later, as our ``target.build.cuda``); when both changed, the
  edits are saved as ``.bak`` and the file is regenerated.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import threading
from contextvars import ContextVar
from dataclasses import dataclass
from uuid import uuid4

from tilelang.instrumentation import (CodegenEvent, PassEvent, PassEventObserver, PassInstrumentationTool,
                                      StackedPassInstrument, active_stacked_pass_instruments,
                                      current_compile_pass_instrumentation, current_pass_phase, pass_phase,
                                      register_pass_instrumentation_tool, unregister_pass_instrumentation_tool)

from .diff import _ANSI_BLUE, _ANSI_BOLD, _ANSI_CYAN, _ANSI_DIM, _ANSI_GREEN, _ANSI_RED, _ANSI_RESET, _ANSI_YELLOW
from .diff import count_changes, print_diff

__all__ = ["LowerRecord", "LowerTraceSession", "STATUS_CODEGEN", "STATUS_COMPLETED", "STATUS_FAILED",
           "STATUS_SKIPPED", "create_pass_instrument", "current_lower_trace_session", "disable", "enable",
           "get_last_session", "reset"]

STATUS_COMPLETED = "completed"
STATUS_FAILED = "failed"
STATUS_SKIPPED = "skipped"
STATUS_CODEGEN = "codegen"

_UNSCOPED = "unscoped"
_TOOL_NAME = "lower_trace"
_UNSET = object()

# code generators whose module is compiled from its source later, so an edited source can stand
# in for it (ours: target.build.cuda, whose source emit_cuda reads and nvcc compiles)
_SOURCE_ONLY_CODEGEN = frozenset({
    "target.build.cuda", "target.build.c", "target.build.tilelang_c", "target.build.tilelang_cpp",
    "target.build.webgpu", "target.build.tilelang_webgpu", "target.build.tilelang_cuda_without_compile",
    "target.build.tilelang_hip_without_compile", "target.build.tilelang_metal_without_compile",
    "target.build.tilelang_cutedsl_without_compile",
})

_config_lock = threading.RLock()
_overrides = {"mode": _UNSET, "trace_dir": _UNSET, "codegen_output": _UNSET}
_last_session: ContextVar[LowerTraceSession | None] = ContextVar("tilelang_last_lower_trace", default=None)
_path_locks_guard = threading.Lock()
_path_locks: dict[str, threading.Lock] = {}


@dataclass
class LowerRecord:
    """One traced pass or code generation."""

    phase: str
    name: str
    index: int
    before_text: str
    after_text: str
    changed: bool
    add_lines: int = 0
    del_lines: int = 0
    status: str = STATUS_COMPLETED
    error_msg: str = ""
    depth: int = 0
    parent_index: int | None = None


def _parse_lower_trace_mode(value) -> str | None:
    """A ``TL_LOWER_TRACE`` value as a mode: None (off), "terminal", "html" or "both"."""
    if value is None:
        return None
    text = str(value).strip().lower()
    if text in ("", "0", "false", "no", "off"):
        return None
    return text if text in ("terminal", "both") else "html"


def _get_mode() -> str | None:
    """The mode future compilations get."""
    from tilelang.env import env

    with _config_lock:
        mode = _overrides["mode"]
    return env.get_lower_trace_mode() if mode is _UNSET else mode


def _is_trace_enabled() -> bool:
    return _get_mode() is not None


def _get_pass_display_name(pass_obj) -> str:
    """The last dotted part of a pass's name (``tirx.Simplify`` -> ``Simplify``)."""
    try:
        return str(pass_obj.info.name).rsplit(".", 1)[-1]
    except Exception:  # noqa: BLE001 - not a TVM pass: a callable
        return getattr(pass_obj, "__name__", type(pass_obj).__name__)


def _safe_component(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", str(name))


def _module_source(mod) -> str:
    for attr in ("inspect_source", "get_source"):
        method = getattr(mod, attr, None)
        if callable(method):
            return method() or ""
    return ""


def _make_patched_source_module(original_module, patched_source: str):
    """A TVM source module holding ``patched_source`` in place of ``original_module``."""
    import tvm.runtime._ffi_api as runtime_api

    try:
        fmt = original_module.format
    except Exception:  # noqa: BLE001 - modules without a format: C source
        fmt = "cu"
    return runtime_api.CSourceModuleCreate(patched_source, fmt, [], None)


def _path_lock(path: str) -> threading.Lock:
    with _path_locks_guard:
        return _path_locks.setdefault(os.path.realpath(path), threading.Lock())


def _say(text: str) -> None:
    print(f"  [lower_trace] {text}")


class LowerTraceSession(PassInstrumentationTool):
    """Everything one compilation's trace holds: records, numbering, output files."""

    def __init__(self, *, mode: str | None, trace_dir: str, codegen_output=_UNSET) -> None:
        self.mode = mode
        self.trace_dir = str(trace_dir)
        self.codegen_output = codegen_output
        self.records: list[LowerRecord] = []
        self.section_cache: dict = {}
        self.pass_index = 0
        self.pipeline_count = 0
        self.script_dir: str | None = None
        self.run_dir: str | None = None
        self._lock = threading.RLock()
        self._finished = False

    # ------------------------------------------------------------------ configuration
    @property
    def enabled(self) -> bool:
        return self.mode is not None

    @property
    def should_print_terminal(self) -> bool:
        return self.mode in ("terminal", "both")

    @property
    def should_generate_html(self) -> bool:
        return self.mode in ("html", "both")

    def ensure_script_dir(self) -> str:
        if self.script_dir is None:
            script = os.path.splitext(os.path.basename(sys.argv[0] if sys.argv else ""))[0] or "kernel"
            self.script_dir = os.path.join(self.trace_dir, _safe_component(script))
            os.makedirs(self.script_dir, exist_ok=True)
        return self.script_dir

    def ensure_run_dir(self) -> str:
        if self.run_dir is None:
            from datetime import datetime

            stamp = datetime.now().strftime("%Y%m%d_%H%M%S_%f")
            self.run_dir = os.path.join(self.ensure_script_dir(), ".run_records",
                                        f"run_{stamp}_{os.getpid()}_{uuid4().hex[:8]}")
            os.makedirs(self.run_dir, exist_ok=True)
        return self.run_dir

    def get_codegen_output_path(self) -> str | None:
        if self.codegen_output is not _UNSET:
            return None if self.codegen_output is None else str(self.codegen_output)
        return os.path.join(self.ensure_script_dir(), "codegen.cpp") if self.should_generate_html else None

    # ------------------------------------------------------------------ records
    def allocate_index(self) -> int:
        with self._lock:
            self.pass_index += 1
            return self.pass_index - 1

    def append_record(self, record: LowerRecord) -> None:
        with self._lock:
            self.records.append(record)
            self.records.sort(key=lambda r: r.index)   # nested passes finish first; keep start order
        self._save_raw(record)

    def _save_raw(self, record: LowerRecord) -> None:
        try:
            folder = os.path.join(self.ensure_run_dir(), _safe_component(record.phase))
            os.makedirs(folder, exist_ok=True)
            stem = os.path.join(folder, f"{record.index:02d}_{_safe_component(record.name)}")
            with open(stem + "_before.tir", "w", encoding="utf-8") as f:
                f.write(record.before_text)
            with open(stem + ("_after.cpp" if record.status == STATUS_CODEGEN else "_after.tir"), "w",
                      encoding="utf-8") as f:
                f.write(record.after_text)
        except Exception as exc:  # noqa: BLE001 - tracing never fails a compile
            _say(f"{_ANSI_RED}WARNING: could not save the raw trace files: {exc}{_ANSI_RESET}")

    def flush_html(self) -> None:
        """Rewrite this run's report and point ``<script dir>/report.html`` at it (html modes)."""
        if not self.should_generate_html or not self.records or self.run_dir is None:
            return
        from .html import generate_html

        with self._lock:
            records = list(self.records)
        report = generate_html(records, os.path.join(self.run_dir, "report.html"), section_cache=self.section_cache)
        link = os.path.join(self.ensure_script_dir(), "report.html")
        tmp = f"{link}.{os.getpid()}.{uuid4().hex}.tmp"
        try:
            os.symlink(os.path.relpath(report, os.path.dirname(link)), tmp)
            os.replace(tmp, link)
        except OSError:
            shutil.copyfile(report, tmp)
            os.replace(tmp, link)
        finally:
            with contextlib.suppress(OSError):
                os.remove(tmp)

    def _flush_quietly(self) -> None:
        if self.should_generate_html:
            try:
                self.flush_html()
            except Exception as exc:  # noqa: BLE001
                _say(f"{_ANSI_RED}WARNING: could not write the HTML report: {exc}{_ANSI_RESET}")

    # ------------------------------------------------------------------ tool hooks
    def create_pass_instrument(self) -> StackedPassInstrument | None:
        if not self.enabled:
            return None
        return StackedPassInstrument(_TraceObserver(self), sequence_allocator=self.allocate_index,
                                     phase_provider=lambda: current_pass_phase() or _UNSCOPED)

    @contextlib.contextmanager
    def pipeline_scope(self, base_phase: str):
        if not self.enabled:
            yield
            return
        self.pipeline_count += 1
        number = self.pipeline_count
        phase = base_phase if number == 1 else f"run{number}_{base_phase}"
        try:
            with pass_phase(phase):
                yield
        except Exception as error:
            self.abort_active_instruments(error)
            _say(f"{_ANSI_RED}EXCEPTION in {phase}: {error}{_ANSI_RESET}")
            raise
        finally:
            self._flush_quietly()
        _say(f"pipeline {number} ({phase}) complete: {len(self.records)} records")

    def abort_active_instruments(self, error: BaseException) -> None:
        """Record the passes of this session still open when ``error`` escaped them."""
        for instrument in reversed(active_stacked_pass_instruments()):
            observer = instrument.observer
            if isinstance(observer, _TraceObserver) and observer.session is self and instrument.pending_events:
                instrument.abort(error)

    def run_codegen(self, event: CodegenEvent, next_call):
        if not self.enabled:
            return next_call()
        if self.should_generate_html:
            self.ensure_run_dir()
        before = str(event.mod)
        output_path = self.get_codegen_output_path()
        try:
            with pass_phase("codegen"):
                result = next_call()
        except Exception as error:
            self.abort_active_instruments(error)
            index = self.allocate_index()
            self.append_record(LowerRecord("codegen", "codegen", index, before, "", False, status=STATUS_FAILED,
                                           error_msg=str(error)))
            _say(f"{_ANSI_RED}codegen/{index:02d}_codegen: FAILED ({error}){_ANSI_RESET}")
            self._flush_quietly()
            raise
        index = self.allocate_index()   # after the call: passes run inside codegen come first
        generated = after = ""
        patched = None
        try:
            generated = _module_source(result)
            if output_path:
                patched = self._resolve_edit(generated, output_path, index)
            after = patched if patched is not None else generated
            added, removed = count_changes(before, after)
            self.append_record(LowerRecord("codegen", "codegen", index, before, after, True, added, removed,
                                           status=STATUS_CODEGEN))
            where = f"  ->  {_ANSI_BLUE}{output_path}{_ANSI_RESET}" if output_path else ""
            _say(f"codegen/{index:02d}_codegen: CODEGEN (+{added}/-{removed}){where}")
            self._flush_quietly()
        except Exception as exc:  # noqa: BLE001 - tracing never fails a compile
            _say(f"{_ANSI_RED}WARNING: tracing the generated source failed: {exc}{_ANSI_RESET}")
        if self.should_print_terminal and after:
            print_diff(before, after, "codegen (TIR before)", "codegen (source after)")
        if patched is None:
            return result
        if event.name in _SOURCE_ONLY_CODEGEN:
            return _make_patched_source_module(result, patched)
        if patched.rstrip() != generated.rstrip():
            kind = getattr(getattr(event.target, "kind", None), "name", "")
            hint = (" (upstream's nvrtc backend, and TileLang's own target.build.cuda, compile from source and "
                    "pick such edits up)") if kind == "cuda" else ""
            _say(f"{_ANSI_YELLOW}codegen/{index:02d}_codegen: NOTE - the edits in {output_path} are shown in the "
                 f"trace but were NOT recompiled: {event.name} builds a binary from the TIR{hint}{_ANSI_RESET}")
        return result

    def _resolve_edit(self, generated: str, path: str, index: int) -> str | None:
        with _path_lock(path):
            return self._resolve_edit_locked(generated, path, index)

    def _resolve_edit_locked(self, generated: str, path: str, index: int) -> str | None:
        """Three files: ``path`` (the user's working copy), ``.original`` (what was last
        generated into it) and ``.latest`` (what was generated now). Returns the source to use
        instead of ``generated``, or None."""
        original, tag = path + ".original", f"codegen/{index:02d}_codegen"
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            _write(path + ".latest", generated)
            if not (os.path.isfile(path) and os.path.isfile(original)):
                if os.path.isfile(path):
                    shutil.copyfile(path, path + ".bak")
                    _say(f"{tag}: {path} existed without a baseline: kept as {path}.bak")
                _write(original, generated)
                shutil.copyfile(original, path)
                _say(f"generated source written to {_ANSI_GREEN}{path}{_ANSI_RESET} (edit it and compile again)")
                return None
            baseline, working = _read(original), _read(path)
            edited = working.rstrip() != baseline.rstrip()
            regenerated = generated.rstrip() != baseline.rstrip()
            if not edited:
                if regenerated:
                    _write(original, generated)
                    _write(path, generated)
                    _say(f"{_ANSI_CYAN}{tag}: REGENERATED (the generated source changed; no user edits){_ANSI_RESET}")
                return None
            if not regenerated:
                _say(f"{_ANSI_BOLD}{_ANSI_GREEN}{tag}: PATCHED (using the edited {path}){_ANSI_RESET}")
                return working
            if working.rstrip() == generated.rstrip():
                _write(original, generated)
                _say(f"{_ANSI_GREEN}{tag}: SYNCED (the edits equal the new generated source){_ANSI_RESET}")
                return working
            shutil.copyfile(path, path + ".bak")
            shutil.copyfile(original, original + ".bak")
            _write(original, generated)
            _write(path, generated)
            _say(f"{_ANSI_YELLOW}{tag}: CONFLICT (the generated source changed too: regenerated; the edits are "
                 f"in {path}.bak){_ANSI_RESET}")
        except Exception as exc:  # noqa: BLE001 - tracing never fails a compile
            _say(f"{_ANSI_RED}WARNING: codegen file I/O failed: {exc}{_ANSI_RESET}")
        return None

    def finish(self, error: BaseException | None) -> None:
        if self._finished:
            return
        self._finished = True
        self._flush_quietly()
        if self.should_generate_html and self.records and self.script_dir is not None:
            _say(f"HTML report: {_ANSI_BLUE}{os.path.join(self.script_dir, 'report.html')}{_ANSI_RESET}")

    def reset(self) -> None:
        """Forget this session's records (numbering restarts)."""
        with self._lock:
            self.records.clear()
            self.section_cache.clear()
            self.pass_index = 0
            self.pipeline_count = 0


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


class _TraceObserver(PassEventObserver):
    """Pass events of one PassContext -> records of one session."""

    def __init__(self, session: LowerTraceSession) -> None:
        self.session = session

    def pass_started(self, mod, event: PassEvent) -> str:
        if self.session.should_generate_html:
            self.session.ensure_run_dir()
        return str(mod)

    def pass_finished(self, mod, event: PassEvent, before: str) -> None:
        session = self.session
        after = str(mod)
        changed = after != before
        added, removed = count_changes(before, after) if changed else (0, 0)
        phase, name = event.phase or _UNSCOPED, event.name.rsplit(".", 1)[-1]
        session.append_record(LowerRecord(phase, name, event.sequence, before, after, changed, added, removed,
                                          depth=event.depth, parent_index=event.parent_sequence))
        tag = f"{_ANSI_GREEN}CHANGED" if changed else f"{_ANSI_DIM}NO-OP"
        _say(f"{phase}/{event.sequence:02d}_{name}: {tag}{_ANSI_RESET}")
        session._flush_quietly()
        if session.should_print_terminal and changed:
            print_diff(before, after, f"{phase}/{name} (before)", f"{phase}/{name} (after)")

    def passes_incomplete(self, passes, error: BaseException | None) -> None:
        message = str(error) if error is not None else "the pass did not finish"
        for item in passes:
            event = item.event
            if event is None:
                continue
            phase, name = event.phase or _UNSCOPED, event.name.rsplit(".", 1)[-1]
            self.session.append_record(LowerRecord(
                phase, name, event.sequence, str(item.state) if item.state is not None else "", "", False,
                status=STATUS_FAILED, error_msg=message, depth=event.depth, parent_index=event.parent_sequence))
            _say(f"{_ANSI_RED}{phase}/{event.sequence:02d}_{name}: FAILED ({message}){_ANSI_RESET}")
        self.session._flush_quietly()

    def callback_mismatch(self, actual: str, expected: str | None) -> None:
        _say(f"{_ANSI_RED}WARNING: after-pass callback for {actual!r} while {expected!r} was running{_ANSI_RESET}")


def get_last_session() -> LowerTraceSession | None:
    """The session most recently created in this execution context."""
    return _last_session.get()


def current_lower_trace_session() -> LowerTraceSession | None:
    session = current_compile_pass_instrumentation()
    return session.find_tool(LowerTraceSession) if session is not None else None


def _snapshot() -> dict:
    from tilelang.env import env

    with _config_lock:
        mode, trace_dir, output = _overrides["mode"], _overrides["trace_dir"], _overrides["codegen_output"]
        return {"mode": env.get_lower_trace_mode() if mode is _UNSET else mode,
                "trace_dir": env.get_lower_trace_dir() if trace_dir is _UNSET or not trace_dir else trace_dir,
                "codegen_output": output}


def _new_session(config: dict | None = None) -> LowerTraceSession:
    session = LowerTraceSession(**(config or _snapshot()))
    _last_session.set(session)
    return session


def create_pass_instrument() -> StackedPassInstrument:
    """An instrument recording into the active compilation's trace (or a new standalone one)."""
    session = current_lower_trace_session() or _new_session()
    instrument = session.create_pass_instrument()
    if instrument is None:   # tracing is off: an instrument that records nothing
        instrument = StackedPassInstrument(_TraceObserver(session), capture_predicate=lambda _n, _d: False,
                                           sequence_allocator=session.allocate_index)
    return instrument


def enable(*, mode=_UNSET, trace_dir=_UNSET, codegen_output=_UNSET) -> None:
    """Trace every compilation that starts from now on (see the module docstring)."""
    if mode is not _UNSET and _parse_lower_trace_mode(mode) is None:
        disable()
        with _config_lock:
            _overrides["mode"] = None
        return
    with _config_lock:
        if mode is not _UNSET:
            _overrides["mode"] = _parse_lower_trace_mode(mode)
        if trace_dir is not _UNSET:
            _overrides["trace_dir"] = None if trace_dir is None else str(trace_dir)
        if codegen_output is not _UNSET:
            _overrides["codegen_output"] = None if codegen_output is None else str(codegen_output)
        config = _snapshot()
        register_pass_instrumentation_tool(_TOOL_NAME, lambda: _new_session(config))
    print(f"[lower_trace] tracing every compilation's passes (mode {config['mode']}, "
          f"directory {config['trace_dir']})")


def disable() -> None:
    """Stop tracing compilations that start from now on; forget the configuration given to enable."""
    with _config_lock:
        unregister_pass_instrumentation_tool(_TOOL_NAME)
        for key in _overrides:
            _overrides[key] = _UNSET
    _last_session.set(None)


def reset() -> None:
    """Clear the records of the active compilation's trace."""
    session = current_lower_trace_session()
    if session is not None:
        session.reset()
