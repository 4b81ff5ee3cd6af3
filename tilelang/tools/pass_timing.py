"""Per-pass wall-clock timing of a compilation.

Contract:

- :class:`TileLangPassTimingInstrument` times every pass of one TVM ``PassContext``
  (``.instrument`` is the TVM ``PassInstrument`` to put in it): inclusive time, self time
  (inclusive minus nested passes), nesting depth, start order and the kernel the module holds
  (``global_symbol``, ``"first +N more"`` for several). Its callback state is a separate object,
  so the native instrument never keeps the wrapper alive. A pass that raises leaves an open
  frame: it is discarded (with a warning) when the context exits; an after-callback that
  matches no open pass is ignored (with a warning).
- ``report(context=None)`` is a table (inclusive and self seconds and percentages of the
  top-level total, nested passes indented, ``name(kernel)``) plus the ten slowest passes;
  ``threshold_ms`` hides passes whose inclusive time is under it ("N passes skipped").
- :class:`PassTimingTool` is the per-compilation tool (``tilelang.instrumentation``): one fresh
  timing instrument per PassContext, labelled by that context (``stage=lower, kernel=main``),
  one combined report logged (``tilelang.pass_timing``, INFO) when the compilation ends, failed
  or not. It is created by :func:`create_pass_timing_tool` when the pass config
  ``tl.pass_profile`` or ``TILELANG_PASS_PROFILE=1`` asks for it (threshold:
  ``tl.pass_profile_threshold_ms``, else ``TILELANG_PASS_PROFILE_THRESHOLD_MS``). Timing is
  taken before every other instrument's callbacks (priority -100), so their cost is excluded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from tvm.ir import _ffi_instrument_api

from tilelang import knobs
from tilelang.instrumentation import PassInstrumentationTool, current_pass_instrument_context

__all__ = ["PassTimingRecord", "PassTimingTool", "TileLangPassTimingInstrument", "create_pass_timing_tool",
           "pass_profile_requested"]

logger = logging.getLogger("tilelang.pass_timing")


def _extract_kernel_label(mod) -> str:
    """The kernel name(s) of ``mod`` for a report row, or "" (never raises: it runs in callbacks)."""
    try:
        functions = getattr(mod, "functions", None) if mod is not None else None
        names: list[str] = []
        for gvar, func in (functions.items() if functions else ()):
            attrs = getattr(func, "attrs", None)
            symbol = attrs.get("global_symbol") if attrs is not None else None
            name = str(symbol if symbol is not None else getattr(gvar, "name_hint", "") or "")
            if name and name not in names:
                names.append(name)
        if not names:
            return ""
        return names[0] if len(names) == 1 else f"{names[0]} +{len(names) - 1} more"
    except Exception:  # noqa: BLE001 - a label is never worth failing a compile
        return ""


@dataclass
class PassTimingRecord:
    """One finished pass: seconds inclusive of nested passes and without them."""

    name: str
    duration_s: float
    depth: int
    self_duration_s: float = 0.0
    sequence: int = 0
    kernel: str = ""


@dataclass
class _Open:
    name: str
    start: float
    depth: int
    sequence: int
    kernel: str
    children_s: float = 0.0


class _TimingState:
    """The callbacks' state (held by the native instrument, not by the wrapper)."""

    def __init__(self):
        self.records: list[PassTimingRecord] = []
        self.stack: list[_Open] = []
        self.count = 0

    def enter_pass_ctx(self):
        self.records.clear()
        self.stack.clear()
        self.count = 0

    def exit_pass_ctx(self):
        if self.stack:
            logger.warning("Discarding %d incomplete pass timing frame(s): %s", len(self.stack),
                           ", ".join(f.name for f in self.stack))
            self.stack.clear()

    def run_before_pass(self, mod, info):
        self.stack.append(_Open(str(info.name), time.monotonic(), len(self.stack), self.count,
                                _extract_kernel_label(mod)))
        self.count += 1

    def run_after_pass(self, _mod, info):
        name = str(info.name)
        if not self.stack or self.stack[-1].name != name:
            logger.warning("Ignoring unmatched pass timing callback for %s (expected %s)", name,
                           self.stack[-1].name if self.stack else "<none>")
            self.stack.clear()
            return
        frame = self.stack.pop()
        spent = time.monotonic() - frame.start
        self.records.append(PassTimingRecord(frame.name, spent, frame.depth, max(0.0, spent - frame.children_s),
                                             frame.sequence, frame.kernel))
        if self.stack:
            self.stack[-1].children_s += spent


class TileLangPassTimingInstrument:
    """Times the passes of one PassContext; put ``.instrument`` in its ``instruments``."""

    def __init__(self, threshold_ms: float = 0.0):
        self._state = _TimingState()
        self._records = self._state.records
        self._stack = self._state.stack
        self._threshold_ms = float(threshold_ms)
        state = self._state   # the native callbacks capture the state only
        self._instrument = _ffi_instrument_api.PassInstrument(
            "TileLangPassTimingInstrument", state.enter_pass_ctx, state.exit_pass_ctx, None,
            state.run_before_pass, state.run_after_pass)

    # direct drivers of the callbacks (tests, and callers without a PassContext)
    def _enter_pass_ctx(self):
        self._state.enter_pass_ctx()

    def _exit_pass_ctx(self):
        self._state.exit_pass_ctx()

    def _run_before_pass(self, info, mod=None):
        self._state.run_before_pass(mod, info)

    def _run_after_pass(self, info):
        self._state.run_after_pass(None, info)

    @property
    def instrument(self):
        """The TVM ``PassInstrument``."""
        return self._instrument

    @property
    def threshold_ms(self) -> float:
        return self._threshold_ms

    @property
    def records(self) -> list[PassTimingRecord]:
        """Finished passes in start order."""
        return sorted(self._records, key=lambda r: r.sequence)

    @property
    def total_duration_s(self) -> float:
        """Seconds of the top-level passes (nested ones are inside them)."""
        return sum(r.duration_s for r in self._records if r.depth == 0)

    def report(self, context: str | None = None) -> str:
        if not self._records:
            text = "[tilelang pass timing] No passes recorded."
            return f"{text} Context: {context}" if context else text
        threshold_s = self._threshold_ms / 1000.0
        total = self.total_duration_s
        records = self.records

        def label(r):
            return f"{r.name}({r.kernel})" if r.kernel else r.name

        def pct(seconds):
            return seconds / total * 100.0 if total > 0 else 0.0

        shown = [r for r in records if r.duration_s >= threshold_s]
        width = max([40] + [len("  " * r.depth + label(r)) for r in shown])
        rule = width + 52
        out = ["=" * rule, "TileLang Pass Timing Report"]
        if context:
            out.append(f"Context: {context}")
        out += ["=" * rule, f"Total: {total:.4f}s ({len(records)} passes)"]
        if self._threshold_ms > 0:
            out.append(f"(inclusive threshold: {self._threshold_ms:.1f}ms)")
        out += ["-" * rule,
                f"{'#':>3}  {'Pass':<{width}} {'Inclusive':>10} {'Self':>10}  {'Incl %':>7} {'Self %':>7}",
                "-" * rule]
        for number, r in enumerate(records, 1):
            if r.duration_s < threshold_s:
                continue
            out.append(f"{number:>3}  {'  ' * r.depth + label(r):<{width}} {r.duration_s:>9.4f}s "
                       f"{r.self_duration_s:>9.4f}s  {pct(r.duration_s):>6.1f}% {pct(r.self_duration_s):>6.1f}%")
        out.append("-" * rule)
        slowest = sorted(shown, key=lambda r: r.duration_s, reverse=True)[:10]
        if slowest:
            out.append(f"Top {len(slowest)} slowest passes (inclusive):")
            for rank, r in enumerate(slowest, 1):
                out.append(f"  {rank:>2}. {label(r):<{width}} {r.duration_s:>9.4f}s {pct(r.duration_s):>5.1f}%")
        skipped = len(records) - len(shown)
        if skipped:
            out.append(f"({skipped} passes skipped - under {self._threshold_ms:.1f}ms inclusive threshold)")
        out.append("=" * rule)
        return "\n".join(out)

    def print_report(self, context: str | None = None) -> None:
        logger.info("\n%s", self.report(context=context))


class PassTimingTool(PassInstrumentationTool):
    """Per-compilation pass timing: one instrument per PassContext, one report at the end."""

    pass_instrument_priority = -100   # first in, first out: other instruments' work is not timed

    def __init__(self, threshold_ms: float = 0.0):
        self.threshold_ms = float(threshold_ms)
        self._runs: list[tuple[str | None, TileLangPassTimingInstrument]] = []
        self._finished = False

    def create_pass_instrument(self):
        timing = TileLangPassTimingInstrument(threshold_ms=self.threshold_ms)
        self._runs.append((current_pass_instrument_context(), timing))
        return timing.instrument

    @property
    def timings(self) -> tuple:
        return tuple(t for _, t in self._runs)

    @property
    def contexts(self) -> tuple:
        return tuple(c for c, _ in self._runs)

    @property
    def records(self) -> list[PassTimingRecord]:
        return [r for _, t in self._runs for r in t.records]

    def report(self) -> str:
        """One section per PassContext of the compilation."""
        return "\n\n".join(t.report(context=c) for c, t in self._runs)

    def print_report(self) -> None:
        if self._runs:
            logger.info("\n%s", self.report())

    def finish(self, error: BaseException | None) -> None:
        if not self._finished:
            self._finished = True
            self.print_report()


_PROFILE = "tl.pass_profile"                     # PassConfigKey.TL_PASS_PROFILE
_THRESHOLD = "tl.pass_profile_threshold_ms"      # PassConfigKey.TL_PASS_PROFILE_THRESHOLD_MS


def pass_profile_requested(pass_configs: Mapping | None) -> bool:
    """Whether ``tl.pass_profile`` (or ``TILELANG_PASS_PROFILE``) asks for pass timing."""
    return bool((pass_configs or {}).get(_PROFILE)) or knobs.pass_profile()


def create_pass_timing_tool(pass_configs: Mapping | None) -> PassTimingTool | None:
    """The timing tool of a compilation with these pass configs, or None when timing is off."""
    configs = pass_configs or {}
    if not pass_profile_requested(configs):
        return None
    if _THRESHOLD in configs:   # the config's threshold, even 0, wins over the environment's
        threshold = knobs.parse_threshold_ms(configs[_THRESHOLD], _THRESHOLD)
    else:
        threshold = knobs.pass_profile_threshold_ms()
    return PassTimingTool(threshold_ms=threshold)
