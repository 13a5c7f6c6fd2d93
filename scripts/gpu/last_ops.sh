#!/usr/bin/env bash
# The ops that used to fall back to the CPU in a CUDA session (issue 4): variadic Sum/Mean/Min/Max,
# Resize cubic/antialias (and the rest of Resize/Upsample), NonZero. On the H200: their
# backend_ops cases against the CPU reference, the same under compute-sanitizer memcheck, the
# host-math and session tests in test_cuda, and backend_ops perf for them. Builds nothing: runs
# from scripts/gpu_check.sh over build-h200 ($BIN). Logs under "$OUT/last_ops" when OUT is set.
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-$PWD/build-h200}
DIR=${OUT:-./last-ops-out}/last_ops
mkdir -p "$DIR"
[ -x "$BIN/backend_ops" ] || { echo "last_ops.sh: $BIN/backend_ops not found (scripts/build_h200.sh)"; exit 1; }
OPS=(Sum Mean Min Max Resize Upsample NonZero)
declare -A res
fail=0

for op in "${OPS[@]}"; do
  timeout 120 "$BIN/backend_ops" test --op "$op" >"$DIR/test_$op.log" 2>&1
  rc=$?
  res[$op]=$(tail -n 1 "$DIR/test_$op.log")
  [ $rc -ne 0 ] && fail=1 && grep -E " FAIL " "$DIR/test_$op.log" | head -5
done

memcheck=skipped
if command -v compute-sanitizer >/dev/null 2>&1; then
  memcheck=passed
  for op in Sum Resize NonZero; do
    if ! timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 "$BIN/backend_ops" test --op "$op" \
        >"$DIR/memcheck_$op.log" 2>&1; then
      memcheck="FAILED ($op, see memcheck_$op.log)"
      fail=1
      tail -n 8 "$DIR/memcheck_$op.log"
    fi
  done
fi

unit=skipped
TC=$BIN/test_cuda
[ -x "$TC" ] || TC=$BIN/tests/test_cuda
if [ -x "$TC" ]; then
  if timeout 60 "$TC" --gtest_brief=1 \
      --gtest_filter='CudaLastOpsSession.*:CudaResizePlan.*:CudaNonZero.*:CudaVariadic.*' >"$DIR/test_cuda.log" 2>&1; then
    unit=passed
  else
    unit="FAILED (see test_cuda.log)"
    fail=1
    tail -n 15 "$DIR/test_cuda.log"
  fi
fi

for op in Sum Resize NonZero; do
  timeout 60 "$BIN/backend_ops" perf --op "$op" >"$DIR/perf_$op.log" 2>&1
done

echo "== last_ops: backend_ops per op, memcheck $memcheck, test_cuda $unit; logs in $DIR =="
printf '%-10s %s\n' op "backend_ops test"
for op in "${OPS[@]}"; do printf '%-10s %s\n' "$op" "${res[$op]}"; done
echo "slowest perf case per op (the table after the '---' line: last three columns us, GB/s, TFLOP/s):"
for op in Sum Resize NonZero; do
  awk 'seen && NF >= 4 { if ($(NF-2) + 0 > best) { best = $(NF-2) + 0; line = $0 } } /^---/ { seen = 1 }
       END { if (line != "") print "  " line; else print "  (no perf rows)" }' "$DIR/perf_$op.log"
done
exit $fail
