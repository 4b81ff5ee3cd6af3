"""Runs in the tilelang-check process (tvm is imported only by its worker).

``tilelang-check PATH...``: the checker on the command line and as a pre-commit hook.

Usage: ``tilelang-check [options] PATH...`` where a PATH is a file, a folder (searched for
``*.py``, skipping hidden folders, virtual environments and ``__pycache__``) or a glob.

Output (``--format``): ``text`` (rustc-style caret snippets and a summary line), ``json``
(schema in ``tilelang.diagnostics.render``; 1-based lines and columns, exclusive end), ``sarif``
(2.1.0) or ``github`` (workflow commands; the default when ``GITHUB_ACTIONS=true``). Paths are
shown relative to the current directory when they lie under it.

Exit status, the first that applies: 4 bad usage (unknown option, bad ``--target``, a PATH that
matches nothing); 3 bad configuration (``[tool.tilelang.check]`` or a check pragma is invalid);
2 an internal error (TL0003, or the checker itself failed); 1 a warning or an error remains
after ``--select``/``--ignore`` and ignore comments; 0 otherwise (infos and hints do not fail).

``--recommend`` checks nothing: it prints the carver's tile configurations for each kernel factory
whose tile sizes are parameters (``recommend_cli``). ``--explain`` prints, one line per kernel
factory, the values it was built with and where they came from (SARIF output carries them in
the run's ``properties.tilelangKernels``); ``--statistics`` adds the time taken and how many
factories were built with values.

Kernel factories are built in a worker process (``worker_client``/``worker_main``) started before this
process imports anything heavy, so the two tvm imports overlap. ``--no-exec`` runs no user code
and only the checks that need no values. No GPU and no CUDA driver are needed.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time
from pathlib import Path

EXIT_CLEAN, EXIT_FINDINGS, EXIT_INTERNAL, EXIT_CONFIG, EXIT_USAGE = 0, 1, 2, 3, 4
_SKIP_DIRS = {"__pycache__", "node_modules", "build", "dist", "site-packages"}
FORMATS = ("text", "json", "sarif", "github")


class UsageError(Exception):
    pass


def _version() -> str:
    """The package version, read from its file: importing ``tilelang`` here would import tvm."""
    import re

    text = (Path(__file__).resolve().parent.parent / "tilelang" / "version.py").read_text()
    found = re.search(r'__version__\s*=\s*"([^"]+)"', text)
    return found.group(1) if found else "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tilelang-check", description="Check TileLang kernels without a GPU.",
        epilog="Exit status: 0 clean, 1 findings, 2 internal error, 3 bad configuration, 4 bad usage.")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files, folders or globs to check")
    parser.add_argument("--format", "--output-format", dest="format", choices=FORMATS,
                        help="output format (default: text; github under GitHub Actions)")
    parser.add_argument("--target", help="GPU architecture to check for, e.g. sm_90a, sm_89, sm_80 "
                        "(default: [tool.tilelang.check] target, else sm_90a)")
    parser.add_argument("--select", action="append", default=[], metavar="CODES",
                        help="only report these codes or prefixes (comma-separated; repeatable), e.g. TL01,TL0401")
    parser.add_argument("--ignore", action="append", default=[], metavar="CODES",
                        help="never report these codes or prefixes (comma-separated; repeatable)")
    parser.add_argument("--no-exec", action="store_true", help="run no user code: only checks that need no values")
    parser.add_argument("--timeout", type=float, help="seconds allowed per kernel build (default 20)")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colour text output")
    parser.add_argument("--statistics", action="store_true", help="print the time taken and files checked (stderr)")
    parser.add_argument("--explain", action="store_true",
                        help="say, one line per kernel factory, which values it was built with and where they came from")
    parser.add_argument("--recommend", action="store_true",
                        help="instead of checking: the carver's tile configurations (predicted time and gain) for "
                             "each kernel factory whose tile sizes are parameters (tilelang_lsp.recommend_cli)")
    parser.add_argument("--version", action="version", version=f"tilelang-check {_version()}")
    return parser


def _codes(values) -> list:
    out = []
    for value in values:
        out += [v.strip().upper() for v in value.split(",") if v.strip()]
    return out


def _validate_codes(codes, what) -> None:
    import re

    for code in codes:
        if not re.fullmatch(r"TL\d{0,4}", code):
            raise UsageError(f"{what}: {code!r} is not a code or a code prefix (like TL0401 or TL04)")


def expand_paths(paths) -> list:
    """Files to check for the PATH arguments; ``UsageError`` for one that matches nothing."""
    files = []
    for raw in paths:
        matches = sorted(glob.glob(raw, recursive=True)) if glob.has_magic(raw) else [raw]
        found = []
        for m in matches:
            p = Path(m)
            if p.is_dir():
                found += _python_files(p)
            elif p.is_file():
                found.append(p)
        if not found:
            raise UsageError(f"{raw}: no such file, folder or matching Python file")
        files += found
    unique, seen = [], set()
    for f in files:
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def _python_files(folder: Path) -> list:
    out = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS
                         and not (Path(root) / d / "pyvenv.cfg").exists())
        out += [Path(root) / n for n in sorted(names) if n.endswith(".py")]
    return out


def _display_path(file: str) -> str:
    try:
        rel = os.path.relpath(file)
    except ValueError:
        return file
    return file if rel.startswith("..") else rel


def _relativize(diagnostics) -> list:
    import dataclasses

    def fix(span):
        return span if span is None else span.with_file(_display_path(span.file))

    out = []
    for d in diagnostics:
        notes = [dataclasses.replace(n, span=fix(n.span)) for n in d.notes]
        out.append(dataclasses.replace(d, span=fix(d.span), notes=notes))
    return out


def render(diagnostics, fmt: str, color: bool) -> str:
    from tilelang.diagnostics import render_github, render_json, render_sarif, render_summary, render_text

    if fmt == "json":
        return render_json(diagnostics)
    if fmt == "sarif":
        return render_sarif(diagnostics, root=os.getcwd())
    if fmt == "github":
        return render_github(diagnostics, root=os.getcwd())
    body = render_text(diagnostics, color=color)
    summary = render_summary(diagnostics)
    return f"{body}\n\n{summary}" if body else summary


def exit_status(diagnostics, config_error: bool) -> int:
    from tilelang.diagnostics import Severity

    if config_error or any(d.code == "TL0004" for d in diagnostics):
        return EXIT_CONFIG
    if any(d.code == "TL0003" for d in diagnostics):
        return EXIT_INTERNAL
    if any(d.severity in (Severity.ERROR, Severity.WARNING) for d in diagnostics):
        return EXIT_FINDINGS
    return EXIT_CLEAN


def main(argv=None, *, worker=None) -> int:
    """Run the command line; ``worker`` lets tests and the language server share a started worker."""
    start = time.perf_counter()
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return EXIT_CLEAN if exc.code == 0 else EXIT_USAGE
    try:
        return _run(args, start, worker)
    except UsageError as err:
        print(f"tilelang-check: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as other command-line tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_CLEAN
    except Exception as err:  # noqa: BLE001 - the checker itself failed
        import traceback

        traceback.print_exc()
        print(f"tilelang-check: internal error: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_INTERNAL


def _light_tilelang() -> None:
    """Make ``import tilelang.<pure module>`` work without running ``tilelang/__init__.py``.

    That ``__init__`` imports tvm (seconds). This process only reads source and renders
    diagnostics; tvm is imported once, in the worker. So, when nothing has imported tilelang
    yet, register the package object without executing it: ``tilelang.diagnostics``,
    ``tilelang.analysis.source`` and the other value-free modules then import on their own.
    """
    import importlib.util

    if "tilelang" in sys.modules:
        return
    spec = importlib.util.find_spec("tilelang")
    if spec is None:
        return
    sys.modules["tilelang"] = importlib.util.module_from_spec(spec)


def _run(args, start, shared_worker) -> int:
    from tilelang_lsp.session import Session
    from tilelang_lsp.worker_client import WorkerClient

    files = expand_paths(args.paths)
    _check_target_spelling(args.target)
    if args.recommend:   # runs the user's factories in this process (imports tvm): no worker
        from tilelang_lsp.recommend_cli import recommend_files

        return recommend_files(files, args.target or "sm_90a", fmt="json" if args.format == "json" else "text")
    worker = shared_worker
    if worker is None and not args.no_exec:
        worker = WorkerClient("tilelang-check-worker")
        worker.start()  # the worker imports tvm; this process does not need it
    if shared_worker is None:
        _light_tilelang()
    try:
        return _check_files(args, files, start, Session, worker)
    finally:
        if worker is not None and worker is not shared_worker:
            worker.stop()


def _check_files(args, files, start, Session, worker) -> int:
    from tilelang_lsp.binding import ConfigError, load_config
    from tilelang_lsp.session import filter_codes

    configs = {}

    def config_for(path):
        directory = Path(path).parent
        if directory not in configs:
            configs[directory] = load_config(directory)
        return configs[directory]

    try:
        base = config_for(files[0].resolve())
    except ConfigError as err:
        print(f"tilelang-check: configuration error: {err}", file=sys.stderr)
        return EXIT_CONFIG
    target = args.target or base.target or "sm_90a"
    _check_target(target)
    select = _codes(args.select) or [c.upper() for c in base.select]
    ignore = _codes(args.ignore) + [c.upper() for c in base.ignore]
    _validate_codes(select, "--select")
    _validate_codes(ignore, "--ignore")
    exec_code = not args.no_exec and base.exec is not False
    timeout = args.timeout or base.timeout or 20.0
    session = Session(target, timeout, exec_code, config_for, worker)
    diagnostics = []
    progress = _Progress(len(files))
    try:
        for f in files:
            progress.show(f)
            diagnostics += _check_one(session, str(f.resolve()))
    except ConfigError as err:
        progress.clear()
        print(f"tilelang-check: configuration error: {err}", file=sys.stderr)
        return EXIT_CONFIG
    progress.clear()
    diagnostics = _relativize(filter_codes(diagnostics, select, ignore))
    fmt = args.format or ("github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text")
    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty() and "NO_COLOR" not in os.environ)
    text = render(diagnostics, fmt, color)
    if fmt == "sarif":
        text = _sarif_with_bindings(text, session.outcomes)
    print(text)
    if args.explain and fmt in ("text", "github"):
        for line in explain_lines(session.outcomes):
            print(line)
    if args.statistics:
        built, seen = session.built_count()
        print(f"checked {len(files)} file(s) in {time.perf_counter() - start:.2f} s; built {built} of {seen} "
              f"kernel factories with values", file=sys.stderr)
    return exit_status(diagnostics, False)


def explain_lines(outcomes) -> list:
    """``path: factory: built with <values> from <origin>`` (or why not), one line per factory."""
    lines = []
    for (path, name), results in outcomes.items():
        built = [line for ok, line, _ in results if ok]
        said = built[0] if built else (results[0][1] if results else "not built: no values")
        lines.append(f"{_display_path(path)}: {name}: {said}")
    return lines


def _sarif_with_bindings(text: str, outcomes) -> str:
    """The SARIF log with the run's ``properties.tilelangKernels``: each factory's values line."""
    import json

    if not outcomes:
        return text
    log = json.loads(text)
    kernels = [{"file": _display_path(path), "factory": name,
                "built": any(ok for ok, _, _ in results),
                "values": next((line for ok, line, _ in results if ok), results[0][1] if results else "no values")}
               for (path, name), results in outcomes.items()]
    for run in log.get("runs", []):
        run.setdefault("properties", {})["tilelangKernels"] = kernels
    return json.dumps(log, indent=2, ensure_ascii=False)


def _check_one(session, path: str) -> list:
    """One file's diagnostics; a failure of the checker on this file is reported on it (TL0003) and
    the run goes on, so that the other files' results are kept."""
    from tilelang_lsp.binding import ConfigError

    try:
        return session.check_file(path).diagnostics
    except ConfigError:
        raise
    except OSError as err:
        from tilelang.diagnostics import Diagnostic, Span

        return [Diagnostic.from_code("TL0005", f"cannot read {Path(path).name}: {err.strerror or err}",
                                     Span.point(path, 1, 1))]
    except Exception as err:  # noqa: BLE001 - a checker bug on one file must not lose the others
        from tilelang.diagnostics import Diagnostic, Span

        return [Diagnostic.from_code("TL0003", f"internal error while checking this file: "
                                     f"{type(err).__name__}: {err}", Span.point(path, 1, 1))]


class _Progress:
    """``[i/n] path`` on one rewritten stderr line while files are checked, only when stderr is a
    terminal and there is more than one file (pre-commit hooks and CI logs stay clean)."""

    def __init__(self, total: int):
        self.total, self.count = total, 0
        self.active = total > 1 and sys.stderr.isatty()

    def show(self, path) -> None:
        self.count += 1
        if self.active:
            text = f"[{self.count}/{self.total}] {_display_path(str(path))}"
            print(f"\r\033[K{text[:200]}", end="", file=sys.stderr, flush=True)

    def clear(self) -> None:
        if self.active:
            print("\r\033[K", end="", file=sys.stderr, flush=True)


def _check_target_spelling(target) -> None:
    """Reject a malformed ``--target`` before starting anything (no heavy import needed)."""
    import re

    if target is not None and not re.fullmatch(r"(sm_)?\d{2,3}[af]?", target):
        raise UsageError(f"unknown target {target!r}: expected sm_XX, e.g. sm_90a, sm_89 or sm_80")


def _check_target(target: str) -> None:
    from tilelang.targets import parse_arch

    try:
        parse_arch(target)
    except ValueError as err:
        raise UsageError(str(err)) from None


if __name__ == "__main__":
    sys.exit(main())
