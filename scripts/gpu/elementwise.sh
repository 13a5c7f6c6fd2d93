#!/usr/bin/env bash
# The elementwise and Transpose fast paths on the H200 (docs/cuda.md, "Elementwise and
# Transpose paths"). Builds nothing: binaries in build-h200/bin ($B). In order:
#  1. backend_ops test of every op those kernels serve (each path's cases against the CPU
#     reference, guard bytes around every output), and the path cases under compute-sanitizer
#     memcheck when it is installed;
#  2. test_cuda's plan and path tests (magic division, path choice, misaligned views, 2^31
#     elements);
#  3. backend_ops perf of the BERT-size cases ("perf" in the label), each timed as one CUDA graph
#     of 50 runs: us, GB/s and the share of the 4.23 TB/s D2D copy ceiling;
#  4. BERT-base fp16 at batch 32 x 128 with `gpuopt run --profile` (node by node), when gpuopt
#     and python3 with onnx are there.
# Logs under "$OUT/elementwise" (./elementwise-out without OUT). Exit status 1 if a check failed.
# Takes a few minutes: through scripts/gpu_check.sh give it GPU_CHECK_TIMEOUT=900.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${B:-${BIN:-build-h200/bin}}
D=${OUT:-./elementwise-out}/elementwise
mkdir -p "$D"
BO=; TC=
for f in "$B/backend_ops" "$B/../backend_ops"; do [ -z "$BO" ] && [ -x "$f" ] && BO=$f; done
for f in "$B/test_cuda" "$B/tests/test_cuda" "$B/../tests/test_cuda"; do [ -z "$TC" ] && [ -x "$f" ] && TC=$f; done
[ -n "$BO" ] || { echo "elementwise.sh: backend_ops not found in $B (scripts/build_h200.sh)"; exit 1; }
fail=0

OPS=(Add Sub Mul Div Mod Max Min Equal Less Greater GreaterOrEqual LessOrEqual And Or Xor PRelu Pow
     Erf Relu Sigmoid Neg Gelu Cast Transpose Slice Expand Tile Gather Where)
declare -A res
for op in "${OPS[@]}"; do
  timeout 300 "$BO" test --op "$op" --case '!perf' >"$D/test_$op.log" 2>&1  # perf cases: step 3
  rc=$?
  res[$op]=$(tail -n 1 "$D/test_$op.log")
  if [ $rc -ne 0 ]; then fail=1; grep -E " FAIL " "$D/test_$op.log" | head -5; fi
done

memcheck=skipped
if command -v compute-sanitizer >/dev/null 2>&1; then
  memcheck=passed
  for op in Add Cast Transpose Gather; do
    if ! timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 "$BO" test --op "$op" --case path \
        >"$D/memcheck_$op.log" 2>&1; then
      memcheck="FAILED ($op, see memcheck_$op.log)"
      fail=1
      tail -n 8 "$D/memcheck_$op.log"
    fi
  done
fi

unit=skipped
if [ -n "$TC" ]; then
  if timeout 120 "$TC" --gtest_brief=1 \
      --gtest_filter='FastDivmod.*:VecWidth.*:PlanBinary.*:PlanTranspose.*:StridedCopy.*:CudaElementwisePaths.*:Broadcast.*:BinaryBroadcast*:*Unary*:*Cast*' \
      >"$D/test_cuda.log" 2>&1; then
    unit=passed
  else
    unit="FAILED (see test_cuda.log)"
    fail=1
    tail -n 15 "$D/test_cuda.log"
  fi
fi

timeout 300 "$BO" perf --case perf >"$D/perf.log" 2>&1 || { fail=1; tail -n 5 "$D/perf.log"; }

# End to end: BERT-base fp16 at batch 32 x 128, node by node (where the elementwise time went).
bert=skipped
if [ -x "$B/gpuopt" ] && python3 -c "import onnx" 2>/dev/null; then
  M=${TMPDIR:-/tmp}/elementwise-models
  if python3 tools/models/make_models.py --out "$M" bert_base >"$D/make_models.log" 2>&1; then
    timeout 300 "$B/gpuopt" run "$M/bert_base.onnx" --device cuda --precision fp16 --batch 32 --dim sequence=128 \
      --random-inputs --iterations 3 --profile >"$D/profile_bert_b32.txt" 2>&1 && bert=ran || bert="FAILED (profile_bert_b32.txt)"
  fi
fi

echo "== elementwise: memcheck $memcheck, test_cuda $unit; logs in $D =="
printf '%-15s %s\n' op "backend_ops test"
for op in "${OPS[@]}"; do printf '%-15s %s\n' "$op" "${res[$op]}"; done
echo
echo "perf (CUDA graph of 50 runs; ceiling 4230 GB/s = D2D copy, read + write):"
# The perf table: op, label (spaces inside), us, GB/s, TFLOP/s, timing.
awk 'seen && NF >= 6 && ($NF == "graph" || $NF == "loop") {
       lbl = $2; for (i = 3; i <= NF - 4; ++i) lbl = lbl " " $i
       printf "%-10s %-44s %9s us %8s GB/s %5.0f%%  %s\n", $1, lbl, $(NF-3), $(NF-2), 100 * $(NF-2) / 4230, $NF
     }
     /^---/ { seen = 1 }' "$D/perf.log"
echo
echo "BERT-base fp16 b32 x 128 profile: $bert"
[ "$bert" = ran ] && sed -n '/^profile:/,/^slowest/p' "$D/profile_bert_b32.txt" | head -16
exit $fail
