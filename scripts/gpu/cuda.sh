#!/usr/bin/env bash
# CUDA backend on the H200: unit tests (allocator, elementwise kernels with guard bytes), then
# the same under compute-sanitizer memcheck. BIN: the binaries (scripts/gpu_check.sh sets it).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BIN=${BIN:-build-h200/bin}
"$BIN/test_cuda" --gtest_brief=1
echo "memcheck:"
compute-sanitizer --tool memcheck --leak-check no --report-api-errors no --error-exitcode 3 "$BIN/test_cuda" --gtest_brief=1 2>&1 | tail -5
