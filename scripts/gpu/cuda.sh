#!/usr/bin/env bash
# CUDA backend on the H200: unit tests (allocator, elementwise kernels with guard bytes), then
# the same under compute-sanitizer memcheck.
set -uo pipefail
$BIN/test_cuda --gtest_brief=1
echo "memcheck:"
compute-sanitizer --tool memcheck --leak-check no --report-api-errors no --error-exitcode 3 $BIN/test_cuda --gtest_brief=1 2>&1 | tail -5
