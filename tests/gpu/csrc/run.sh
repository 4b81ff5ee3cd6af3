#!/usr/bin/env bash
# Builds the CUDA test programs of the device library for sm_90a and runs
# them on the local GPU.  Usage: tests/gpu/csrc/run.sh [build-dir]
# The GEMM correctness program takes about a minute to compile on one core,
# so the three programs are built in parallel.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="${1:-${TMPDIR:-/tmp}/tl_gpu_tests}"
mkdir -p "$out"
flags=(-std=c++17 -O3 -I "$root/src" -gencode arch=compute_90a,code=sm_90a)

pids=()
for prog in test_gemm test_misc gemm_bench; do
  nvcc "${flags[@]}" "$here/$prog.cu" -o "$out/$prog" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done

status=0
for prog in test_misc test_gemm gemm_bench; do
  echo "=== $prog"
  "$out/$prog" || status=1
done
if [ "$status" -eq 0 ]; then echo "ALL GPU TESTS PASSED"; else echo "SOME GPU TESTS FAILED"; fi
exit "$status"
