"""The Neovim configuration of ``docs/editors.md`` ("Neovim 0.7 to 0.10"), run headless by the
Neovim on PATH (Debian 12 ships 0.7.2): diagnostics arrive, hover and code lenses answer, and the
TL0401 quick fix applies and clears the diagnostic. Skipped without ``nvim``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lsp_testing import FIXTURES, REPO

HERE = Path(__file__).resolve().parent


def _documented_config() -> str:
    doc = (REPO / "docs" / "editors.md").read_text()
    section = doc[doc.index("### Neovim 0.7 to 0.10"):]
    start = section.index("```lua\n") + len("```lua\n")
    lua = section[start: section.index("```", start)]
    assert "cmd = { 'tilelang-lsp' }," in lua
    return lua.replace("cmd = { 'tilelang-lsp' },", f"cmd = {{ '{sys.executable}', '-m', 'tilelang_lsp.server' }},")


@pytest.mark.skipif(shutil.which("nvim") is None, reason="nvim is not installed")
def test_the_documented_neovim_configuration_gets_diagnostics_hovers_lenses_and_fixes(tmp_path):
    (tmp_path / "kernel.py").write_text((FIXTURES / "no_clear.py").read_text())
    (tmp_path / "init.lua").write_text("vim.cmd('filetype on')\n" + _documented_config())
    env = {"TILELANG_NVIM_DIR": str(tmp_path), "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
           "HOME": str(tmp_path), "TILELANG_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    subprocess.run(["nvim", "--headless", "-u", str(tmp_path / "init.lua"), "-c", f"luafile {HERE / 'neovim' / 'smoke.lua'}"],
                   cwd=tmp_path, env=env, timeout=400, capture_output=True, check=True)
    seen = (tmp_path / "result.txt").read_text().splitlines()
    assert "diagnostic TL0401 line 18" in seen
    assert any(line.startswith("hover **C_local** · fragment") for line in seen)
    assert "lens ▶ Compile for sm_90a" in seen and "lens ▶ Run" in seen
    assert "action add `T.clear(C_local)` before line 15" in seen
    assert "cleared after the fix: true" in seen
    assert "line 15 now:             T.clear(C_local)" in seen
