#!/usr/bin/env bash
# Issue 20's rows still under upstream (sessions 43-44), each opt-in that may close them against the
# default and upstream's wheel, alternating (table.sh ab: round 2 runs the sides in reverse order).
#   gdn_scaled_dot_kkt: tl.enable_exact_store_fences (5 -> 2 fence.proxy.async a block, upstream's
#   count), then with the whole-tile stmatrix epilogue too (upstream's epilogue); gdn_wy_fast_bwd is
#   the other kernel the fences key changes. rms_norm_splitk rides along as the control (neither key
#   changes its CUDA).
set -uo pipefail
ROUNDS=${ROUNDS:-2}
bash scripts/lease/table.sh ab =gdn_scaled_dot_kkt,gdn_wy_fast_bwd,rms_norm_splitk \
    '{"tl.enable_exact_store_fences": true}' \
    '{"tl.enable_exact_store_fences": true, "tl.enable_stmatrix": true}' \
    @upstream "$ROUNDS"
