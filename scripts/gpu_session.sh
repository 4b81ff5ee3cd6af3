#!/usr/bin/env bash
# One GPU session's worth of checks, used with the device tool: runs the device-library tests,
# every example against torch, the GPU tests, and the benchmarks, leaving logs under $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export TILELANG_CACHE_DIR=${TILELANG_CACHE_DIR:-/tmp/tl-cache}
what=${1:-all}; [ "$what" = quick ] && what="tests bench"
tests=${TESTS:-tests/gpu}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
if [[ "$what" == all || "$what" == *examples* ]]; then
  python3 scripts/run_examples.py 2>&1 | tee "$OUT/examples.log"
fi
if [[ "$what" == all || "$what" == *tests* ]]; then
  python3 -m pytest -q $tests -p no:cacheprovider --maxfail=15 2>&1 | tail -60 | tee "$OUT/gpu_tests.log"
fi
if [[ "$what" == all || "$what" == *bench* ]]; then
  [[ "$what" == *noattn* ]] || [[ "$what" == *onlyattn* ]] || true
  [[ "$what" == *onlyattn* ]] || python3 benchmarks/bench_core.py --out "$OUT/bench.md" 2>&1 | tee -a "$OUT/bench.log"
  python3 benchmarks/bench_attention.py --out "$OUT/bench_attn.md" 2>&1 | tee -a "$OUT/bench.log"
fi
