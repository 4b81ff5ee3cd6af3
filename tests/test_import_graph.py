"""The package structure drawn from its own imports (``scripts/import_graph.py``) has no circles
and no back arrows but the justified lazy ones (docs/architecture.md, "Package structure")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import import_graph  # noqa: E402


@pytest.fixture(scope="module")
def edges():
    return import_graph.all_edges()


def _lines(edges) -> str:
    return "\n".join(import_graph._describe(e) for e in edges)


def test_no_import_circles(edges):
    found = import_graph.circles(edges)
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_back_arrows_but_the_justified_lazy_ones(edges):
    bad = import_graph.unjustified(edges)
    assert not bad, "a lower layer imports a higher one:\n" + _lines(bad)


def test_every_module_has_a_layer():
    homeless = [m for m in import_graph.find_modules() if import_graph.layer_of(m) == len(import_graph.LAYERS)]
    assert not homeless, f"add these modules to LAYERS in scripts/import_graph.py: {homeless}"


def test_no_import_hidden_in_dunder_import(edges):
    assert not [e for e in edges if e.hidden], _lines([e for e in edges if e.hidden])


def test_the_script_finds_a_circle_and_a_back_arrow(tmp_path):
    """The graph is read from the source text: a planted circle and back arrow are reported and the
    script exits 1."""
    pkg = tmp_path / "tilelang"
    (pkg / "transform").mkdir(parents=True)
    (pkg / "layout").mkdir()
    (tmp_path / "tilelang_lsp").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "transform" / "__init__.py").write_text("")
    (pkg / "transform" / "a.py").write_text("from tilelang.transform import b\n")
    (pkg / "transform" / "b.py").write_text("def f():\n    from . import a\n")
    (pkg / "layout" / "__init__.py").write_text("def g():\n    from tilelang.transform.a import x\n")
    planted = import_graph.all_edges(tmp_path)
    assert import_graph.circles(planted) == [["tilelang.transform.a", "tilelang.transform.b"]]
    back = import_graph.back_arrows(planted)
    assert [(e.src, e.dst, e.kind) for e in back] == [("tilelang.layout", "tilelang.transform.a", "lazy")]


def test_the_script_runs_on_the_package():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "import_graph.py")], capture_output=True, text=True,
                          timeout=120)
    assert "circles:" in proc.stdout and "back arrows:" in proc.stdout
    assert proc.returncode == (1 if "circles: 0" not in proc.stdout else 0), proc.stdout + proc.stderr
