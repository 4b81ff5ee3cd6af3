"""The Diagnostic value: one finding about the user's kernel, shared by the JIT, the CLI and the server.

Contract:
- A Diagnostic is plain data: it pickles (the checker builds it in a worker process) and survives a
  JSON round trip (``Diagnostic.from_dict(d.to_dict()) == d``).
- ``code`` is a stable ``TLxxxx`` code from ``codes.py``; ``from_code`` takes the default severity
  from the registry, so analyses rarely name a severity themselves.
- ``span`` is where the user should look; ``None`` only when nothing in their source is to blame
  (a configuration file, an internal error with no statement). Extra locations go in ``notes``.
- ``binding`` says which concrete values produced the finding, e.g.
  ``"matmul(M=1024, N=1024, K=1001) from the call at line 40"``: shapes are only known once the
  kernel factory's parameters are bound (see docs/architecture.md, "How the checker sees a kernel").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from . import codes
from .codes import Code, Severity
from .span import Span


def _span_or_none(data: Any) -> Span | None:
    return None if data is None else Span.from_dict(data)


def _span_dict(span: Span | None) -> dict[str, Any] | None:
    return None if span is None else span.to_dict()


@dataclass(frozen=True)
class Note:
    """Extra context for a diagnostic, optionally at its own location ("A_shared is allocated here")."""

    message: str
    span: Span | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"message": self.message, "span": _span_dict(self.span)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Note:
        return cls(str(data["message"]), _span_or_none(data.get("span")))


@dataclass(frozen=True)
class TextEdit:
    """Replace the text covered by ``span`` with ``new_text`` (an empty span inserts)."""

    span: Span
    new_text: str

    def to_dict(self) -> dict[str, Any]:
        return {"span": self.span.to_dict(), "new_text": self.new_text}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TextEdit:
        return cls(Span.from_dict(data["span"]), str(data["new_text"]))


@dataclass(frozen=True)
class Fix:
    """A suggested change, shown as ``help: <title>`` and offered as a quick fix in the editor."""

    title: str
    edits: tuple[TextEdit, ...] = ()

    def __post_init__(self) -> None:
        # Accept any iterable (callers naturally pass lists) but store a tuple so Fix stays hashable.
        object.__setattr__(self, "edits", tuple(self.edits))

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "edits": [e.to_dict() for e in self.edits]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fix:
        return cls(str(data["title"]), tuple(TextEdit.from_dict(e) for e in data.get("edits", ())))


@dataclass
class Diagnostic:
    """One finding; see the module docstring for the meaning of each field."""

    code: str
    severity: Severity
    message: str
    span: Span | None
    notes: list[Note] = field(default_factory=list)
    fix: Fix | None = None
    binding: str | None = None

    def __post_init__(self) -> None:
        self.severity = Severity(self.severity)
        self.notes = list(self.notes)

    @classmethod
    def from_code(
        cls,
        code: str | Code,
        message: str,
        span: Span | None = None,
        *,
        notes: Iterable[Note] = (),
        fix: Fix | None = None,
        binding: str | None = None,
        severity: Severity | str | None = None,
    ) -> Diagnostic:
        """Build a diagnostic whose severity defaults to the registry's for ``code``."""
        entry = codes.get(str(code))
        return cls(
            entry.code,
            Severity(severity) if severity is not None else entry.default_severity,
            message,
            span,
            list(notes),
            fix,
            binding,
        )

    @property
    def url(self) -> str | None:
        """The documentation link for the code, or ``None`` for a code the registry does not know."""
        entry = codes.lookup(self.code)
        return entry.url if entry else None

    def sort_key(self) -> tuple[Any, ...]:
        """Order by file, position, then severity: the order a reader walks through a file."""
        if self.span is None:
            return ("", 0, 0, self.severity.rank, self.code)
        return (self.span.file, self.span.line, self.span.column, self.severity.rank, self.code)

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity.value,
            "message": self.message,
            "span": _span_dict(self.span),
            "notes": [n.to_dict() for n in self.notes],
            "fix": None if self.fix is None else self.fix.to_dict(),
            "binding": self.binding,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Diagnostic:
        """Inverse of ``to_dict``; ignores keys it does not know (``render_json`` adds ``url`` and ``name``)."""
        fix = data.get("fix")
        return cls(
            code=str(data["code"]),
            severity=Severity(data["severity"]),
            message=str(data["message"]),
            span=_span_or_none(data.get("span")),
            notes=[Note.from_dict(n) for n in data.get("notes", ())],
            fix=None if fix is None else Fix.from_dict(fix),
            binding=data.get("binding"),
        )


def sort_diagnostics(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    return sorted(diagnostics, key=Diagnostic.sort_key)


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity is Severity.ERROR for d in diagnostics)
