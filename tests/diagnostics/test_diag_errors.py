"""TileLangCompileError: prints the caret snippet, pickles, and hides compiler frames from users."""

import os
import pickle
import subprocess
import sys
import textwrap
import traceback
import types
from pathlib import Path

import pytest

import tilelang.diagnostics as diagnostics_pkg
from tilelang.diagnostics import (
    Diagnostic,
    Span,
    TileLangCompileError,
    filter_traceback,
    hide_internal_frames,
    raise_user_error,
    render_text,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = Path(diagnostics_pkg.__file__).resolve().parent

# Stand-ins for compiler passes: code whose frames belong to the tilelang package.
INTERNAL_SOURCE = """\
from tilelang.diagnostics import Diagnostic, hide_internal_frames, raise_user_error


def lower(span):
    return run_pass(span)


def run_pass(span):
    return check_gemm(span)


def check_gemm(span):
    raise_user_error([Diagnostic.from_code("TL0101", "gemm K mismatch", span)])


@hide_internal_frames
def compile_kernel(span):
    return lower(span)
"""


def load_internal_module() -> types.ModuleType:
    """Build a module named ``tilelang.diagnostics._fake_passes`` whose code claims a file inside the package."""
    module = types.ModuleType("tilelang.diagnostics._fake_passes")
    filename = str(PACKAGE_DIR / "_fake_passes.py")
    exec(compile(INTERNAL_SOURCE, filename, "exec"), module.__dict__)
    return module


def gemm_error() -> TileLangCompileError:
    source = "def f():\n    T.gemm(A_s, B_s, C_l)\n"
    diag = Diagnostic.from_code("TL0101", "gemm K mismatch", Span("k.py", 2, 5, 2, 26))
    return TileLangCompileError([diag], {"k.py": source})


def test_str_is_the_text_rendering():
    error = gemm_error()
    assert str(error) == render_text(error.diagnostics, error.sources)
    assert "  |     ^^^^^^^^^^^^^^^^^^^^^" in str(error)
    assert error.errors == error.diagnostics
    assert "no diagnostics" in str(TileLangCompileError([]))


def test_error_pickles_with_its_diagnostics():
    error = gemm_error()
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is TileLangCompileError
    assert clone.diagnostics == error.diagnostics
    assert str(clone) == str(error)


def test_raise_user_error_suppresses_the_internal_context(monkeypatch):
    monkeypatch.delenv("TILELANG_FRONTEND_DEBUG", raising=False)
    diag = Diagnostic.from_code("TL0101", "m", None)
    with pytest.raises(TileLangCompileError) as info:
        try:
            {}["missing"]
        except KeyError:
            raise_user_error([diag])
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert info.value.diagnostics == [diag]


def test_debug_mode_keeps_the_internal_context(monkeypatch):
    monkeypatch.setenv("TILELANG_FRONTEND_DEBUG", "1")
    with pytest.raises(TileLangCompileError) as info:
        try:
            {}["missing"]
        except KeyError:
            raise_user_error([Diagnostic.from_code("TL0101", "m", None)])
    assert not info.value.__suppress_context__ and isinstance(info.value.__context__, KeyError)


def test_boundary_strips_internal_frames_from_a_caught_error(monkeypatch):
    monkeypatch.delenv("TILELANG_FRONTEND_DEBUG", raising=False)
    internal = load_internal_module()
    try:
        internal.compile_kernel(Span("k.py", 1, 1, 1, 2))
    except TileLangCompileError as error:
        printed = "".join(traceback.format_exception(error))
    assert "_fake_passes" not in printed and str(PACKAGE_DIR / "errors.py") not in printed
    assert "test_boundary_strips_internal_frames_from_a_caught_error" in printed


def test_filter_traceback_keeps_user_frames_only(monkeypatch):
    monkeypatch.delenv("TILELANG_FRONTEND_DEBUG", raising=False)
    internal = load_internal_module()
    try:
        internal.lower(Span("k.py", 1, 1, 1, 2))
    except TileLangCompileError as error:
        frames = traceback.extract_tb(filter_traceback(error).__traceback__)
    assert [f.name for f in frames] == ["test_filter_traceback_keeps_user_frames_only"]


def test_hide_internal_frames_passes_other_exceptions_through():
    @hide_internal_frames
    def broken():
        raise RuntimeError("a real bug keeps its traceback")

    with pytest.raises(RuntimeError) as info:
        broken()
    assert info.traceback[-1].name == "broken"


USER_SCRIPT = """\
import sys
import types

{import_tvm}
from tilelang.diagnostics import Span

sys.path.insert(0, {test_dir!r})
from test_diag_errors import load_internal_module

internal = load_internal_module()
GEMM = "T.gemm(A_shared, B_shared, C_local)"


def build():
    internal.lower(Span(__file__, {line}, {column}, {line}, {end_column}))


build()
"""


def run_user_script(tmp_path: Path, import_tvm: bool, debug: bool) -> tuple[str, Path, int, int]:
    script = tmp_path / "user_kernel.py"
    template_lines = USER_SCRIPT.splitlines()
    line = next(i for i, text in enumerate(template_lines, 1) if text.startswith("GEMM = "))
    column = template_lines[line - 1].index("T.gemm") + 1
    end_column = len(template_lines[line - 1])  # the closing quote is excluded
    script.write_text(
        USER_SCRIPT.format(
            import_tvm="import tvm" if import_tvm else "",
            test_dir=str(Path(__file__).parent),
            line=line,
            column=column,
            end_column=end_column,
        )
    )
    env = {k: v for k, v in os.environ.items() if k != "TILELANG_FRONTEND_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if debug:
        env["TILELANG_FRONTEND_DEBUG"] = "1"
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert result.returncode == 1, result.stderr
    return result.stderr, script, line, column


@pytest.mark.parametrize("import_tvm", [False, True], ids=["plain", "with-tvm-excepthook"])
def test_uncaught_error_shows_the_snippet_and_no_compiler_frames(tmp_path, import_tvm):
    if import_tvm:
        pytest.importorskip("tvm")
    stderr, script, line, column = run_user_script(tmp_path, import_tvm, debug=False)
    lines = stderr.splitlines()

    assert f"--> {script}:{line}:{column}" in stderr
    snippet = next(i for i, text in enumerate(lines) if text.endswith('GEMM = "T.gemm(A_shared, B_shared, C_local)"'))
    assert lines[snippet + 1].index("^") == lines[snippet].index("T.gemm")
    assert lines[snippet + 1].count("^") == len("T.gemm(A_shared, B_shared, C_local)")

    frames = [text for text in lines if text.lstrip().startswith('File "')]
    assert frames and all(f'File "{script}"' in text for text in frames), stderr
    assert "_fake_passes" not in stderr and str(PACKAGE_DIR) not in stderr
    # Only the exception's own type line may name the package.
    assert len([text for text in lines if "tilelang" in text]) <= 1, stderr
    assert any(text.startswith("tilelang.diagnostics.errors.TileLangCompileError: error[TL0101]") for text in lines)


def test_debug_mode_shows_the_compiler_frames(tmp_path):
    stderr, *_ = run_user_script(tmp_path, import_tvm=False, debug=True)
    assert "_fake_passes.py" in stderr and "check_gemm" in stderr
    assert "error[TL0101]: gemm K mismatch" in stderr
