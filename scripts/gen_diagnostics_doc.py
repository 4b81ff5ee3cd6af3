#!/usr/bin/env python3
"""Write docs/diagnostics.md from the diagnostic code registry.

Usage: python scripts/gen_diagnostics_doc.py [--check]
With --check, write nothing and exit 1 when the committed page is out of date.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run from a checkout without installing: the repository root holds the tilelang package.
sys.path.insert(0, str(ROOT))

from tilelang.diagnostics.docgen import DOC_PATH, render_markdown  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is out of date")
    args = parser.parse_args(argv)
    path = ROOT / DOC_PATH
    text = render_markdown()
    current = path.read_text(encoding="utf-8") if path.exists() else None
    if args.check:
        if current != text:
            print(f"{DOC_PATH} is out of date: run python scripts/gen_diagnostics_doc.py", file=sys.stderr)
            return 1
        return 0
    if current != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {DOC_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
