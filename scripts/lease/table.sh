#!/usr/bin/env bash
# benchmarks/upstream_table.sh STEP ... on the device, its logs and tables tarred into $OUT/table.tgz.
# The tables (~/tables/*.json) are also copied into $OUT every 10 s while the step runs: a call
# cut off at its time limit brings back no tarball, but what lies under $OUT still comes back.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T=$(mktemp -d)
( while sleep 10; do cp ~/tables/*.json "$OUT/" 2>/dev/null; done ) &
COPIER=$!
OUT=$T TL_UPSTREAM_EXAMPLES=${TL_UPSTREAM_EXAMPLES:-.gpu/conformance/upstream/examples} \
    bash benchmarks/upstream_table.sh "$@" 2>&1 | tail -80
kill "$COPIER" 2>/dev/null
cp ~/tables/*.json "$T/" 2>/dev/null
cp ~/tables/*.json "$OUT/" 2>/dev/null
tar czf "$OUT/table-$1.tgz" -C "$T" .
