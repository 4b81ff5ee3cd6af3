#!/usr/bin/env bash
# Checks of the zero-stage promotions (tl.enable_zero_stage_promotion and ..._any, both on by default
# since session 57; "off" below turns both off), after calls 1-2 of README.md (source ~/tl-env.sh done
# here; carry .gpu/conformance):
#   1. upstream's split-K GEMMs as compiled (promoted, 3 stages), with both promotions off and with the
#      one-gemm rule off (row_variants.py --configs: one process, alternating rounds);
#   2. tests/gpu/test_zero_stage_promotion_gpu.py (the promoted loop against torch, 3 / 2 stages, 7 trips)
#      and session 56's tests/gpu/test_narrow_floats_gpu.py (fp8 / 16-bit math in float32, 8/16-bit atomics);
#   3. gdn_wy_fast as compiled (the one-gemm rule), with the register-prefetch hand edits and off;
#   4. MORE=1: upstream's gemm_splitk and gdn example tests (the promotions on, the default), and
#      upstream's copy test file (session 54's T.sblock scopes and scoped T.annotate_safe_value).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source ~/tl-env.sh
export TILELANG_CACHE_DIR=${TILELANG_CACHE_DIR:-/tmp/tl-cache}
nvidia-smi --query-gpu=name --format=csv,noheader
P='off={"tl.enable_zero_stage_promotion": false};plain={"tl.enable_zero_stage_promotion_any": false}'
quiet() { grep -v "^fla\|Warning\|warn"; }
timeout 150 python3 scripts/lease/row_variants.py --only splitk_gemm,splitk_gemm_vec_atomic --rounds "${ROUNDS:-2}" \
    --configs "$P" 2>&1 | quiet | tail -8
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_zero_stage_promotion_gpu.py \
    tests/gpu/test_narrow_floats_gpu.py 2>&1 | tail -3
timeout 150 python3 scripts/lease/row_variants.py --only gdn_wy_fast --rounds "${ROUNDS:-2}" --configs "$P" 2>&1 | quiet | tail -8
[ "${MORE:-0}" = 1 ] || exit 0
timeout 300 python3 scripts/conformance.py gpu --jobs 2 --only examples/gemm_splitk examples/gdn --out "$OUT/sk" \
    2>&1 | tail -8
timeout 150 python3 scripts/conformance.py gpu --jobs 4 --only testing/python/language/test_tilelang_language_copy.py \
    --out "$OUT/cp" 2>&1 | tail -12
