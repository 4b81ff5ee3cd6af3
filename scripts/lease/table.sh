#!/usr/bin/env bash
# benchmarks/upstream_table.sh STEP ... on the device, its logs and tables tarred into $OUT/table.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T=$(mktemp -d)
OUT=$T TL_UPSTREAM_EXAMPLES=${TL_UPSTREAM_EXAMPLES:-.gpu/conformance/upstream/examples} \
    bash benchmarks/upstream_table.sh "$@" 2>&1 | tail -80
cp ~/tables/*.json "$T/" 2>/dev/null
tar czf "$OUT/table-$1.tgz" -C "$T" .
