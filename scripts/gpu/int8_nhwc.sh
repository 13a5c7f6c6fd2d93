#!/usr/bin/env bash
# INT8 QDQ CNNs on the channels-last path (issue 13), on the H200 through scripts/gpu_check.sh
# int8_nhwc, over build-h200/bin; about 2 minutes:
#  1. backend_ops QuantizeLinear/DequantizeLinear (their per-tensor path no longer divides
#     64-bit indices per element) and Int8Gemm; test_cuda Int8Gemm* (LargeM now on grid-aligned
#     inputs), with the failure text;
#  2. generated ResNet-18/50 and MobileNetV2 (tools/models) quantized by `gpuopt quantize` on
#     the CPU, run at --precision int8 on cuda with the layout pass on and off
#     (GPUOPT_DISABLE_FUSION=nhwc) against the same QDQ file on the CPU reference (rel-L2 3e-2:
#     fp16 activations move a few values by one quantum);
#  3. full-size ResNet-50 (random weights, tools/models resnet50_full) quantized on 16 random
#     samples: device time at b32 and b256, fp16 on the f32 file vs int8 on the QDQ file with
#     the layout pass on and off, and the int8 b256 time per op type.
# Ends with a table.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
G=$B/gpuopt
D=${OUT:-./perf-out}/int8_nhwc
M=/tmp/models-int8
mkdir -p "$D" "$M"
declare -a rows
row() { rows+=("$1|$2"); echo "$1: $2"; }

echo "== backend_ops: QuantizeLinear, DequantizeLinear (per-tensor fast path), Int8Gemm =="
for op in QuantizeLinear DequantizeLinear Int8Gemm; do
  "$B/backend_ops" test --op $op >"$D/backend_ops_$op.txt" 2>&1
  rc=$?
  grep -E "FAIL" "$D/backend_ops_$op.txt" | head -10
  row "backend_ops $op (exit $rc)" "$(tail -1 "$D/backend_ops_$op.txt")"
done

echo "== test_cuda Int8Gemm =="
"$B/test_cuda" --gtest_filter='Int8Gemm*' >"$D/test_cuda.txt" 2>&1
rc=$?
row "test_cuda Int8Gemm* (exit $rc)" "$(grep -E '^\[  (PASSED|FAILED)' "$D/test_cuda.txt" | tr '\n' ' ')"
grep -E -A12 "Failure" "$D/test_cuda.txt" | head -60

echo "== generated QDQ CNNs: int8 on cuda (nhwc on/off) vs the CPU reference =="
python3 tools/models/make_models.py --out $M --inputs 2 resnet18 resnet50 mobilenetv2 >/dev/null
python3 - "$M" <<'EOF'
import sys, os, numpy as np
m = sys.argv[1]
rng = np.random.default_rng(3)
os.makedirs(f"{m}/calib", exist_ok=True)
np.save(f"{m}/calib/input.npy", rng.standard_normal((16, 3, 64, 64)).astype(np.float32))
EOF
for m in resnet18 resnet50 mobilenetv2; do
  "$G" quantize "$M/$m.onnx" --calibration "$M/calib" -o "$M/$m.int8.onnx" >"$D/$m.quantize.txt" 2>&1 ||
    { row "$m quantize" "FAILED: $(tail -1 "$D/$m.quantize.txt")"; continue; }
  args=(--input "input=$M/${m}_inputs/input.npy")
  "$G" run "$M/$m.int8.onnx" "${args[@]}" --device cpu --precision int8 --iterations 1 \
    --output-dir "$D/out/$m/cpu" >/dev/null 2>"$D/$m.err"
  for off in "" nhwc; do
    lay=$([ -z "$off" ] && echo on || echo off)
    out=$D/out/$m/int8_$lay
    if GPUOPT_DISABLE_FUSION=$off "$G" run "$M/$m.int8.onnx" "${args[@]}" --device cuda --precision int8 \
      --iterations 3 --output-dir "$out" >/dev/null 2>>"$D/$m.err"; then
      res=$(python3 scripts/gpu/compare_npy.py "$D/out/$m/cpu" "$out" --rel-l2 3e-2 2>&1 || echo "OVER BOUND")
      row "$m int8 nhwc=$lay vs cpu" "$(echo "$res" | tr '\n' ' ')"
    else
      row "$m int8 nhwc=$lay" "RUN FAILED: $(tail -1 "$D/$m.err")"
    fi
  done
done

echo "== ResNet-50 (full size, random weights) device time, median of 30 =="
python3 tools/models/make_models.py --out $M resnet50_full >/dev/null
python3 -c "
import numpy as np; np.save('$M/calib224.npy', np.random.default_rng(4).standard_normal((16, 3, 224, 224)).astype(np.float32))"
mkdir -p "$M/calib224" && mv "$M/calib224.npy" "$M/calib224/input.npy"
"$G" quantize $M/resnet50_full.onnx --calibration "$M/calib224" --device cuda -o $M/resnet50_full.int8.onnx \
  >"$D/resnet50_full.quantize.txt" 2>&1 || row "resnet50_full quantize" "FAILED: $(tail -1 "$D/resnet50_full.quantize.txt")"
t() {  # model precision batch disable-fusion
  GPUOPT_DISABLE_FUSION=$4 "$G" run "$1" --device cuda --precision "$2" --batch "$3" --iterations 30 --warmup 3 \
    --random-inputs --json 2>>"$D/run.err" | python3 -c "import json,sys; j=json.load(sys.stdin); d=j.get('device_ms',{}).get('median',0); print('%.3f ms device, %.0f img/s (%s)' % (d, $3*1000/d if d else 0, j.get('execution','?')))"
}
for b in 32 256; do
  row "resnet50 fp16 b$b" "$(t $M/resnet50_full.onnx fp16 $b '')"
  row "resnet50 int8 b$b nhwc=on" "$(t $M/resnet50_full.int8.onnx int8 $b '')"
  row "resnet50 int8 b$b nhwc=off" "$(t $M/resnet50_full.int8.onnx int8 $b nhwc)"
done
"$G" run $M/resnet50_full.int8.onnx --device cuda --precision int8 --batch 256 --random-inputs --iterations 3 \
  --profile >"$D/profile_int8_b256.txt" 2>&1
sed -n '/^profile:/,/^slowest/p' "$D/profile_int8_b256.txt" | head -20

echo
echo "== summary =="
for r in "${rows[@]}"; do printf '%-40s %s\n' "${r%%|*}" "${r#*|}"; done
