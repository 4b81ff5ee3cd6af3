#!/usr/bin/env bash
# Install the project into .venv (again only when pyproject.toml changes), then run a job.
#
#   bash scripts/bootstrap.sh run    check examples/ with tilelang-check, then run the examples
#   bash scripts/bootstrap.sh test   run the test suite in two pytest-xdist workers (extra arguments
#                                    go to pytest; TILELANG_TEST_WORKERS=N, 0: in one process)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

VENV=.venv
PY="$VENV/bin/python"

log() { echo "bootstrap: $*" >&2; }

ensure_installed() {
    if [ ! -x "$PY" ]; then
        log "creating $VENV"
        python3 -m venv "$VENV"
    fi
    # The stamp is keyed on pyproject.toml (dependencies, entry points) and the interpreter; the
    # package itself is installed editable, so source changes need no reinstall.
    local stamp="$VENV/.tilelang-installed" key
    key=$( { cat pyproject.toml; "$PY" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ]; then
        return 0
    fi
    log "installing into $VENV (first run, or pyproject.toml changed)"
    # torch first and pinned: an unpinned torch would pull a multi-GB CUDA build.
    "$PY" -m pip install -qq "torch==2.13.0"
    "$PY" -m pip install -qq -e ".[test]"
    echo "$key" > "$stamp"
}

run_main() {
    local rc=0
    if [ -f tilelang_lsp/cli.py ]; then
        "$VENV/bin/tilelang-check" examples/ || rc=$?
    else
        log "note: tilelang_lsp/cli.py does not exist yet; skipping tilelang-check"
    fi
    if [ -f scripts/run_examples.py ]; then
        "$PY" scripts/run_examples.py || { local r=$?; [ "$rc" -ne 0 ] || rc=$r; }
    else
        log "note: scripts/run_examples.py does not exist yet; skipping the examples"
    fi
    return "$rc"
}

run_tests() {
    local rc=0
    [ "$#" -gt 0 ] || set -- tests
    # two pytest-xdist workers, each test file on one of them (module fixtures such as a language
    # server stay in one process); TILELANG_TEST_WORKERS=0 runs in this process, and an explicit
    # -n / --numprocesses / -p no:xdist among the arguments wins
    local workers=(-n "${TILELANG_TEST_WORKERS:-2}" --dist loadfile)
    case " $* " in
        *" -n "*|*" -n"[0-9a]*|*" --numprocesses"*|*"no:xdist"*) workers=() ;;
    esac
    if [ "${TILELANG_TEST_WORKERS:-2}" = "0" ]; then workers=(); fi
    "$PY" -m pytest -q --timeout=900 "${workers[@]}" "$@" || rc=$?
    if [ "$rc" -eq 5 ]; then
        log "pytest collected no tests: treating that as a failure"
        return 1
    fi
    return "$rc"
}

case "${1:-}" in
    run) ensure_installed; run_main ;;
    test) shift; ensure_installed; run_tests "$@" ;;
    *) echo "usage: bash scripts/bootstrap.sh run|test [pytest args]" >&2; exit 4 ;;
esac
