"""Host-side path helpers of the IKET tool and the profiler command line.

``set_output_dir(path)`` makes ``path`` (created, made absolute) the export directory of this
process and sets ``TL_IKET_OUTPUT_DIR`` (``None`` clears both); ``output_dir(default)`` is that
directory, else ``TL_IKET_OUTPUT_DIR``, else ``default`` (absolute), else None;
``output_path(name, directory=...)`` a file in it (``RuntimeError`` when no directory is known);
``trace_files(directory=...)`` its ``*.trace.json`` files, largest first;
``profile_command(cmd, directory=...)`` the shell command that runs ``cmd`` under the external
IKET profiler (``python -m iket.cli.main``). Nothing here collects a trace.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

ENV_VAR = "TL_IKET_OUTPUT_DIR"
_configured: list[Path | None] = [None]


def set_output_dir(path: str | os.PathLike | None) -> Path | None:
    """Set (or with None clear) this process's IKET export directory."""
    if path is None:
        _configured[0] = None
        os.environ.pop(ENV_VAR, None)
        return None
    directory = Path(path).expanduser().absolute()
    directory.mkdir(parents=True, exist_ok=True)
    _configured[0] = directory
    os.environ[ENV_VAR] = str(directory)
    return directory


def output_dir(default: str | os.PathLike | None = None) -> Path | None:
    """The IKET export directory (see the module docstring)."""
    if _configured[0] is not None:
        return _configured[0]
    for candidate in (os.environ.get(ENV_VAR) or None, default):
        if candidate is not None:
            return Path(candidate).expanduser().absolute()
    return None


def output_path(name: str, *, directory: str | os.PathLike | None = None) -> Path:
    """``name`` inside the export directory (created when missing)."""
    base = output_dir(directory)
    if base is None:
        raise RuntimeError("no IKET output directory: pass directory=..., use iket.session(output_dir=...) "
                           f"or iket.set_output_dir(...), or set {ENV_VAR}")
    base.mkdir(parents=True, exist_ok=True)
    return base / name


def trace_files(*, directory: str | os.PathLike | None = None) -> list[Path]:
    """The profiler's ``*.trace.json`` exports in the export directory, largest first."""
    base = output_dir(directory)
    if base is None or not base.is_dir():
        return []
    return sorted(base.glob("*.trace.json"), key=lambda p: p.stat().st_size, reverse=True)


def profile_command(command: str | Sequence[str], *, directory: str | os.PathLike, postprocess: str = "all",
                    clobber: bool = True) -> str:
    """The shell command running ``command`` under the IKET profiler, exporting to ``directory``
    (a str ``command`` is appended verbatim, a sequence quoted word by word)."""
    words = ["python", "-m", "iket.cli.main", "--output-dir", str(Path(directory).expanduser())]
    if clobber:
        words.append("--clobber")
    words += ["profile", "--postprocess", postprocess, "--"]
    prefix = shlex.join(words)
    if isinstance(command, str):
        return f"{prefix} {command}"
    return " ".join([prefix, *(shlex.quote(str(word)) for word in command)])


def _snapshot() -> tuple:
    return _configured[0], os.environ.get(ENV_VAR)


def _restore(state: tuple) -> None:
    _configured[0], env = state
    if env is None:
        os.environ.pop(ENV_VAR, None)
    else:
        os.environ[ENV_VAR] = env
