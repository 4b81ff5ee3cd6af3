#!/usr/bin/env bash
# Issue 20's rows still under upstream in the last whole table (session 49 on an H200: topk_router,
# the two split-K gemv kernels, rms_norm_splitk), ours against upstream's wheel alternating ROUNDS
# (3) times (table.sh ab: case by case, the first side rotating), so one moment does not decide a row.
# Opt-ins that may close a row go in as more sides: OPTS='{"tl.some_key": true}'.
set -uo pipefail
ROUNDS=${ROUNDS:-3}
# shellcheck disable=SC2086
bash scripts/lease/table.sh ab =topk_router,gemv_splitk_vectorized,gemv_splitk_vectorized_tvm,rms_norm_splitk \
    ${OPTS:+"$OPTS"} @upstream "$ROUNDS"
