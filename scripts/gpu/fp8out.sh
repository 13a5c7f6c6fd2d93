#!/usr/bin/env bash
# Branch fp8out (issue 13) on the H200: lone FP8 GEMMs kept in fp16 (GPUOPT_DISABLE_FUSION=fp8_lone
# converts them: fp8_alllone), the e4m3 output with bf16 C (GPUOPT_FP8_E4M3_OUT=staged: the old
# f16 + quantize form, fp8_staged), cuBLASLt algorithm timing for the FP8 and int8 GEMMs
# (ops/matmul/cuda/lt_tune.h; GPUOPT_MATMUL_AUTOTUNE=0: *_notune) and fast FP8 accumulation
# (GPUOPT_FP8_FAST_ACCUM=1: fp8_fastacc). First Fp8Gemm and Int8Gemm in backend_ops against the
# CPU reference (the timed algorithms; each e4m3-output form; fast accumulation) and memcheck,
# test_cuda Fp8*/Int8Gemm* (sessions eager/captured/replayed, the plan-store entries), then
# which FP8 GEMMs of BERT-base fall back from an e4m3 output to f16 + a quantize pass
# (GPUOPT_LOG_LEVEL=info), then BERT-base s128 device ms (run --json, median of 20, CUDA graph)
# at b32 and b256 with each switch on and off in this one binary, and rel-L2 against fp32 (as
# fp8.sh). Records to $OUT/fp8.json. About 3 minutes:  scripts/gpu_check.sh fp8out
set -uo pipefail
cd "$(dirname "$0")/../.."
G=${GPUOPT_BIN:-build-h200/bin/gpuopt}
B=$(dirname "$G")
# Each op's cases with the algorithm timing (the default), then under memcheck with cuBLASLt's
# first algorithm (GPUOPT_MATMUL_AUTOTUNE=0: 8 candidates x 4 runs per case would take minutes
# there; the timing launches the same GEMM on the same buffers).
ops_check() {
  echo "== backend_ops $* against the CPU reference =="
  "$B/backend_ops" test "$@" 2>&1 | grep -v " OK " | tail -20
  GPUOPT_MATMUL_AUTOTUNE=0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
    "$B/backend_ops" test "$@" 2>&1 | tail -2
}
ops_check --op Fp8Gemm
ops_check --op Int8Gemm
# Each e4m3-output form on its own (auto ran above: GPUOPT_LOG_LEVEL=info says which form it got).
for form in bf16 staged; do
  echo "== backend_ops Fp8Gemm e4m3 outputs, GPUOPT_FP8_E4M3_OUT=$form =="
  GPUOPT_FP8_E4M3_OUT=$form "$B/backend_ops" test --op Fp8Gemm --case "e4m3 out" 2>&1 | grep -v " OK " | tail -8
done
echo "== which e4m3-output form each shape got (auto) =="
GPUOPT_LOG_LEVEL=info "$B/backend_ops" test --op Fp8Gemm --case "e4m3 out" 2>&1 | grep -E "Fp8Gemm m=" | sort | uniq | head
echo "== backend_ops Fp8Gemm with GPUOPT_FP8_FAST_ACCUM=1 =="
GPUOPT_FP8_FAST_ACCUM=1 "$B/backend_ops" test --op Fp8Gemm 2>&1 | grep -v " OK " | tail -20
"$B/test_cuda" --gtest_filter='Fp8*:Int8Gemm*:LtTune*:MatmulPlans*:Dtypes/Matmul.*' 2>&1 | grep -E -A12 "Failure|^\[  (PASSED|FAILED)" | head -60
echo "== BERT-base s128 =="
PYTHONUNBUFFERED=1 timeout 170 python3 scripts/gpu/fp8.py --gpuopt "$G" --out "${OUT:-.}/fp8.json" \
  --batches "${BATCHES:-32,256}" \
  --precisions "${PRECISIONS:-fp16,fp8,fp8_alllone,fp8_staged@256,fp8_fastacc,fp8_notune@256,int8,int8_notune@256}" \
  --profile "${PROFILE:-fp8,int8}" --log-fallbacks \
  --commit "${GPUOPT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}" 2>&1 | grep -v Warning
