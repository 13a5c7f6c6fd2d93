#!/usr/bin/env bash
# FP8 e4m3 and int8 GEMMs on the H200 (issue 13, --precision fp8 / int8): Fp8Gemm and Int8Gemm
# and SkipLayerNormalization's e4m3 and int8 outputs against the CPU reference (backend_ops, with
# compute-sanitizer; test_cuda Fp8* and Int8Gemm*:
# sessions, eager/capture/replay), then BERT-base s128 (the legacy export of
# scripts/gpu/compare.py, reused from /tmp/compare-models when there) at fp16, fp8 (with and
# without the LayerNorms' e4m3 copies, GPUOPT_DISABLE_FUSION=fp8_norm; fp8_unchained, without the
# chains and shared inputs, on request) and int8 (with and without the Int8Gemm epilogue and
# LayerNorm int8-output fusions, GPUOPT_DISABLE_FUSION=int8_epilogue,int8_norm; int8_noepi and
# int8_nonorm, one of them off, on request):
# device ms (run --json device_ms.median) at batch 32 and 256, and rel-L2 of each against the
# fp32 run on the same batch-32 inputs. int8 and fp8 calibrate on the run's own inputs (fp8
# rel-L2 is therefore on its calibration data: optimistic). Records to $OUT/fp8.json.
# About 3 minutes:  scripts/gpu_check.sh fp8     (BATCHES=32,256 PRECISIONS=fp16,fp8,fp8_nonorm,int8,int8_unfused)
set -uo pipefail
cd "$(dirname "$0")/../.."
G=${GPUOPT_BIN:-build-h200/bin/gpuopt}
B=$(dirname "$G")
# Each op's cases (SkipLayerNormalization: its e4m3 and int8 outputs, labelled "... out"), then
# again under memcheck.
ops_check() {
  echo "== backend_ops $* against the CPU reference =="
  "$B/backend_ops" test "$@" 2>&1 | grep -v " OK " | tail -30
  compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 "$B/backend_ops" test "$@" 2>&1 | tail -2
}
ops_check --op Fp8Gemm
ops_check --op Int8Gemm
ops_check --op SkipLayerNormalization --case " out"
"$B/test_cuda" --gtest_filter='Fp8*:Int8Gemm*' 2>&1 | grep -E -A12 "Failure|^\[  (PASSED|FAILED)" | head -60
echo "== BERT-base s128: fp16 / int8 / fp8 =="
PYTHONUNBUFFERED=1 timeout 170 python3 scripts/gpu/fp8.py --gpuopt "$G" --out "${OUT:-.}/fp8.json" \
  --batches "${BATCHES:-32,256}" --precisions "${PRECISIONS:-fp16,fp8,fp8_nonorm,int8,int8_unfused}" \
  --commit "${GPUOPT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}" 2>&1 | grep -v Warning
