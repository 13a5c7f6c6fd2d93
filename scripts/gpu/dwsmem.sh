#!/usr/bin/env bash
# The shared-memory depthwise kernel (src/ops/conv/cuda/depthwise_smem.cu,
# the default, GPUOPT_DEPTHWISE_KERNEL=auto or smem) against the register tiles
# (GPUOPT_DEPTHWISE_KERNEL=tiles) on the H200, about 3-4 minutes,
# from the repository root with the binaries in build-h200/bin:
#  1. backend_ops NhwcFusedConv, every case, with smem and with the default; the "dwsmem" cases
#     (the kernel's edges) at GPUOPT_LOG_LEVEL=debug, counting the convs that ran the smem kernel
#     and those that fell back to the register tiles (should be 0);
#  2. compute-sanitizer memcheck on the dwsmem and dw+mean cases with smem, racecheck (shared
#     memory hazards) on a few dwsmem shapes;
#  3. per-launch us of EfficientNet-B0's SE-block depthwise convs at b32 (backend_ops perf --case
#     se-perf), tiles against smem; EfficientNet-B0 and MobileNetV3-L (compare.py's legacy exports, fp16) at batch 32 and 256,
#     device ms (gpuopt run --json, median of 20, CUDA graph), one binary, tiles against smem;
#     NhwcFusedConv's GPU ms in EfficientNet-B0's per-op profile at batch 256, both;
#  4. accuracy against ONNX Runtime fp32 (se_accuracy.py: features and every SE mean, batch 2),
#     tiles and smem.
set -uo pipefail
source "$(dirname "$0")/preamble.inc" dwsmem
MODELS=(efficientnet_b0 mobilenet_v3_large)

echo "== 1. backend_ops NhwcFusedConv =="
bo() {  # name kernel [case-filter]
  local name=$1 kernel=$2 filter=()
  [ -n "${3:-}" ] && filter=(--case "$3")
  GPUOPT_DEPTHWISE_KERNEL=$kernel timeout 120 "$B/backend_ops" test --op NhwcFusedConv "${filter[@]}" \
    >"$D/bo_$name.txt" 2>&1
  echo "backend_ops NhwcFusedConv ($name: GPUOPT_DEPTHWISE_KERNEL=$kernel${3:+, case $3}): exit $? $(tail -1 "$D/bo_$name.txt")"
  grep -E " FAIL " "$D/bo_$name.txt" | head -8
}
bo smem smem
bo tiles tiles
GPUOPT_LOG_LEVEL=debug GPUOPT_DEPTHWISE_KERNEL=smem timeout 60 "$B/backend_ops" test --op NhwcFusedConv \
  --case dwsmem >"$D/bo_dwsmem_debug.txt" 2>&1
echo "dwsmem cases: $(grep -c 'depthwise smem kernel' "$D/bo_dwsmem_debug.txt") convs ran the smem kernel," \
  "$(grep -c 'smem does not apply' "$D/bo_dwsmem_debug.txt") fell back (want 0); $(tail -1 "$D/bo_dwsmem_debug.txt")"
grep -E "worst err" "$D/bo_smem.txt" | grep dwsmem | sed -E 's/.*worst err ([0-9]+)%.*/\1/' | sort -n | tail -1 |
  xargs -I{} echo "dwsmem cases: worst error {}% of tolerance"

lap
echo "== 2. compute-sanitizer =="
if command -v compute-sanitizer >/dev/null 2>&1; then
  for case in dwsmem "dw+mean"; do
    f="$D/memcheck_${case//[^a-z]/_}.txt"
    GPUOPT_DEPTHWISE_KERNEL=smem timeout 90 compute-sanitizer --tool memcheck --report-api-errors no \
      --error-exitcode 3 "$B/backend_ops" test --op NhwcFusedConv --case "$case" >"$f" 2>&1
    echo "memcheck --case '$case' (smem): exit $? $(tail -1 "$f")"
  done
  for case in "dwsmem C=144" "dwsmem C=16 k7"; do
    f="$D/racecheck_${case//[^a-zA-Z0-9]/_}.txt"
    GPUOPT_DEPTHWISE_KERNEL=smem timeout 60 compute-sanitizer --tool racecheck --report-api-errors no \
      --error-exitcode 3 "$B/backend_ops" test --op NhwcFusedConv --case "$case" >"$f" 2>&1
    echo "racecheck --case '$case' (smem): exit $? $(grep -E 'RACECHECK SUMMARY' "$f" | head -1) $(tail -1 "$f")"
  done
else
  echo "compute-sanitizer not found"
fi

# compare.py exports the models (torchvision, random weights) on first use.
[ -f "$M/efficientnet_b0_legacy.onnx" ] && [ -f "$M/mobilenet_v3_large_legacy.onnx" ] || {
  echo "== exporting the models (compare.sh) =="
  mkdir -p "$D/export"
  MODELS=efficientnet_b0,mobilenet_v3_large BATCHES=32 EXPORTERS=legacy RUNNERS=gpuopt OUT="$D/export" \
    bash scripts/gpu/compare.sh 2>&1 | tail -3
}

lap
echo "== 3. per launch (backend_ops perf --case se-perf: EfficientNet-B0's SE-block convs at b32), then device ms =="
for k in tiles smem; do
  GPUOPT_DEPTHWISE_KERNEL=$k timeout 60 "$B/backend_ops" perf --op NhwcFusedConv --case se-perf >"$D/perf_$k.txt" 2>&1
done
python3 scripts/gpu/perf_us.py NhwcFusedConv tiles "$D/perf_tiles.txt" smem "$D/perf_smem.txt"
ms() {  # model batch kernel
  GPUOPT_DEPTHWISE_KERNEL=$3 timeout 60 "$G" run "$M/$1_legacy.onnx" --device cuda --precision fp16 --random-inputs \
    --batch "$2" --iterations 20 --warmup 3 --json 2>/dev/null |
    python3 -c 'import json,sys; print("%.3f" % json.load(sys.stdin)["device_ms"]["median"])' 2>/dev/null || echo fail
}
printf "%-20s %5s %10s %10s %8s\n" model batch tiles smem smem/tiles
for m in "${MODELS[@]}"; do
  for b in 32 256; do
    a=$(ms "$m" "$b" tiles)
    s=$(ms "$m" "$b" smem)
    r=$(python3 -c "import sys; print('%.3f' % (float(sys.argv[2]) / float(sys.argv[1])))" "$a" "$s" 2>/dev/null || echo -)
    printf "%-20s %5s %10s %10s %8s\n" "$m" "$b" "$a" "$s" "$r"
  done
done | tee "$D/table.txt"
for k in tiles smem; do  # the depthwise convs are NhwcFusedConv nodes (with the 1x1 convs)
  GPUOPT_DEPTHWISE_KERNEL=$k timeout 60 "$G" run "$M/efficientnet_b0_legacy.onnx" --device cuda --precision fp16 \
    --random-inputs --batch 256 --iterations 3 --profile --json >"$D/profile_efficientnet_b0_b256_$k.json" 2>&1
  python3 - "$D/profile_efficientnet_b0_b256_$k.json" "$k" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception:
    print(sys.argv[1], "no profile"); sys.exit(0)
ops = j["profile"]["ops"]
tot = sum(o["gpu_us"] for o in ops)
conv = [o for o in ops if o["op"] == "NhwcFusedConv"]
print("efficientnet_b0 b256 %-4s: %.2f ms GPU over nodes, NhwcFusedConv %s" % (sys.argv[2], tot / 1e3,
      ", ".join("%.2f ms (%s nodes)" % (o["gpu_us"] / 1e3, o["nodes"]) for o in conv)))
PY
done

lap
echo "== 4. accuracy against ONNX Runtime fp32 (features and every SE mean, batch 2) =="
for m in "${MODELS[@]}"; do
  timeout 100 python3 scripts/gpu/se_accuracy.py "$M/${m}_legacy.onnx" --gpuopt "$G" --work "$D/acc_$m" \
    --config tiles=GPUOPT_DEPTHWISE_KERNEL=tiles --config smem=GPUOPT_DEPTHWISE_KERNEL=smem 2>&1 | tail -3
done
lap
