"""The tuning progress display on stderr (no dependencies).

On a terminal, one status line is redrawn in place::

    autotune matmul: bench   [##########----------]  4/8  12.3 s  best 0.112 ms

and lines that must stay (skipped configs, the summary) are printed above it.  When the
stream is not a terminal (CI logs, pytest capture, a pipe), every event is one plain line
and nothing is redrawn.  ``Progress(name, stream=None)`` writes to ``sys.stderr`` as it is
at construction time.
"""

from __future__ import annotations

import shutil
import sys
import time

_BAR = 20
_REDRAW_S = 0.25
_CLEAR = "\r\x1b[2K"  # carriage return, then erase the line


class Progress:
    """Status of one tuning run: phases of ``total`` steps, plus lines that stay."""

    def __init__(self, name: str, stream=None):
        self.name = name
        self.stream = stream if stream is not None else sys.stderr
        try:
            self.tty = bool(self.stream.isatty())
        except (AttributeError, ValueError):
            self.tty = False
        self.phase, self.total, self.done = "", 0, 0
        self.best: float | None = None
        self._t0 = time.monotonic()
        self._drawn = 0.0

    def start(self, phase: str, total: int, message: str = "") -> None:
        """Begin a phase of ``total`` steps, optionally announcing it with a line that stays."""
        self.phase, self.total, self.done = phase, total, 0
        self._t0 = time.monotonic()
        if message:
            self.line(message)
        self._draw()

    def advance(self, text: str, keep: bool = False, best: float | None = None) -> None:
        """One step done.  ``text`` describes it: a plain line per step when not on a terminal;
        on a terminal only ``keep`` steps (a skipped config) print a line, the rest just move the bar."""
        self.done += 1
        if best is not None:
            self.best = best
        if not self.tty:
            self._write(f"{self._prefix()} [{self.done}/{self.total}] {text}\n")
        elif keep:
            self.line(text)
        else:
            self._draw()

    def tick(self) -> None:
        """Redraw the elapsed time (terminal only, at most a few times a second)."""
        if self.tty and time.monotonic() - self._drawn > _REDRAW_S:
            self._draw()

    def line(self, text: str) -> None:
        """A line that stays on screen (above the status line on a terminal)."""
        clear = _CLEAR if self.tty else ""
        self._write(f"{clear}autotune {self.name}: {text}\n")
        self._draw()

    def close(self) -> None:
        """Erase the status line; later ``line`` calls print plain lines only."""
        if self.tty and self.total:
            self._write(_CLEAR)
        self.total = 0

    # ------------------------------------------------------------ drawing
    def _prefix(self) -> str:
        return f"autotune {self.name}: {self.phase}"

    def _draw(self) -> None:
        if not self.tty or not self.total:
            return
        self._drawn = time.monotonic()
        filled = _BAR * self.done // self.total
        best = f"  best {self.best:.4g} ms" if self.best is not None else ""
        text = (f"{self._prefix():<{len(self.name) + 18}} [{'#' * filled}{'-' * (_BAR - filled)}] "
                f"{self.done:>{len(str(self.total))}}/{self.total}  {time.monotonic() - self._t0:5.1f} s{best}")
        width = shutil.get_terminal_size((100, 20)).columns - 1
        self._write(_CLEAR + text[:width])

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed or broken stream must not break tuning
