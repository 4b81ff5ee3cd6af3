#!/usr/bin/env bash
# The issue-20 speed rows that are not in the upstream table, twice each, alternating.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export TILELANG_CACHE_DIR=${TILELANG_CACHE_DIR:-/tmp/tl-cache} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
G=gemm_fp16_tn_128x256x64_s3,gemm_fp16_tn_128x256x64_s3_8192,gemm_bf16_tn_128x256x64_s3
for r in 1 2; do
    python3 benchmarks/bench_attention_styles.py --causal 2>&1 | tail -12 | tee "$OUT/attn-causal-$r.txt"
    python3 benchmarks/bench_attention_styles.py 2>&1 | tail -12 | tee "$OUT/attn-$r.txt"
    python3 benchmarks/bench_upstream.py --names "$G" --json "$OUT/gemm-$r.json" 2>&1 | tail -8
    python3 benchmarks/bench_launch.py --only attn,row_f32 --json "$OUT/launch-$r.json" 2>&1 | tail -8
done
