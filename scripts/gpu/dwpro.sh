#!/usr/bin/env bash
# The depthwise conv's input activation (dw_prologue pass: the expand conv's SiLU/HardSwish
# applied by the depthwise kernel as it loads) and 1x1 convs without activation as one cuBLASLt
# GEMM with the bias epilogue (conv_gemm.h), on the H200 (scripts/gpu_check.sh dwpro), about
# 3 minutes:
#  1. backend_ops NhwcFusedConv: every case with the default tiles; the prologue cases with the
#     narrow and wide1 tiles, through cuDNN (GPUOPT_DEPTHWISE_KERNEL=cudnn: the activated copy of
#     x), and the 1x1 cases with GPUOPT_CONV_GEMM=0; test_cuda's DwPrologueSession (small
#     EfficientNet and MobileNet blocks through Session, the pass on/off, graph replay);
#  2. compute-sanitizer memcheck on the prologue and 1x1 GEMM cases;
#  3. how many activations moved (inspect --optimized --json, pattern "dw_prologue");
#  4. EfficientNet-B0 and MobileNetV3-L (compare.py's legacy exports, fp16) at batch 32 and 256,
#     device ms (gpuopt run --json, median of 20, CUDA graph), one binary: before (dw_prologue
#     off, GPUOPT_CONV_GEMM=0), the GEMM route alone (dw_prologue off), after (defaults);
#  5. accuracy against ONNX Runtime fp32 (se_accuracy.py: features and every SE mean) before and
#     after; then EfficientNet-B0's per-op profile at batch 256 (defaults).
set -uo pipefail
source "$(dirname "$0")/preamble.inc" dwpro
MODELS=(efficientnet_b0 mobilenet_v3_large)

echo "== 1. backend_ops =="
bo() {  # name env-assignment case-filter
  local name=$1 envs=$2 filter=()
  [ "$3" != - ] && filter=(--case "$3")
  env $envs timeout 100 "$B/backend_ops" test --op NhwcFusedConv "${filter[@]}" >"$D/bo_$name.txt" 2>&1
  echo "backend_ops NhwcFusedConv ($name: ${envs:-defaults}, case $3): exit $? $(tail -1 "$D/bo_$name.txt")"
  grep -E " FAIL " "$D/bo_$name.txt" | head -5
}
bo all "" -
bo narrow GPUOPT_DEPTHWISE_KERNEL=narrow prologue
bo wide1 GPUOPT_DEPTHWISE_KERNEL=wide1 prologue
bo cudnn GPUOPT_DEPTHWISE_KERNEL=cudnn prologue
bo nogemm GPUOPT_CONV_GEMM=0 1x1
TC=$B/test_cuda; [ -x "$TC" ] || TC=$B/tests/test_cuda
if [ -x "$TC" ]; then  # mini EfficientNet and a HardSwish block through Session, dw_prologue on and off
  timeout 120 "$TC" --gtest_filter='DwPrologueSession.*:SeSession.*' >"$D/test_cuda.txt" 2>&1
  echo "test_cuda DwPrologueSession/SeSession: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$D/test_cuda.txt" | tr '\n' ' ')"
  grep -E "rel L2|Failure|FAILED" "$D/test_cuda.txt" | head -12
fi

lap
echo "== 2. compute-sanitizer memcheck =="
if command -v compute-sanitizer >/dev/null 2>&1; then
  for case in "prologue" "1x1 gemm"; do
    timeout 60 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 "$B/backend_ops" test \
      --op NhwcFusedConv --case "$case" >"$D/memcheck_${case// /_}.txt" 2>&1
    echo "memcheck --case '$case': exit $? $(tail -1 "$D/memcheck_${case// /_}.txt")"
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
echo "== 3. dw_prologue moves =="
for m in "${MODELS[@]}"; do
  for off in "" dw_prologue; do
    GPUOPT_DISABLE_FUSION=$off "$G" inspect "$M/${m}_legacy.onnx" --optimized --device cuda --precision fp16 --json \
      2>/dev/null | python3 -c 'import json,sys
j = json.load(sys.stdin)
n = sum(1 for f in j["compile"]["fusions"] if "dw_prologue" in f.get("pattern", ""))
print("%-20s GPUOPT_DISABLE_FUSION=%-12s depthwise convs with an input activation: %3d" % (sys.argv[1], sys.argv[2] or "-", n))' "$m" "$off" || echo "$m inspect failed"
  done
done

lap
echo "== 4. device ms, one binary =="
ms() {  # model batch [env...]
  local m=$1 b=$2; shift 2
  env "$@" "$G" run "$M/${m}_legacy.onnx" --device cuda --precision fp16 --random-inputs --batch "$b" \
    --iterations 20 --warmup 3 --json 2>/dev/null | python3 -c 'import json,sys; print("%.3f" % json.load(sys.stdin)["device_ms"]["median"])' 2>/dev/null || echo fail
}
printf "%-20s %5s %10s %10s %10s\n" model batch before gemm-only after
for m in "${MODELS[@]}"; do
  for b in 32 256; do  # the GEMM route alone at b256 only
    mid=-
    [ $b = 256 ] && mid=$(ms $m $b GPUOPT_DISABLE_FUSION=dw_prologue)
    printf "%-20s %5s %10s %10s %10s\n" "$m" "$b" \
      "$(ms $m $b GPUOPT_DISABLE_FUSION=dw_prologue GPUOPT_CONV_GEMM=0)" "$mid" "$(ms $m $b)"
  done
done | tee "$D/table.txt"

lap
echo "== 5. accuracy against ONNX Runtime fp32 (features and every SE mean, batch 2) =="
for m in "${MODELS[@]}"; do
  timeout 100 python3 scripts/gpu/se_accuracy.py "$M/${m}_legacy.onnx" --gpuopt "$G" --work "$D/acc_$m" \
    --config before=GPUOPT_DISABLE_FUSION=dw_prologue,GPUOPT_CONV_GEMM=0 --config after= 2>&1 | tail -3
done
for m in efficientnet_b0; do
  timeout 60 "$G" run "$M/${m}_legacy.onnx" --device cuda --precision fp16 --random-inputs --batch 256 --iterations 3 \
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
