#!/usr/bin/env bash
# tests/gpu in full on the device, sharded by file over JOBS processes (each under T seconds);
# EXAMPLES=1 adds upstream's example GPU tier; FILES="a.py b.py" runs those files only. Each test's
# outcome is logged as it ends (-v), so a shard cut off at T seconds still names its failures.
# Logs tarred into $OUT/tests.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/out}; JOBS=${JOBS:-6}; T=${T:-540}
L=$(mktemp -d); mkdir -p "$OUT"
export TILELANG_CACHE_DIR=${TILELANG_CACHE_DIR:-/tmp/tl-cache} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$L/gpu.txt"
if [ -n "${FILES:-}" ]; then read -r -a files <<< "$FILES"; else files=(tests/gpu/test_*.py); fi
for ((s = 0; s < JOBS && s < ${#files[@]}; s++)); do
    shard=(); for ((i = s; i < ${#files[@]}; i += JOBS)); do shard+=("${files[i]}"); done
    timeout "$T" python3 -m pytest -v -p no:cacheprovider "${shard[@]}" > "$L/shard-$s.log" 2>&1 &
done
if [ "${EXAMPLES:-0}" = 1 ]; then
    timeout "$T" python3 scripts/conformance.py gpu --jobs 6 --only examples --out "$L/examples" \
        > "$L/examples.log" 2>&1 &
fi
wait
for f in "$L"/shard-*.log; do echo "$(basename "$f"): $(tail -1 "$f")"; done
grep -h "^FAILED\|^ERROR\| FAILED \| ERROR " "$L"/shard-*.log | sort -u | head -40
[ -f "$L/examples.log" ] && grep -m3 "tests passed\|regress" "$L/examples.log"
tar czf "$OUT/tests.tgz" -C "$L" .
