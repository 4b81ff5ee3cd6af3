"""Combining the diagnostics of one factory checked under several bindings.

Contract: ``merge_bindings(runs)`` takes ``[(binding description, diagnostics)]`` for the
bindings whose kernel was built and returns one list in which a finding reported at the same
place with the same code under several bindings appears once (the first binding's message; the
others are named in a note). A performance-only finding (``PERF_CODES``: alignment) that holds
for some of the checked bindings but not all is downgraded to ``info``: the kernel handles that
shape correctly, only more slowly, and the factory is evidently meant for several shapes.
"""

from __future__ import annotations

import dataclasses

from tilelang.diagnostics import Note, Severity

PERF_CODES = ("TL0301", "TL0302")


def _key(d):
    s = d.span
    return (d.code, None if s is None else (s.file, s.line, s.column, s.end_line, s.end_column))


def merge_bindings(runs) -> list:
    groups, order = {}, []
    for binding, diagnostics in runs:
        for d in diagnostics:
            k = _key(d)
            if k not in groups:
                groups[k] = (d, [binding])
                order.append(k)
            elif binding not in groups[k][1]:
                groups[k][1].append(binding)
    out = []
    for k in order:
        first, bindings = groups[k]
        notes = list(first.notes) + [Note(f"also found with {b}") for b in bindings[1:] if b]
        severity = first.severity
        if first.code in PERF_CODES and len(bindings) < len(runs) and severity is Severity.WARNING:
            severity = Severity.INFO
            clean = [b for b, _ in runs if b not in bindings and b]
            notes.append(Note(f"only some checked shapes are affected; clean with {clean[0]}" if clean
                              else "only some checked shapes are affected"))
        out.append(dataclasses.replace(first, notes=notes, severity=severity))
    return out


def dedupe(diagnostics) -> list:
    """Drop a diagnostic whose code an earlier one already reports at an overlapping span (a
    value-free fallback repeating what a failed build said, an AST check repeating an IR check)."""
    out = []
    for d in diagnostics:
        if not any(o.code == d.code and _overlap(o.span, d.span) for o in out):
            out.append(d)
    return out


def _overlap(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a == b or a.overlaps(b)
