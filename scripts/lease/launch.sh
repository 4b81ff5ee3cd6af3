#!/usr/bin/env bash
# bench_launch's small kernels (CASES, default attn,row_f32) with ours (default, then each object of
# CONFIGS as TILELANG_PASS_CONFIGS) and upstream's wheel (~/up-site, when there), one process each,
# ROUNDS (2) rounds, the second in reverse order; the kernel / do_bench columns of each run
# printed, the JSONs in $OUT/launch.tgz. The default CONFIGS are the two levers on the small
# attention's 1.3 us gap to upstream's kernel (sessions 33-34): its epilogue stored from registers
# (no staging through shared memory and a TMA store) and every tensor map prefetched at entry.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
CASES=${CASES:-attn,row_f32}; ROUNDS=${ROUNDS:-2}
CONFIGS=${CONFIGS:-'{"tl.disable_epilogue_staging": true};{"tl.enable_tensormap_prefetch": true};{"tl.disable_epilogue_staging": true, "tl.enable_tensormap_prefetch": true}'}
L=$(mktemp -d)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$L/gpu.txt"
IFS=';' read -ra cfgs <<< "$CONFIGS"
sides=(default); for ((i = 0; i < ${#cfgs[@]}; i++)); do sides+=("cfg$i"); done
[ -d ~/up-site ] && sides+=(upstream)
for ((r = 1; r <= ROUNDS; r++)); do
    order=("${sides[@]}")
    if ((r % 2 == 0)); then order=(); for ((i = ${#sides[@]} - 1; i >= 0; i--)); do order+=("${sides[i]}"); done; fi
    for s in "${order[@]}"; do
        case $s in
        upstream) run=(env -u TILELANG_CACHE_DIR PYTHONPATH="$HOME/up-site" python3) ;;
        default)  run=(bash -c 'source ~/tl-env.sh && exec python3 "$@"' _) ;;
        *)        run=(bash -c 'source ~/tl-env.sh && TILELANG_PASS_CONFIGS=$0 exec python3 "$@"' "${cfgs[${s#cfg}]}") ;;
        esac
        "${run[@]}" benchmarks/bench_launch.py --only "$CASES" --json "$L/$s-r$r.json" > "$L/$s-r$r.log" 2>&1
        python3 - "$L/$s-r$r.json" "$s" "$r" <<'PY'
import json, sys
path, side, r = sys.argv[1:4]
try:
    rows = json.load(open(path))["rows"]
except Exception as e:  # noqa: BLE001
    print(f"round {r} {side}: no result ({e})"); sys.exit()
cells = []
for case, impls in rows.items():
    t, ref = impls.get("tilelang", {}), impls.get("torch", {})
    cells.append(f"{case} kernel {t.get('kernel', float('nan')):.2f} do_bench {t.get('do_bench', float('nan')):.2f}"
                 f" (torch {ref.get('kernel', float('nan')):.2f} / {ref.get('do_bench', float('nan')):.2f})")
print(f"round {r} {side:9}: " + "; ".join(cells))
PY
    done
done
for ((i = 0; i < ${#cfgs[@]}; i++)); do echo "cfg$i = ${cfgs[i]}"; done
tar czf "$OUT/launch.tgz" -C "$L" .
