"""Where upstream TileLang's pinned tests and examples are, for the tests that read them.

The copy lives beside the checkout (``../shared/conformance/upstream``) on our machines and in CI;
on the GPU machine it is carried into the git-ignored ``.gpu/conf/upstream`` (docs/conformance.md).
``UPSTREAM`` is the first of those that exists, or None; ``examples(folder)`` is upstream's
``examples/<folder>`` there, or None, for a ``pytest.mark.skipif``."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CANDIDATES = [ROOT.parent / "shared" / "conformance" / "upstream",
              ROOT / "shared" / "conformance" / "upstream",
              ROOT / ".gpu" / "conf" / "upstream",
              ROOT / ".gpu" / "conformance" / "upstream"]
UPSTREAM = next((p for p in CANDIDATES if (p / "examples").is_dir()), None)


def examples(folder: str = "") -> Path | None:
    if UPSTREAM is None:
        return None
    path = UPSTREAM / "examples" / folder if folder else UPSTREAM / "examples"
    return path if path.is_dir() else None
