#!/usr/bin/env bash
# gpuopt's depthwise channels-last kernel on the H200 (scripts/gpu_check.sh depthwise):
#  1. backend_ops NhwcFusedConv against the CPU reference (the depthwise cases run the kernel);
#  2. EfficientNet-B0, MobileNetV3-L and ConvNeXt-T (torchvision, legacy export) through
#     scripts/gpu/compare.py at batch 32 and 256, fp16, once with cuDNN's grouped path
#     (GPUOPT_DEPTHWISE_KERNEL=cudnn) and once with the kernel, each with its accuracy against
#     PyTorch fp32; then the per-op profile at batch 256 with the kernel.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
D=${OUT:-./perf-out}/depthwise
mkdir -p "$D"
"$B/backend_ops" test --op NhwcFusedConv > "$D/backend_ops.txt" 2>&1
echo "backend_ops NhwcFusedConv (exit $?): $(tail -1 "$D/backend_ops.txt")"
grep -E "FAIL" "$D/backend_ops.txt" | head -10
for mode in cudnn auto; do
  echo "== GPUOPT_DEPTHWISE_KERNEL=$mode =="; mkdir -p "$D/$mode"
  GPUOPT_DEPTHWISE_KERNEL=$mode MODELS=${MODELS:-efficientnet_b0,mobilenet_v3_large,convnext_tiny} \
    BATCHES=${BATCHES:-32,256} EXPORTERS=legacy RUNNERS=gpuopt OUT="$D/$mode" \
    PROFILE_BATCH=$([ $mode = auto ] && echo 256) bash scripts/gpu/compare.sh 2>&1 | tail -n 30
done
