#!/usr/bin/env bash
# compute-sanitizer (memcheck, racecheck, synccheck) over our GEMM and flash attention kernels at
# small shapes, through scripts/sanitize_driver.py (JIT compile, one launch, check against torch
# on the CPU).
#
#   1. a plain run of the driver compiles every kernel into TILELANG_CACHE_DIR and checks them;
#   2. one sanitizer run per (tool, kernel): the sanitizer wraps the python process, which now
#      finds its kernels in the cache instead of compiling them.
#
# Usage: scripts/sanitize.sh            (from anywhere; needs an NVIDIA GPU)
# Environment:
#   OUT                 where the logs go (default /tmp/out): sanitize_plain.log,
#                       sanitize_<tool>_<kernel>.log, sanitize_summary.txt
#   TILELANG_CACHE_DIR  the kernel cache shared by the runs (default /tmp/tl-cache)
#   TOOLS               default "memcheck racecheck synccheck"
#   KERNELS             default "gemm gemm_persistent gemm_tma_epilogue gemv_er zero_stage streaming fa fa_causal fa_causal_persistent fa_persistent fa_double_q widened ws_early_release ws_single_stage bwd dsv4_sparse gemm_stmatrix fa_stmatrix gemm_chunked fa_pingpong fa_causal_pingpong fa_converted gemm_split_512 hoist ordered_roles closing_loop" (see sanitize_driver.py --list)
#   PYTHON              default python3
#   SANITIZER           compute-sanitizer binary (default: on PATH, else /usr/local/cuda/bin)
#   RUN_TIMEOUT         seconds per run (default 300)
#   SANITIZER_ARGS      extra compute-sanitizer options, e.g. "--racecheck-report hazard"
#
# Prints one line per (tool, kernel) with its error count and exits non-zero when any run found
# an error, failed its check, timed out or could not run; 0 when everything was clean.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root" || exit 2
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export TILELANG_CACHE_DIR=${TILELANG_CACHE_DIR:-/tmp/tl-cache}
export PYTHONUNBUFFERED=1
PYTHON=${PYTHON:-python3}
TOOLS=${TOOLS:-memcheck racecheck synccheck}
KERNELS=${KERNELS:-gemm gemm_persistent gemm_tma_epilogue gemv_er zero_stage streaming fa fa_causal fa_causal_persistent fa_persistent fa_double_q widened ws_early_release ws_single_stage bwd dsv4_sparse gemm_stmatrix fa_stmatrix gemm_chunked fa_pingpong fa_causal_pingpong fa_converted gemm_split_512 hoist ordered_roles closing_loop}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
summary="$OUT/sanitize_summary.txt"
: >"$summary"

say() { echo "$*" | tee -a "$summary"; }

SANITIZER=${SANITIZER:-$(command -v compute-sanitizer || true)}
if [ -z "$SANITIZER" ]; then
  for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer; do
    if [ -x "$c" ]; then SANITIZER=$c; break; fi
  done
fi
if [ -z "$SANITIZER" ] || [ ! -x "$SANITIZER" ]; then
  say "sanitize: compute-sanitizer not found (PATH, /usr/local/cuda/bin); set SANITIZER=/path/to/it"
  exit 2
fi
say "sanitize: $("$SANITIZER" --version 2>/dev/null | tail -1) ($SANITIZER)"
say "sanitize: kernels [$KERNELS], tools [$TOOLS], cache $TILELANG_CACHE_DIR, logs in $OUT"

status=0

# 1. plain run: compile (into the cache) and check every kernel
plain="$OUT/sanitize_plain.log"
# shellcheck disable=SC2086
timeout --kill-after=10 "$RUN_TIMEOUT" "$PYTHON" scripts/sanitize_driver.py --kernel $KERNELS >"$plain" 2>&1
rc=$?
for k in $KERNELS; do
  line=$(grep -m1 "^RESULT $k " "$plain")
  if [ -z "$line" ]; then
    say "plain      $k: FAILED (no RESULT line, driver rc $rc; see $plain)"
    status=1
  else
    say "plain      $k: ${line#RESULT $k }"
    case "$line" in *" PASS "*) ;; *) status=1 ;; esac
  fi
done
if [ "$rc" -ne 0 ]; then
  say "plain run exited $rc; the last lines of $plain:"
  tail -15 "$plain" | sed 's/^/    /' | tee -a "$summary"
  status=1
fi

# 2. one sanitizer run per (tool, kernel)
# memcheck and synccheck end with "ERROR SUMMARY: N errors"; racecheck with "RACECHECK SUMMARY:
# H hazards displayed (E errors, W warnings)" (E counted as errors, W only reported).
for tool in $TOOLS; do
  for k in $KERNELS; do
    log="$OUT/sanitize_${tool}_${k}.log"
    start=$(date +%s)
    # shellcheck disable=SC2086
    timeout --kill-after=10 "$RUN_TIMEOUT" "$SANITIZER" --tool "$tool" --error-exitcode 3 ${SANITIZER_ARGS:-} \
      "$PYTHON" scripts/sanitize_driver.py --kernel "$k" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    errors=$(grep -oE "ERROR SUMMARY: [0-9]+ error" "$log" | tail -1 | grep -oE "[0-9]+")
    race=$(grep -oE "RACECHECK SUMMARY: .*" "$log" | tail -1)
    if [ -n "$race" ]; then
      race_errors=$(grep -oE "\([0-9]+ error" <<<"$race" | grep -oE "[0-9]+")
      if [ -n "$race_errors" ] && { [ -z "$errors" ] || [ "$race_errors" -gt "$errors" ]; }; then
        errors=$race_errors
      fi
    fi
    result=$(grep -m1 "^RESULT $k " "$log" | cut -d' ' -f3)
    note="rc $rc, ${secs}s, check ${result:-missing}${race:+; $race}"
    label=$(printf '%-10s %s' "$tool" "$k")
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
      say "$label: TIMEOUT after ${RUN_TIMEOUT}s ($note; $log)"
      status=1
    elif [ -z "$errors" ]; then
      say "$label: NO SUMMARY, the sanitizer did not finish ($note; $log)"
      tail -5 "$log" | sed 's/^/    /' | tee -a "$summary"
      status=1
    else
      if [ "$errors" -eq 0 ] && [ "$rc" -eq 0 ] && [ "$result" = PASS ]; then verdict=clean; else verdict=FAIL; status=1; fi
      say "$label: $errors errors, $verdict ($note; $log)"
      if [ "$verdict" = FAIL ]; then
        # the first report (kernel, access, address), or the driver's failure
        { grep "^=========" "$log" | grep -vE "COMPUTE-SANITIZER|SUMMARY|^=========\s*$" | head -6
          grep -m1 "^RESULT $k " "$log"; } | sed 's/^/    /' | tee -a "$summary"
      fi
    fi
  done
done

if [ "$status" -eq 0 ]; then say "SANITIZE: ALL CLEAN"; else say "SANITIZE: ERRORS (see above and $OUT)"; fi
exit "$status"
