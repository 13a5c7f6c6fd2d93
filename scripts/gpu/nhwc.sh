#!/usr/bin/env bash
# Channels-last convolutions on the H200 (run through scripts/gpu_check.sh nhwc, over build-h200/bin):
#  1. backend_ops: NhwcFusedConv (odd channels, C=3 stem, groups, depthwise, stride 2, every
#     bias/z/activation mix; f16/bf16) and NhwcMaxPool (padding with negative inputs), FusedConv
#     for regressions of the shared code;
#  2. test_cuda's NhwcSession (generated ResNet/MobileNetV2, fp16/bf16, pass on and off, nodes on
#     cuda, CUDA graph replay) and the older conv session tests;
#  3. generated ResNet-18/50 and MobileNetV2 through `gpuopt run` at fp16/bf16, GPUOPT_DISABLE_FUSION
#     unset vs nhwc, against the f32 CPU reference (relative L2 1e-2);
#  4. cuDNN fallbacks seen (no NHWC algorithm -> NCHW between transposes; fused call declined);
#  5. ResNet-50 (full size) fp16 device time at b32 and b256 with and without the pass, and the
#     b256 per-op profile with it. Ends with a table. Takes a few minutes: GPU_CHECK_TIMEOUT=900.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
G=$B/gpuopt
D=${OUT:-./perf-out}/nhwc
M=/tmp/models
mkdir -p "$D"
declare -a rows
row() { rows+=("$1|$2"); echo "$1: $2"; }

echo "== backend_ops =="
for op in NhwcFusedConv NhwcMaxPool FusedConv; do
  "$B/backend_ops" test --op $op >"$D/backend_ops_$op.txt" 2>&1
  rc=$?
  grep -E "FAIL" "$D/backend_ops_$op.txt" | head -10
  row "backend_ops $op (exit $rc)" "$(tail -1 "$D/backend_ops_$op.txt")"
done

echo "== test_cuda =="
"$B/test_cuda" --gtest_filter='*Nhwc*:*CudaSession*:*FusedConv*' >"$D/test_cuda.txt" 2>&1
rc=$?
row "test_cuda Nhwc/CudaSession (exit $rc)" "$(grep -E '^\[  (PASSED|FAILED)' "$D/test_cuda.txt" | tr '\n' ' ')"
grep -E "rel L2 vs cpu|FAILED|Failure" "$D/test_cuda.txt" | head -40

echo "== generated CNNs: nhwc on/off vs the f32 CPU reference =="
python3 tools/models/make_models.py --out $M --inputs 3 resnet18 resnet50 mobilenetv2 >/dev/null
for m in resnet18 resnet50 mobilenetv2; do
  args=()
  for f in "$M/${m}_inputs"/*.npy; do args+=(--input "$(basename "$f" .npy)=$f"); done
  "$G" run "$M/$m.onnx" "${args[@]}" --device cpu --iterations 1 --output-dir "$D/out/$m/cpu" >/dev/null 2>"$D/$m.err"
  for p in fp16 bf16; do
    for off in "" nhwc; do
      out=$D/out/$m/${p}_${off:-on}
      if GPUOPT_DISABLE_FUSION=$off GPUOPT_LOG_LEVEL=info "$G" run "$M/$m.onnx" "${args[@]}" --device cuda \
        --precision $p --iterations 3 --output-dir "$out" >/dev/null 2>>"$D/$m.err"; then
        res=$(python3 scripts/gpu/compare_npy.py "$D/out/$m/cpu" "$out" --rel-l2 1e-2 2>&1 || echo "OVER BOUND")
        row "$m $p nhwc=${off:-on}" "$(echo "$res" | tr '\n' ' ')"
      else
        row "$m $p nhwc=${off:-on}" "RUN FAILED: $(tail -1 "$D/$m.err")"
      fi
    done
  done
done
row "NHWC plans run NCHW between transposes" "$(cat "$D"/*.err | grep -c 'no channels-last cuDNN algorithm')"
row "fused-call fallbacks" "$(cat "$D"/*.err | grep -c 'declined the fused')"
grep -h "no channels-last cuDNN algorithm\|declined the fused" "$D"/*.err | sed 's/.*\] //' | sort | uniq -c | head

echo "== ResNet-50 (full size) fp16 device time, median of 50 =="
python3 tools/models/make_models.py --out $M resnet50_full >/dev/null
for b in 32 256; do
  for off in nhwc ""; do
    r=$(GPUOPT_DISABLE_FUSION=$off "$G" run $M/resnet50_full.onnx --device cuda --precision fp16 --batch $b \
      --iterations 50 --warmup 5 --random-inputs --json 2>>"$D/run.err" | python3 -c "import json,sys; j=json.load(sys.stdin); d=j.get('device_ms',{}).get('median',0); print('%.3f ms device, %.0f img/s (%s)' % (d, $b*1000/d if d else 0, j.get('execution','?')))")
    row "resnet50 fp16 b$b nhwc=${off:-on}" "$r"
  done
done
"$G" run $M/resnet50_full.onnx --device cuda --precision fp16 --batch 256 --random-inputs --iterations 3 --profile \
  >"$D/profile_b256.txt" 2>&1
sed -n '/^profile:/,/^slowest/p' "$D/profile_b256.txt" | head -16

echo
echo "== summary =="
for r in "${rows[@]}"; do printf '%-44s %s\n' "${r%%|*}" "${r#*|}"; done
