#!/usr/bin/env bash
# Stage apache-tvm and upstream's wheel for the device and copy upstream's tests beside them
# (scripts/lease/README.md). stage-tvm empties .gpu/, so the order matters.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
../shared/gpu/stage-tvm
../shared/gpu/stage-upstream
rm -rf .gpu/conformance && cp -r ../shared/conformance .gpu/
du -sh .gpu/* | sort -h
