#!/usr/bin/env bash
# The depthwise kernel's wide tile at stride 2 and squeeze-excitation's mean inside the depthwise
# conv (se_mean pass) on the H200 (scripts/gpu_check.sh se), about 3 minutes:
#  1. backend_ops NhwcFusedConv: every case with the defaults (wide tile at strides 1 and 2), the
#     depthwise cases with the narrow tile, the mean cases through cuDNN's conv
#     (GPUOPT_DEPTHWISE_KERNEL=cudnn: the separate mean kernel); kernel times (backend_ops perf
#     --case se-perf: conv, conv + mean, the ReduceMean it replaces; stride 2 per tile);
#     test_cuda's SeSession (a small EfficientNet through Session, se_mean on/off, graph replay);
#  2. compute-sanitizer memcheck on the new depthwise cases (stride-2 tiles, the mean output) and
#     racecheck on the mean's shared-memory reduction;
#  3. how many means the pass fused (inspect --optimized --json);
#  4. EfficientNet-B0 and MobileNetV3-L (compare.py's legacy exports, fp16) at batch 32 and 256:
#     device ms (gpuopt run --json, median of 20, CUDA graph), all in this one binary: before
#     (GPUOPT_DEPTHWISE_KERNEL=wide1, se_mean off) and after (defaults), and at b256 each change
#     alone;
#  5. accuracy against ONNX Runtime fp32 (se_accuracy.py: the model cut at the head's pool, the
#     features and every SE mean compared, not only the logits) before (wide1, se_mean off), after
#     (defaults) and through cuDNN (the separate mean kernel); then EfficientNet-B0's per-op
#     profile at batch 256.
set -uo pipefail
source "$(dirname "$0")/preamble.inc" se
MODELS=(efficientnet_b0 mobilenet_v3_large)

echo "== 1. backend_ops =="
# Every NhwcFusedConv case with the default tiles; the narrow tile on cases_nhwc's depthwise cases
# ("depthwise ..."); cuDNN's conv plus the mean kernel on every mean case.
for spec in "auto -" "narrow depthwise" "cudnn mean"; do
  set -- $spec
  filter=(); [ "$2" != - ] && filter=(--case "$2")
  GPUOPT_DEPTHWISE_KERNEL=$1 timeout 100 "$B/backend_ops" test --op NhwcFusedConv "${filter[@]}" >"$D/bo_$1.txt" 2>&1
  echo "backend_ops NhwcFusedConv (tile $1, case ${2}): exit $? $(tail -1 "$D/bo_$1.txt")"
  grep -E " FAIL " "$D/bo_$1.txt" | head -5
done
# Kernel times: conv, conv + mean, the ReduceMean it replaces (auto); stride 2 with the old tile.
for spec in "auto se-perf" "wide1 se-perf s2"; do
  t=${spec%% *} case=${spec#* }
  GPUOPT_DEPTHWISE_KERNEL=$t timeout 60 "$B/backend_ops" perf --case "$case" >"$D/perf_$t.txt" 2>&1
  echo "-- backend_ops perf --case '$case', tile $t (exit $?):"; grep -E "se-perf" "$D/perf_$t.txt" | cut -c1-150
done
TC=$B/test_cuda; [ -x "$TC" ] || TC=$B/tests/test_cuda
if [ -x "$TC" ]; then  # the mini EfficientNet through Session on CUDA, se_mean on and off
  timeout 120 "$TC" --gtest_filter='SeSession.*:Precisions/NhwcSession.*' >"$D/test_cuda.txt" 2>&1
  echo "test_cuda SeSession/NhwcSession: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$D/test_cuda.txt" | tr '\n' ' ')"
  grep -E "rel L2|Failure|FAILED" "$D/test_cuda.txt" | head -12
fi

lap
echo "== 2. compute-sanitizer =="
if command -v compute-sanitizer >/dev/null 2>&1; then
  for spec in "memcheck dw" "racecheck dw+mean C=32"; do
    tool=${spec%% *} case=${spec#* }
    timeout 50 compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 3 "$B/backend_ops" test \
      --op NhwcFusedConv --case "$case" >"$D/${tool}_${case// /_}.txt" 2>&1
    echo "$tool --case '$case': exit $? $(tail -1 "$D/${tool}_${case// /_}.txt")"
  done
else
  echo "compute-sanitizer not found"
fi

# compare.py exports the models (torchvision, random weights) on first use.
[ -f "$M/efficientnet_b0_legacy.onnx" ] && [ -f "$M/mobilenet_v3_large_legacy.onnx" ] || {
  echo "== exporting the models (compare.sh, batch 1) =="
  MODELS=efficientnet_b0,mobilenet_v3_large BATCHES=1 EXPORTERS=legacy RUNNERS=gpuopt OUT="$D/export" \
    bash -c 'mkdir -p $OUT; scripts/gpu/compare.sh' 2>&1 | tail -3
}

lap
echo "== 3. se_mean fusions =="
for m in "${MODELS[@]}"; do
  for off in "" se_mean; do
    GPUOPT_DISABLE_FUSION=$off "$G" inspect "$M/${m}_legacy.onnx" --optimized --device cuda --precision fp16 --json \
      2>/dev/null | python3 -c 'import json,sys
j = json.load(sys.stdin)
mean = sum(1 for f in j["compile"]["fusions"] if "se_mean" in f.get("pattern", ""))
rm = sum(o["count"] for o in j["ops"] if o["op"] == "ReduceMean")
print("%-20s GPUOPT_DISABLE_FUSION=%-8s convs writing the mean: %3d, ReduceMean nodes: %3d" % (sys.argv[1], sys.argv[2] or "-", mean, rm))' "$m" "$off" || echo "$m inspect failed"
  done
done

lap
echo "== 4. device ms, one binary =="
ms() {  # model batch [env...]
  local m=$1 b=$2; shift 2
  env "$@" "$G" run "$M/${m}_legacy.onnx" --device cuda --precision fp16 --random-inputs --batch "$b" \
    --iterations 20 --warmup 3 --json 2>/dev/null | python3 -c 'import json,sys; print("%.3f" % json.load(sys.stdin)["device_ms"]["median"])' 2>/dev/null || echo fail
}
printf "%-20s %5s %10s %10s %10s %10s\n" model batch wide1 wide1+se wide wide+se
for m in "${MODELS[@]}"; do
  for b in 32 256; do  # at b32 only before (wide1, se_mean off) and after (defaults)
    mid1=-; mid2=-
    if [ $b = 256 ]; then
      mid1=$(ms $m $b GPUOPT_DEPTHWISE_KERNEL=wide1); mid2=$(ms $m $b GPUOPT_DEPTHWISE_KERNEL=wide GPUOPT_DISABLE_FUSION=se_mean)
    fi
    printf "%-20s %5s %10s %10s %10s %10s\n" "$m" "$b" \
      "$(ms $m $b GPUOPT_DEPTHWISE_KERNEL=wide1 GPUOPT_DISABLE_FUSION=se_mean)" "$mid1" "$mid2" \
      "$(ms $m $b GPUOPT_DEPTHWISE_KERNEL=auto)"
  done
done | tee "$D/table.txt"

lap
echo "== 5. accuracy against ONNX Runtime fp32 (features and every SE mean, batch 2) =="
for m in "${MODELS[@]}"; do
  timeout 100 python3 scripts/gpu/se_accuracy.py "$M/${m}_legacy.onnx" --gpuopt "$G" --work "$D/acc_$m" \
    --config before=GPUOPT_DEPTHWISE_KERNEL=wide1,GPUOPT_DISABLE_FUSION=se_mean --config after= \
    $([ $m = efficientnet_b0 ] && echo --config cudnn=GPUOPT_DEPTHWISE_KERNEL=cudnn) 2>&1 | tail -4
done
for m in efficientnet_b0; do
  "$G" run "$M/${m}_legacy.onnx" --device cuda --precision fp16 --random-inputs --batch 256 --iterations 3 \
    --profile --json >"$D/profile_${m}_b256.json" 2>&1
  python3 - "$D/profile_${m}_b256.json" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception:
    print(sys.argv[1], "no profile"); sys.exit(0)
ops = sorted(j["profile"]["ops"], key=lambda o: -o["gpu_us"])[:8]
tot = sum(o["gpu_us"] for o in j["profile"]["ops"])
print(f"{sys.argv[1].split('/')[-1]}: {tot/1e3:.2f} ms GPU over nodes; " +
      ", ".join(f"{o['op']} {o['gpu_us']/1e3:.2f} ({o['nodes']})" for o in ops))
PY
done
lap
