#!/usr/bin/env bash
# The CNN epilogues and the depthwise kernel's tile on the H200 (scripts/gpu_check.sh cnn_ab):
#  1. backend_ops NhwcFusedConv and FusedConv (HardSwish/Swish epilogues), NhwcFusedConv again
#     with GPUOPT_DEPTHWISE_KERNEL=wide and =narrow (every depthwise case through each tile);
#  2. ConvNeXt-T, EfficientNet-B0, MobileNetV3-L (compare.py's exports, legacy, fp16) at batch 32
#     and 256: device ms (median of 50, CUDA graph) with the tile narrow / wide / auto, and with
#     GPUOPT_DISABLE_FUSION=conv,gemm_scale for the epilogue fusions' share;
#  3. Nsight Compute on one 7x7 depthwise launch of ConvNeXt-T at b256 per tile (SOL, pipes,
#     occupancy), when ncu is present.
# About 3 minutes with the exports cached in /tmp/compare-models.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
G=${GPUOPT_BIN:-$B/gpuopt}
D=${OUT:-./perf-out}/cnn_ab
M=/tmp/compare-models
mkdir -p "$D"
for spec in "NhwcFusedConv auto" "FusedConv auto" "NhwcFusedConv wide" "NhwcFusedConv narrow"; do
  set -- $spec
  GPUOPT_DEPTHWISE_KERNEL=$2 "$B/backend_ops" test --op "$1" >"$D/bo_$1_$2.txt" 2>&1
  echo "backend_ops $1 ($2): exit $? $(tail -1 "$D/bo_$1_$2.txt")"
  grep FAIL "$D/bo_$1_$2.txt" | head -5
done
MODELS=convnext_tiny,efficientnet_b0,mobilenet_v3_large BATCHES=32 EXPORTERS=legacy RUNNERS=gpuopt OUT=/tmp/cnn_ab_cmp \
  bash -c 'mkdir -p $OUT; scripts/gpu/compare.sh' 2>&1 | grep -E '^\{' | cut -c1-160
ms() {  # model batch [env...]
  local m=$1 b=$2; shift 2
  env "$@" "$G" run "$M/${m}_legacy.onnx" --device cuda --precision fp16 --random-inputs --batch "$b" \
    --iterations 50 --warmup 3 --json 2>/dev/null | python3 -c 'import json,sys; print("%.3f" % json.load(sys.stdin)["device_ms"]["median"])' 2>/dev/null || echo fail
}
printf "%-20s %5s %8s %8s %8s %10s\n" model batch narrow wide auto "no-fusion"
for m in convnext_tiny efficientnet_b0 mobilenet_v3_large; do
  for b in 32 256; do
    printf "%-20s %5s %8s %8s %8s %10s\n" "$m" "$b" "$(ms $m $b GPUOPT_DEPTHWISE_KERNEL=narrow)" \
      "$(ms $m $b GPUOPT_DEPTHWISE_KERNEL=wide)" "$(ms $m $b GPUOPT_DEPTHWISE_KERNEL=auto)" \
      "$(ms $m $b GPUOPT_DISABLE_FUSION=conv,gemm_scale)"
  done
done | tee "$D/table.txt"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[ -z "$NCU" ] && { echo "ncu not found"; exit 0; }
for t in narrow wide; do
  GPUOPT_DEPTHWISE_KERNEL=$t timeout 120 "$NCU" --kernel-name regex:depthwise_row --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats \
    --section InstructionStats "$G" run "$M/convnext_tiny_legacy.onnx" --device cuda --precision fp16 \
    --random-inputs --batch 256 --iterations 1 --warmup 0 --no-cuda-graphs >"$D/ncu_$t.txt" 2>&1
  echo "== ncu $t (exit $?)"
  grep -E "Duration|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy|Executed Ipc A|Issue Slots Busy|One or More|No Eligible|FMA|ALU|XU|depthwise_row<" "$D/ncu_$t.txt" | head -24
done
