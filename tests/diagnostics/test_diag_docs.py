"""docs/diagnostics.md is generated from the registry and must be up to date."""

import subprocess
import sys
from pathlib import Path

from tilelang.diagnostics import codes
from tilelang.diagnostics.docgen import DOC_PATH, render_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_committed_doc_is_up_to_date():
    committed = (ROOT / DOC_PATH).read_text(encoding="utf-8")
    assert committed == render_markdown(), "run: python scripts/gen_diagnostics_doc.py"


def test_every_code_has_its_anchor_in_the_doc():
    text = render_markdown()
    for entry in codes.all_codes():
        assert f'<a id="{entry.anchor}"></a>' in text
        assert entry.url.endswith("#" + entry.anchor)


def test_generator_check_mode_passes():
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_diagnostics_doc.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
