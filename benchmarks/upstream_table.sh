#!/usr/bin/env bash
# The bench_upstream table with both compilers on the GPU machine, in steps that each fit a device
# command (10 minutes), after ../shared/gpu/README.md's staging (~/tl-env.sh for ours, ~/up-site for
# upstream's wheel) and with upstream's examples carried (.gpu/conformance, or TL_UPSTREAM_EXAMPLES):
#
#   bash benchmarks/upstream_table.sh build [N]   # every case built by both, N processes each (~2 min)
#   bash benchmarks/upstream_table.sh ours        # timed pass with ours -> $OUT/ours.json (~6 min)
#   bash benchmarks/upstream_table.sh upstream    # the same with upstream's -> $OUT/upstream.json
#   bash benchmarks/upstream_table.sh paired      # both, one long-lived process a side, alternating
#                      # case by case (bench_upstream --side, _interleave.py: the two timings of a
#                      # case seconds apart on the same GPU state; the separate passes above run
#                      # minutes apart, and torch's own GEMM moved 4 % between them in session 32),
#                      # ROUNDS (3) passes over the table, each row the median of its rounds
#                      # -> $OUT/paired-ours.json, $OUT/paired-upstream.json (run it again in the
#                      # next command to measure what BUDGET left out; AA=1 adds a second process of
#                      # ours as a side, paired-ours2.json: the method's own spread, row by row)
#   bash benchmarks/upstream_table.sh ab CASES '{"tl.some_key": true}' ['{"tl.other": true}' ...] [ROUNDS]
#                      # ours on CASES (bench_upstream --only: substrings; =a,b,c: exactly those
#                      # names, --names; all: every case) without pass configs (side "off") and with each object
#                      # (TILELANG_PASS_CONFIGS; "on", or on1, on2, ... for several), alternating case
#                      # by case as in paired, ROUNDS (2) rounds -> $OUT/ab-<side>.json; each side's
#                      # kernels built first in JOBS (8) processes. A side written @DIR runs another
#                      # tree of ours instead (side named after DIR): DIR holds its tilelang/ and src/
#                      # (put first on PYTHONPATH), made here with
#   bash benchmarks/upstream_table.sh stage-tree REV DIR   # git archive REV's tilelang/ and src/ into DIR
#                      # (e.g. .gpu/old, carried to the device: ab CASES @.gpu/old compares that
#                      # commit's compiler with the working tree's in one lease); the side @upstream
#                      # (side "upstream") runs upstream's wheel (~/up-site), so ours and upstream's
#                      # alternate on the same GPU state (rows within a few % of each other)
#
# A timed pass starts no case after BUDGET seconds (default 500) and keeps its JSON in ~/tables/:
# run the same step again to measure the cases it did not reach (--resume). Cases listed in SKIP
# (default: dsv32_sparse_mla_fwd_pipelined, which hangs with upstream's 0.1.15) are not run with
# upstream. Compare anywhere: python3 benchmarks/bench_upstream.py --compare ours.json upstream.json
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
step=${1:?usage: upstream_table.sh build [N] | ours | upstream | paired | ab CASES CONFIGS... [ROUNDS] | stage-tree REV DIR}
OUT=${OUT:-/tmp/upstream-table}
mkdir -p "$OUT" ~/tables

names() {   # every case name, comma-separated
    python3 -c "
import sys; sys.path.insert(0, 'benchmarks')
from _upstream_cases import CASES
print(','.join(c.name for c in CASES))"
}

case $step in
build)
    n=${2:-7}
    IFS=, read -ra all <<< "$(names)"
    start=$(date +%s)
    for ((g = 0; g < n; g++)); do
        group=$(for ((i = g; i < ${#all[@]}; i += n)); do printf '%s,' "${all[i]}"; done)
        (source ~/tl-env.sh && python3 benchmarks/bench_upstream.py --compile-only --nvcc \
            --names "${group%,}" > "$OUT/build-ours-$g.log" 2>&1) &
        (PYTHONPATH=~/up-site python3 benchmarks/bench_upstream.py --compile-only --nvcc \
            --names "${group%,}" > "$OUT/build-upstream-$g.log" 2>&1) &
    done
    wait
    echo "built with both in $(( $(date +%s) - start )) s"
    grep -h " error: " "$OUT"/build-*.log
    ;;
ours|upstream)
    skip=()
    if [ "$step" = ours ]; then
        source ~/tl-env.sh
    else
        export PYTHONPATH=~/up-site
        skip=(--skip "${SKIP-dsv32_sparse_mla_fwd_pipelined}")
        [ -n "${skip[1]}" ] || skip=()
    fi
    python3 benchmarks/bench_upstream.py --isolate --chunk 6 --case-timeout 120 --budget "${BUDGET:-500}" \
        "${skip[@]}" --json ~/tables/"$step".json --resume > "$OUT/$step.log" 2>&1
    cp ~/tables/"$step".json "$OUT/"
    tail -4 "$OUT/$step.log"
    ;;
paired)
    # one long-lived process a side (bench_upstream --side, _interleave.py), the two alternating
    # case by case, ROUNDS passes over the table; a second run (--resume) goes on where BUDGET stopped.
    # AA=1: a second process of ours as a third side (paired-ours2.json), so each row's ours2/ours
    # says how far the method puts two identical sides apart in the same run
    aa=()
    [ "${AA:-0}" = 1 ] && aa=(--side ours2='source ~/tl-env.sh')
    python3 benchmarks/bench_upstream.py --side ours='source ~/tl-env.sh' "${aa[@]}" --side upstream='export PYTHONPATH=~/up-site' \
        --side-skip upstream="${SKIP-dsv32_sparse_mla_fwd_pipelined}" --rounds "${ROUNDS:-3}" --case-timeout 120 \
        --budget "${BUDGET:-500}" --json ~/tables/paired-{side}.json --resume >> "$OUT/paired.log" 2>&1
    grep -h "budget of" "$OUT/paired.log" | tail -1
    cp ~/tables/paired-*.json ~/tables/paired-*.log "$OUT/" 2>/dev/null
    python3 benchmarks/bench_upstream.py --compare ~/tables/paired-ours.json ~/tables/paired-upstream.json | tail -4
    ;;
ab)
    cases=${2:?ab needs the cases (bench_upstream --only, or =NAME,NAME for exact names)}
    select=(--only "$cases")
    [ "${cases#=}" != "$cases" ] && select=(--names "${cases#=}")
    [ "$cases" = all ] && select=()     # the whole table (an A/A of the method: ab all '{}')
    shift 2
    sides=(off) rounds=2
    for a in "$@"; do   # pass-config objects or @trees, one side each, and optionally a round count
        case $a in
        \{*) sides+=("$a") ;;
        @upstream) sides+=("$a") ;;
        @*) [ -d "${a#@}/tilelang" ] || { echo "upstream_table.sh ab: ${a#@} has no tilelang/ (stage-tree makes one)" >&2; exit 2; }
            sides+=("$a") ;;
        *[!0-9]* | '') echo "upstream_table.sh ab: '$a' is neither a JSON object nor a round count" >&2; exit 2 ;;
        *) rounds=$a ;;
        esac
    done
    [ ${#sides[@]} -gt 1 ] || { echo "upstream_table.sh ab needs at least one JSON object of pass configs" >&2; exit 2; }
    spec=()
    for ((i = 0; i < ${#sides[@]}; i++)); do   # each side: a name and the shell that picks its tilelang
        s=${sides[i]}
        case $s in
        off) spec+=(--side "off=source ~/tl-env.sh") ;;
        \{*) spec+=(--side "on$([ ${#sides[@]} -gt 2 ] && echo "$i")=source ~/tl-env.sh && export TILELANG_PASS_CONFIGS=$(printf %q "$s")") ;;
        @upstream) spec+=(--side "upstream=export PYTHONPATH=~/up-site") ;;
        @*) d=$(cd "${s#@}" && pwd); spec+=(--side "$(basename "$d")=source ~/tl-env.sh && export PYTHONPATH=$(printf %q "$d"):\$PYTHONPATH") ;;
        esac
    done
    unset TILELANG_PASS_CONFIGS    # the off side runs without any
    python3 benchmarks/bench_upstream.py "${spec[@]}" "${select[@]}" --rounds "$rounds" --jobs "${JOBS:-8}" \
        --case-timeout 300 --json "$OUT/ab-{side}.json" > "$OUT/ab.log" 2>&1
    grep -E '^\| ' "$OUT/ab.log"
    ;;
stage-tree)
    rev=${2:?stage-tree needs a commit} dir=${3:?stage-tree needs a directory}
    rm -rf "$dir" && mkdir -p "$dir" && git archive "$rev" tilelang src | tar -x -C "$dir" && echo "staged $rev in $dir"
    exit 0
    ;;
*)
    echo "upstream_table.sh: unknown step '$step' (build [N] | ours | upstream | paired | ab CASES CONFIGS... [ROUNDS] | stage-tree REV DIR)" >&2
    exit 2
    ;;
esac
