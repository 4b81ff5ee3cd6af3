#!/usr/bin/env bash
# Session 55's queued checks of the zero-stage promotion (tl.enable_zero_stage_promotion, opt-in until
# measured), after calls 1-2 of README.md (source ~/tl-env.sh done here; carry .gpu/conformance):
#   1. upstream's split-K GEMMs as compiled, promoted (3 stages) and under the experimental
#      tl.enable_zero_stage_promotion_any (row_variants.py --configs: one process, alternating rounds);
#   2. tests/gpu/test_zero_stage_promotion_gpu.py (the promoted loop against torch, 3 / 2 stages, 7 trips)
#      and session 56's tests/gpu/test_narrow_floats_gpu.py (fp8 / 16-bit math in float32, 8/16-bit atomics);
#   3. gdn_wy_fast as compiled, with the register-prefetch hand edits and under ..._any;
#   4. MORE=1: upstream's gemm_splitk example tests with the promotion on, and upstream's copy test file
#      (session 54's T.sblock scopes and scoped T.annotate_safe_value, never run on a GPU yet).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source ~/tl-env.sh
export TILELANG_CACHE_DIR=${TILELANG_CACHE_DIR:-/tmp/tl-cache}
nvidia-smi --query-gpu=name --format=csv,noheader
P='promo={"tl.enable_zero_stage_promotion": true};any={"tl.enable_zero_stage_promotion_any": true}'
quiet() { grep -v "^fla\|Warning\|warn"; }
timeout 150 python3 scripts/lease/row_variants.py --only splitk_gemm,splitk_gemm_vec_atomic --rounds "${ROUNDS:-2}" \
    --configs "$P" 2>&1 | quiet | tail -8
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_zero_stage_promotion_gpu.py \
    tests/gpu/test_narrow_floats_gpu.py 2>&1 | tail -3
timeout 150 python3 scripts/lease/row_variants.py --only gdn_wy_fast --rounds "${ROUNDS:-2}" --configs "$P" 2>&1 | quiet | tail -8
[ "${MORE:-0}" = 1 ] || exit 0
TILELANG_PASS_CONFIGS='{"tl.enable_zero_stage_promotion": true}' timeout 150 python3 scripts/conformance.py gpu \
    --jobs 2 --only examples/gemm_splitk --out "$OUT/sk" 2>&1 | tail -6
timeout 150 python3 scripts/conformance.py gpu --jobs 4 --only testing/python/language/test_tilelang_language_copy.py \
    --out "$OUT/cp" 2>&1 | tail -12
