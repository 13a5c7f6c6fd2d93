#!/usr/bin/env bash
# INT8 on the H200 (issue 13): ResNet-50 and BERT-base s128 quantized by `gpuopt quantize`
# (calibration on the GPU), timed at --precision int8 beside the f32 model at fp16 in gpuopt and
# ONNX Runtime CPU on the same QDQ file, with accuracy (ResNet-50: top-1 agreement with f32 on
# 1,000 held-out images of the made-up task ResNet-50 is trained on first (synth_task.py); BERT:
# rel-L2 of the last hidden state; for ResNet-50 also how decisive f32's top-1 is, and ONNX
# Runtime's quantize_static vs gpuopt quantize on the same ORT_CALIB samples, both run by gpuopt
# int8, as the quantizer's oracle). ACCURACY_TARGET (default bert_base=rel-l2=0.018) also quantizes
# with `--accuracy-target` and times that file as precision int8+fp16. Records in the format of
# docs/perf/h200.json go to $OUT/int8.json; the quantize reports to $OUT/int8_report_<model>/.
#   GPU_CHECK_TIMEOUT=1800 MODELS=resnet50,bert_base BATCHES=1,32,256 HELDOUT=1000 scripts/gpu_check.sh int8
set -uo pipefail
cd "$(dirname "$0")/../.."
G=${GPUOPT_BIN:-build-h200/bin/gpuopt}
B=$(dirname "$G")
echo "== Int8Gemm kernels against the CPU reference =="
"$B/backend_ops" test --op Int8Gemm 2>&1 | tail -25
"$B/test_cuda" --gtest_filter='Int8Gemm*' 2>&1 | grep -E -A12 "Failure|^\[  (PASSED|FAILED)" | head -60
compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 "$B/backend_ops" test --op Int8Gemm 2>&1 | tail -2
echo "== benchmark =="
PYTHONUNBUFFERED=1 python3 scripts/gpu/int8.py --gpuopt "$G" --out "${OUT:-.}/int8.json" --work /tmp/int8-work \
  --models "${MODELS:-resnet50,bert_base}" --batches "${BATCHES:-1,32,256}" --heldout "${HELDOUT:-1000}" \
  --calib "${CALIB:-256}" --ort-calib "${ORT_CALIB:-32}" --report-dir "${OUT:-.}" \
  --accuracy-target "${ACCURACY_TARGET-bert_base=rel-l2=0.018}" \
  --commit "${GPUOPT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}" 2>&1 | grep -v Warning
