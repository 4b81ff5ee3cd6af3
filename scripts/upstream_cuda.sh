#!/usr/bin/env bash
# Upstream TileLang's CUDA for the bench_upstream cases, on this machine (no GPU needed), to read
# beside ours:
#
#   bash scripts/upstream_cuda.sh DIR [CASE,CASE...]    # DIR/<case>.cu, upstream 0.1.15's code
#   TILELANG_TARGET_ARCH=sm_90a .venv/bin/python benchmarks/bench_upstream.py --compile-only --dump OURS
#
# Upstream's wheel (tilelang==0.1.15, staged by ../shared/gpu/stage-upstream into .gpu/up-a and
# .gpu/up-b) is built for CPython 3.12; this machine's python3 is 3.11, so a 3.12 venv (pyenv's, or
# PY312) is made once at UP_VENV (default /tmp/up312) with torch==2.13.0 beside it. Upstream picks
# its target from TILELANG_DEFAULT_TARGET (set here to sm_90a) and builds with this machine's nvcc.
# A case that fails to build is reported (as upstream fails it on the GPU: blocksparse_attn_topk).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir=${1:?usage: upstream_cuda.sh DIR [CASE,CASE...]}
venv=${UP_VENV:-/tmp/up312}
py=${PY312:-$(ls -d "$HOME"/.pyenv/versions/3.12*/bin/python 2>/dev/null | tail -1)}
if [ ! -x "$venv/bin/python" ]; then
    [ -n "$py" ] && [ -x "$py" ] || { echo "upstream_cuda.sh: no CPython 3.12 (set PY312)" >&2; exit 2; }
    ls .gpu/up-a/tilelang-*.whl > /dev/null 2>&1 || ../shared/gpu/stage-upstream
    "$py" -m venv "$venv"
    "$venv/bin/pip" install -q torch==2.13.0 numpy typing_extensions tqdm einops pytest
    # the wheel's metadata pins an older z3 than the staged one it links: no dependency resolution
    "$venv/bin/pip" install -q --no-deps .gpu/up-a/*.whl .gpu/up-b/*.whl
fi
mkdir -p "$dir"
sel=()
[ -n "${2:-}" ] && sel=(--names "$2")
TILELANG_DEFAULT_TARGET='{"kind": "cuda", "arch": "sm_90a"}' \
    "$venv/bin/python" benchmarks/bench_upstream.py --compile-only --dump "$dir" "${sel[@]}" 2>&1 |
    grep -E " built | error: |built$"
