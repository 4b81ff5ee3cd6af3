#!/usr/bin/env bash
# One GPU session's worth of checks, used with the device tool (after the staging described in
# ../shared/gpu/README.md): the device-library tests, the GPU tests, the benchmarks and the
# compute-sanitizer runs, leaving logs and tables under $OUT.
#
#   scripts/gpu_session.sh [all | tests | bench | sanitize | examples ...]    (default: all but examples)
#   TESTS=...   pytest selection for the tests step (default tests/gpu)
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export TILELANG_CACHE_DIR=${TILELANG_CACHE_DIR:-/tmp/tl-cache}
what="${*:-tests bench sanitize}"
[ "$what" = all ] && what="sm90 tests bench sanitize examples"
tests=${TESTS:-tests/gpu}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
if [[ "$what" == *sm90* ]]; then
  bash tests/gpu/csrc/run_sm90.sh > "$OUT/sm90.log" 2>&1; tail -3 "$OUT/sm90.log"
fi
if [[ "$what" == *tests* ]]; then
  python3 -m pytest -q $tests -p no:cacheprovider --maxfail=15 2>&1 | tail -60 | tee "$OUT/gpu_tests.log"
fi
if [[ "$what" == *bench* ]]; then
  # bench_core includes the attention rows (bench_attention.py's); the paths table is separate.
  python3 benchmarks/bench_core.py --out "$OUT/bench.md" > "$OUT/bench.log" 2>&1; cat "$OUT/bench.md"
  python3 benchmarks/bench_gemm_paths.py --sizes 8192 --out "$OUT/paths.md" > "$OUT/paths.log" 2>&1
  cat "$OUT/paths.md"
fi
if [[ "$what" == *sanitize* ]]; then
  TOOLS="racecheck synccheck" KERNELS="gemm gemm_persistent gemm_tma_epilogue fa fa_causal fa_persistent" bash scripts/sanitize.sh > "$OUT/sanitize.out" 2>&1
  tail -6 "$OUT/sanitize.out"
fi
if [[ "$what" == *examples* ]]; then
  python3 scripts/run_examples.py 2>&1 | tee "$OUT/examples.log" | tail -5
fi
