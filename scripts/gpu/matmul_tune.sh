#!/usr/bin/env bash
# cuBLASLt algorithm timing (GPUOPT_MATMUL_AUTOTUNE) on the H200 (scripts/gpu_check.sh matmul_tune):
#  1. test_cuda's matmul/Gemm tests and backend_ops MatMul, Gemm, FusedGemm with tuning on (the
#     default), so the chosen algorithms are checked against the CPU reference;
#  2. BERT-base, GPT-2, ViT-B/16 and ResNet-50 (compare.py's legacy exports, fp16) at batch 32 and
#     256: device ms (median of 50, CUDA graph) with GPUOPT_MATMUL_AUTOTUNE=0 and =1, the same binary,
#     and each first run's wall time (first_run_ms: the timing's cost).
# About 3 minutes with the exports cached in /tmp/compare-models.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
G=${GPUOPT_BIN:-$B/gpuopt}
D=${OUT:-./perf-out}/matmul_tune
M=/tmp/compare-models
MODELS=${MODELS:-bert_base,gpt2,vit_b_16,resnet50}
mkdir -p "$D"
"$B/test_cuda" --gtest_filter='*Matmul*:*MatMul*:*Gemm*' >"$D/test_cuda.txt" 2>&1
echo "test_cuda matmul/gemm: exit $? $(grep -E '^\[  (PASSED|FAILED)' "$D/test_cuda.txt" | tr '\n' ' ')"
for op in MatMul Gemm FusedGemm; do
  "$B/backend_ops" test --op "$op" >"$D/bo_$op.txt" 2>&1
  echo "backend_ops $op: exit $? $(tail -1 "$D/bo_$op.txt")"
  grep FAIL "$D/bo_$op.txt" | head -5
done
MODELS=$MODELS BATCHES=32 EXPORTERS=legacy RUNNERS=gpuopt OUT=/tmp/matmul_tune_cmp \
  bash -c 'mkdir -p $OUT; scripts/gpu/compare.sh' 2>&1 | grep -E '^\{' | cut -c1-160
ms() {  # model batch [env...] -> "device_ms first_result_s"
  local m=$1 b=$2; shift 2
  env "$@" "$G" run "$M/${m}_legacy.onnx" --device cuda --precision fp16 --random-inputs --batch "$b" \
    --iterations 50 --warmup 3 --json 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print("%.3f %.0fms" % (j["device_ms"]["median"], j["first_run_ms"]))' 2>/dev/null || echo "fail -"
}
printf "%-14s %5s %16s %16s\n" model batch "heuristic(first)" "timed(first)"
for m in ${MODELS//,/ }; do
  for b in 32 256; do
    printf "%-14s %5s %16s %16s\n" "$m" "$b" "$(ms "$m" "$b" GPUOPT_MATMUL_AUTOTUNE=0)" "$(ms "$m" "$b" GPUOPT_MATMUL_AUTOTUNE=1)"
  done
done | tee "$D/table.txt"
