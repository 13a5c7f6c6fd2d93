#!/usr/bin/env bash
# The CUDA kernels registered by opset range (issue 16; GPUOPT_CUDA_OP_RANGE) on the H200
# (scripts/gpu_check.sh op_versions): backend-ops of every op with more than one CUDA form, each
# form's cases at an opset inside its range (tests/backend_ops/cases_versions.cpp and the older
# cases) against the CPU form of the same opset; then the ONNX conformance node tests on cuda,
# whose models span opsets 7-27 (the counts must match the CPU run and the earlier H200 runs).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
D=${OUT:-./perf-out}/op_versions
mkdir -p "$D"
fail=0
for op in Softmax LogSoftmax Slice Pad Clip Resize Upsample; do
  "$B/backend_ops" test --op "$op" > "$D/backend_ops_$op.txt" 2>&1
  rc=$?
  [ $rc -ne 0 ] && fail=1
  echo "backend_ops $op (exit $rc): $(tail -1 "$D/backend_ops_$op.txt")"
  grep -E "opset|FAIL" "$D/backend_ops_$op.txt" | grep -E "FAIL" | head -5
done
"$B/backend_ops" coverage
[ -x build-h200/tests/test_cuda ] && build-h200/tests/test_cuda --gtest_filter='CudaOpRanges.*' | tail -3
for dev in cpu cuda; do
  "$B/gpuopt_conformance" --device "$dev" --data-dir "$ONNX_NODE_TESTS" --expectations tools/conformance/expectations \
    -j 12 --quiet > "$D/conformance_$dev.txt" 2>&1
  rc=$?
  [ $rc -ne 0 ] && fail=1
  echo "conformance --device $dev (exit $rc): $(tail -2 "$D/conformance_$dev.txt" | tr '\n' ' ')"
done
exit $fail
