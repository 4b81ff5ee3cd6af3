#!/usr/bin/env bash
# The bench_upstream table with both compilers on the GPU machine, in steps that each fit a device
# command (10 minutes), after ../shared/gpu/README.md's staging (~/tl-env.sh for ours, ~/up-site for
# upstream's wheel) and with upstream's examples carried (.gpu/conformance, or TL_UPSTREAM_EXAMPLES):
#
#   bash benchmarks/upstream_table.sh build [N]   # every case built by both, N processes each (~2 min)
#   bash benchmarks/upstream_table.sh ours        # timed pass with ours -> $OUT/ours.json (~6 min)
#   bash benchmarks/upstream_table.sh upstream    # the same with upstream's -> $OUT/upstream.json
#   bash benchmarks/upstream_table.sh paired      # both, alternating chunk by chunk (CHUNK cases, 6),
#                      # so the two passes of a chunk see the same GPU state (the separate passes
#                      # above run minutes apart: torch's own GEMM moved 4 % between them in session
#                      # 32) -> $OUT/paired-ours.json, $OUT/paired-upstream.json (~10 min: run it
#                      # again in the next command to measure the chunks BUDGET left out)
#   bash benchmarks/upstream_table.sh ab CASES '{"tl.some_key": true}' ['{"tl.other": true}' ...] [ROUNDS]
#                      # ours on CASES (bench_upstream --only: substrings; =a,b,c: exactly those
#                      # names, --names) without pass configs and with each
#                      # object (TILELANG_PASS_CONFIGS), alternating (even rounds in reverse order),
#                      # ROUNDS (2) times -> $OUT/ab-*.json
#                      # (off, on / on1, on2, ...; in $OUT/ab.tgz when more than 8 files); each
#                      # side's kernels built first in JOBS (8) processes, CHUNK (6) cases timed per
#                      # process. A side written @DIR runs another tree of ours instead: DIR holds
#                      # its tilelang/ and src/ (put first on PYTHONPATH), made here with
#   bash benchmarks/upstream_table.sh stage-tree REV DIR   # git archive REV's tilelang/ and src/ into DIR
#                      # (e.g. .gpu/old, carried to the device: ab CASES @.gpu/old compares that
#                      # commit's compiler with the working tree's in one lease); the side @upstream
#                      # runs upstream's wheel (~/up-site), so ours and upstream's alternate, round by
#                      # round, on the same GPU state (rows within a few % of each other)
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
    IFS=, read -ra all <<< "$(names)"
    c=${CHUNK:-6} start=$(date +%s)
    for ((i = 0; i < ${#all[@]}; i += c)); do
        if [ $(( $(date +%s) - start )) -gt "${BUDGET:-500}" ]; then
            echo "upstream_table.sh paired: BUDGET reached at case $i of ${#all[@]}; run paired again"; break
        fi
        group=$(IFS=,; echo "${all[*]:i:c}")
        order=(ours upstream)
        (( i / c % 2 )) && order=(upstream ours)     # neither side always first
        for side in "${order[@]}"; do
            names=$group
            if [ "$side" = upstream ]; then   # SKIP: cases not run with upstream's
                names=$(tr , '\n' <<< "$group" | grep -vxF -f <(tr , '\n' <<< "${SKIP-dsv32_sparse_mla_fwd_pipelined}") | paste -sd,)
                [ -n "$names" ] || continue
            fi
            (
                if [ "$side" = ours ]; then source ~/tl-env.sh; else export PYTHONPATH=~/up-site; fi
                python3 benchmarks/bench_upstream.py --isolate --chunk "$c" --case-timeout 120 --names "$names" \
                    --json ~/tables/paired-"$side".json --resume >> "$OUT/paired-$side.log" 2>&1
            )
        done
    done
    cp ~/tables/paired-*.json "$OUT/" 2>/dev/null
    python3 benchmarks/bench_upstream.py --compare ~/tables/paired-ours.json ~/tables/paired-upstream.json | tail -3
    ;;
ab)
    cases=${2:?ab needs the cases (bench_upstream --only, or =NAME,NAME for exact names)}
    select=(--only "$cases")
    [ "${cases#=}" != "$cases" ] && select=(--names "${cases#=}")
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
    source ~/tl-env.sh
    for ((r = 1; r <= rounds; r++)); do
        order=$(seq 0 $(( ${#sides[@]} - 1 )))
        (( r % 2 )) || order=$(seq $(( ${#sides[@]} - 1 )) -1 0)    # even rounds backwards: no side always first
        for i in $order; do
            unset TILELANG_PASS_CONFIGS
            pp=$PYTHONPATH
            case ${sides[i]} in
            \{*) [ "$i" -gt 0 ] && export TILELANG_PASS_CONFIGS="${sides[i]}" ;;
            @upstream) pp=$HOME/up-site ;;
            @*) pp=$(cd "${sides[i]#@}" && pwd):$PYTHONPATH ;;
            esac
            tag=$([ "$i" -gt 0 ] && echo "on$([ ${#sides[@]} -gt 2 ] && echo "$i")" || echo off)
            PYTHONPATH=$pp python3 benchmarks/bench_upstream.py --isolate --jobs "${JOBS:-8}" --chunk "${CHUNK:-6}" \
                "${select[@]}" --json "$OUT/ab-$tag-$r.json" > "$OUT/ab-$tag-$r.log" 2>&1
            echo "== $tag$([ "$i" -gt 0 ] && echo " ${sides[i]}"), round $r"; grep -E '^\| [a-z]' "$OUT/ab-$tag-$r.log" | grep -v '| case'
        done
    done
    unset TILELANG_PASS_CONFIGS
    if [ $(( ${#sides[@]} * rounds * 2 )) -gt 8 ]; then   # the device returns 8 files at most
        tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls ab-*) && rm -f "$OUT"/ab-*.json "$OUT"/ab-*.log
    fi
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
