#!/usr/bin/env bash
# Nsight Compute reports of our benchmark kernels (benchmarks/ncu_target.py), the sections we read
# when a kernel is slower than its reference: speed of light, compute and memory workload, warp
# stall reasons, scheduler and occupancy. One text report per kernel under $OUT (default /tmp/out).
#
#   scripts/ncu.sh gemm fa fa_sm80 ...
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
for k in "$@"; do
  names='^(main_kernel|kernel_kernel)$'
  [ "$k" = torch_gemm ] && names='gemm|nvjet|xmma|cutlass'   # cuBLAS's kernel
  case "$k" in torch_sdpa*) names='sdpa|flash|fmha|attention|cudnn' ;; esac   # SDPA's kernel
  # warm-up launches (and the compile) come first; profile the last of ncu_target's launches
  ncu --target-processes all --launch-skip 2 --launch-count 1 -k "regex:$names" \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
      --section InstructionStats \
      python3 benchmarks/ncu_target.py "$k" > "$OUT/ncu_$k.txt" 2>&1
  echo "ncu $k: $(grep -c . "$OUT/ncu_$k.txt") lines -> $OUT/ncu_$k.txt"
done
