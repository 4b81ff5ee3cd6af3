#!/usr/bin/env bash
# compute-sanitizer racecheck and synccheck on table kernels of upstream's examples (CASES, default
# the gdn kernels sessions 43-45 changed), each run through bench_upstream (one timed launch), with
# ours (~/tl-env.sh) and, for each object of CONFIGS, those pass configs too (TILELANG_PASS_CONFIGS).
# All runs at once (RUN_TIMEOUT each); one line per run with its error summary; logs in
# $OUT/sanitize-rows.tgz. The gdn cases run at GDN_SIZE ("B,S,H", default 1,8192,8: the table's tiles
# over a smaller grid; racecheck did not finish the full size in 200 s); GDN_SIZE= (empty) keeps the
# table's size. The grid stays over a wave of blocks (1024): a one-wave grid compiles another
# shared-memory plan (Lowerer._weigh_loop_reuse), not the table's (session 54: both gdn cases, 139 s).
set -uo pipefail
GDN_SIZE=${GDN_SIZE-1,8192,8}
[ -n "$GDN_SIZE" ] && export TL_BENCH_GDN_SIZE=$GDN_SIZE
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
CASES=${CASES:-gdn_wy_fast,gdn_wy_fast_bwd,gdn_scaled_dot_kkt}
CONFIGS=${CONFIGS:-'{"tl.enable_exact_store_fences": true}'}
EX=${TL_UPSTREAM_EXAMPLES:-.gpu/conformance/upstream/examples}
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
L=$(mktemp -d)
source ~/tl-env.sh
export TILELANG_CACHE_DIR=$L/cache
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$L/gpu.txt"
IFS=, read -ra cases <<< "$CASES"
# build every case first (plain run: compiles into the cache and checks the result)
python3 benchmarks/bench_upstream.py --examples "$EX" --names "$CASES" --warmup 1 --rep 1 > "$L/plain.log" 2>&1
tail -n "$(( ${#cases[@]} + 4 ))" "$L/plain.log"
i=0
for c in "${cases[@]}"; do
    for cfg in "" "$CONFIGS"; do
        i=$((i + 1))
        for tool in racecheck synccheck; do
            (TILELANG_PASS_CONFIGS=$cfg timeout "${RUN_TIMEOUT:-420}" "$SAN" --tool "$tool" --error-exitcode 9 \
                python3 benchmarks/bench_upstream.py --examples "$EX" --names "$c" --warmup 1 --rep 1 \
                > "$L/$tool-$c-$i.log" 2>&1
             echo "$tool $c ${cfg:-default}: rc $? | $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$L/$tool-$c-$i.log" | tail -1)") &
        done
    done
done
wait
tar czf "$OUT/sanitize-rows.tgz" -C "$L" --exclude cache .
