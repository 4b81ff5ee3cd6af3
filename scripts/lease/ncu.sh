#!/usr/bin/env bash
# Nsight Compute on table rows (CASES, default the two still under upstream's): each case's
# TileLang kernel profiled once with ours and once with upstream's wheel (~/up-site, calls 3-4 of
# README.md), --set full; the metrics that differ by more than 2 % printed side by side, the CSVs
# in $OUT/ncu.tgz with the reports (.ncu-rep) and each kernel's source page per SASS instruction
# (-sass.csv: executions and warp-stall samples by reason). A case launch:NAME profiles
# bench_launch.py's small kernel NAME (e.g. launch:attn).
set -uo pipefail
OUT=${OUT:-/tmp/out}; CASES=${CASES:-rms_norm_splitk,gdn_scaled_dot_kkt}
EX=${TL_UPSTREAM_EXAMPLES:-.gpu/conformance/upstream/examples}
L=$(mktemp -d); mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$L/gpu.txt"
IFS=, read -ra cases <<< "$CASES"
for c in "${cases[@]}"; do
    # launch:NAME = bench_launch.py's small case NAME (attn, row_f32, ...), else a bench_upstream case
    if [[ $c == launch:* ]]; then
        prog=(python3 benchmarks/bench_launch.py --only "${c#launch:}" --calls 20)
    else
        prog=(python3 benchmarks/bench_upstream.py --examples "$EX" --names "$c" --warmup 1 --rep 1)
    fi
    f=${c//:/_}
    for side in ours upstream; do
        (if [ "$side" = ours ]; then source ~/tl-env.sh; else export PYTHONPATH=~/up-site; fi
         # extern "C" kernels keep their plain names; torch's (the reference) are mangled (_Z...)
         ncu --kernel-name-base mangled -k 'regex:^[a-z].*_kernel$' --launch-skip 2 --launch-count 1 \
             --set full --import-source yes -o "$L/$f-$side" -f \
             "${prog[@]}" > "$L/$f-$side.err" 2>&1
         ncu --import "$L/$f-$side.ncu-rep" --csv --page details > "$L/$f-$side.csv" 2>> "$L/$f-$side.err"
         # per SASS instruction: executions and warp-stall samples by reason (where each kernel waits)
         ncu --import "$L/$f-$side.ncu-rep" --csv --page source --print-source sass \
             > "$L/$f-$side-sass.csv" 2>> "$L/$f-$side.err")
    done
    python3 - "$L/$f-ours.csv" "$L/$f-upstream.csv" "$c" <<'EOF'
import csv, sys


def metrics(path):
    rows = [r for r in csv.reader(open(path)) if len(r) > 10]
    if not rows:
        return {}
    head = rows[0]
    at = {k: head.index(k) for k in ("Section Name", "Metric Name", "Metric Unit", "Metric Value")}
    return {(r[at["Section Name"]], r[at["Metric Name"]]): (r[at["Metric Value"]], r[at["Metric Unit"]])
            for r in rows[1:]}


ours, up = metrics(sys.argv[1]), metrics(sys.argv[2])
print(f"== {sys.argv[3]}: {len(ours)} / {len(up)} metrics (ours / upstream)")
for key in ours:
    if key not in up:
        continue
    a, b = ours[key][0].replace(",", ""), up[key][0].replace(",", "")
    try:
        x, y = float(a), float(b)
    except ValueError:
        continue
    if abs(x - y) > 0.02 * max(abs(x), abs(y), 1e-9):
        print(f"  {key[0][:28]:28} {key[1][:44]:44} {a:>14} {b:>14} {ours[key][1]}")
EOF
done
tar czf "$OUT/ncu.tgz" -C "$L" .
