#!/usr/bin/env bash
# Builds the Hopper test programs of the device library (test_tma.cu for
# tma.h / barrier.h, test_wgmma.cu for gemm_sm90.h) for sm_90a and runs them
# on the local GPU, which must be an sm_90 part (H100 / H200).
#
# Usage: tests/gpu/csrc/run_sm90.sh [build-dir]
#   TL_SANITIZE=1  also runs test_tma under compute-sanitizer (memcheck and
#                  racecheck) when compute-sanitizer is installed.
# Where cuobjdump is installed it also prints how many HGMMA / UTMALDG
# instructions the binaries contain (the tensor core and TMA paths).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="${1:-${TMPDIR:-/tmp}/tl_gpu_tests_sm90}"
mkdir -p "$out"
flags=(-std=c++17 -O3 -I "$root/src" -gencode arch=compute_90a,code=sm_90a)

pids=()
for prog in test_tma test_wgmma; do
  nvcc "${flags[@]}" -Xptxas -v "$here/$prog.cu" -o "$out/$prog" >"$out/$prog.build.log" 2>&1 &
  pids+=($!)
done
build_ok=1
for pid in "${pids[@]}"; do wait "$pid" || build_ok=0; done
if [ "$build_ok" -ne 1 ]; then
  cat "$out"/*.build.log
  echo "BUILD FAILED"
  exit 1
fi

if command -v cuobjdump >/dev/null 2>&1; then
  for prog in test_tma test_wgmma; do
    sass="$(cuobjdump -sass "$out/$prog")"
    echo "sass $prog: HGMMA=$(grep -c HGMMA <<<"$sass" || true)" \
      "UTMALDG=$(grep -c UTMALDG <<<"$sass" || true)" \
      "UTMASTG=$(grep -c UTMASTG <<<"$sass" || true)" \
      "USETMAXREG=$(grep -c USETMAXREG <<<"$sass" || true)"
  done
fi

status=0
for prog in test_tma test_wgmma; do
  echo "=== $prog"
  "$out/$prog" || status=1
done
if [ "${TL_SANITIZE:-0}" = "1" ] && command -v compute-sanitizer >/dev/null 2>&1; then
  for tool in memcheck racecheck; do
    echo "=== compute-sanitizer --tool $tool test_tma"
    compute-sanitizer --tool "$tool" --error-exitcode 3 "$out/test_tma" >"$out/sanitize_$tool.log" 2>&1 \
      || { status=1; tail -30 "$out/sanitize_$tool.log"; }
    tail -2 "$out/sanitize_$tool.log"
  done
fi
if [ "$status" -eq 0 ]; then echo "ALL SM90 GPU TESTS PASSED"; else echo "SOME SM90 GPU TESTS FAILED"; fi
exit "$status"
