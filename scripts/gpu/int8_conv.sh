#!/usr/bin/env bash
# Int8Conv / Int8Add (issue 13): QDQ convolutions folded into int8 cuDNN convolutions that read
# and write int8 channels-last tensors, QDQ residual adds into one int8 pass
# (on by default; GPUOPT_INT8_CONV=0 turns it off for the A/B). On the
# H200 through `scripts/gpu_check.sh int8_conv`, over build-h200/bin; about 2-3 minutes:
#  1. backend_ops Int8Conv and Int8Add against the CPU reference (GPUOPT_LOG_LEVEL=info names
#     the path each conv shape took: cuDNN fused epilogue / cuDNN int32 + gpuopt's epilogue /
#     direct kernel); test_cuda Int8Conv* (a QDQ residual block at int8 on CUDA vs the CPU
#     session, eager and replayed; the epilogue-constant kernel vs the host's arithmetic);
#  2. generated ResNet-50 (tools/models, 64x64) quantized by `gpuopt quantize`, run at
#     --precision int8 on cuda with GPUOPT_INT8_CONV=1 and =0 against the same QDQ file on the
#     CPU reference (rel-L2 5e-2: on the CPU reference the folded graph of the generated
#     ResNet-50 is at 0.031, the unfolded fp16 one at 0.028), with the number of Int8Conv shapes;
#  3. full-size ResNet-50 (random weights) quantized on 16 random samples: device time at b1,
#     b32 and b256 (median of 30, as int8_nhwc.sh) for fp16 on the f32 file and int8 on the QDQ
#     file with the flag on and off, its accuracy at b2 against the CPU reference with the flag
#     on, and the int8 b256 time per op type with the flag on;
#  4. the strided Int8Conv cases under compute-sanitizer memcheck.
# Ends with a table. The first run of each conv shape builds a cuDNN graph (runtime fusion may
# compile kernels): if it runs past gpu_check's limit, GPU_CHECK_TIMEOUT=600.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
G=$B/gpuopt
D=${OUT:-./perf-out}/int8_conv
M=/tmp/models-int8
mkdir -p "$D" "$M"
declare -a rows
row() { rows+=("$1|$2"); echo "$1: $2"; }

echo "== backend_ops Int8Conv =="
GPUOPT_LOG_LEVEL=info "$B/backend_ops" test --op Int8Conv >"$D/backend_ops.txt" 2>&1
rc=$?
grep -E "FAIL" "$D/backend_ops.txt" | head -10
grep -E "Int8Conv .*: (cuDNN|gpuopt)" "$D/backend_ops.txt" | sed 's/.*Int8Conv/Int8Conv/' | sort | uniq -c | head -20
row "backend_ops Int8Conv (exit $rc)" "$(tail -1 "$D/backend_ops.txt")"
GPUOPT_LOG_LEVEL=info "$B/backend_ops" test --op Int8Add >"$D/backend_ops_add.txt" 2>&1
row "backend_ops Int8Add (exit $?)" "$(tail -1 "$D/backend_ops_add.txt")"
grep -E "FAIL" "$D/backend_ops_add.txt" | head -5

"$B/test_cuda" --gtest_filter='Int8Conv*' >"$D/test_cuda.txt" 2>&1
row "test_cuda Int8Conv* (exit $?)" "$(grep -E '^\[  (PASSED|FAILED)' "$D/test_cuda.txt" | tr '\n' ' ')"
grep -E -A12 "Failure" "$D/test_cuda.txt" | head -40

echo "== generated QDQ ResNet-50 (64 px): int8 on cuda, GPUOPT_INT8_CONV=1/0, vs the CPU reference =="
python3 tools/models/make_models.py --out $M --inputs 2 resnet50 >/dev/null
python3 -c "
import os, numpy as np; os.makedirs('$M/calib', exist_ok=True)
np.save('$M/calib/input.npy', np.random.default_rng(3).standard_normal((16, 3, 64, 64)).astype(np.float32))"
for m in resnet50; do
  "$G" quantize "$M/$m.onnx" --calibration "$M/calib" -o "$M/$m.int8.onnx" >"$D/$m.quantize.txt" 2>&1 ||
    { row "$m quantize" "FAILED: $(tail -1 "$D/$m.quantize.txt")"; continue; }
  args=(--input "input=$M/${m}_inputs/input.npy")
  "$G" run "$M/$m.int8.onnx" "${args[@]}" --device cpu --precision int8 --iterations 1 \
    --output-dir "$D/out/$m/cpu" >/dev/null 2>"$D/$m.err"
  for flag in 1 0; do
    out=$D/out/$m/int8conv_$flag
    if GPUOPT_INT8_CONV=$flag GPUOPT_LOG_LEVEL=info "$G" run "$M/$m.int8.onnx" "${args[@]}" --device cuda \
      --precision int8 --iterations 3 --output-dir "$out" >/dev/null 2>"$D/$m.$flag.err"; then
      res=$(python3 scripts/gpu/compare_npy.py "$D/out/$m/cpu" "$out" --rel-l2 5e-2 2>&1 || echo "OVER BOUND")
      n=$(grep -cE "Int8Conv [^:]*: (cuDNN|gpuopt|the plain)" "$D/$m.$flag.err")
      row "$m int8 INT8_CONV=$flag vs cpu" "$(echo "$res" | tr '\n' ' ') [$n Int8Conv shapes]"
    else
      row "$m int8 INT8_CONV=$flag" "RUN FAILED: $(tail -1 "$D/$m.$flag.err")"
    fi
  done
done

echo "== ResNet-50 (full size, random weights) device time, median of 30 =="
python3 tools/models/make_models.py --out $M resnet50_full >/dev/null
mkdir -p "$M/calib224"
python3 -c "
import numpy as np; np.save('$M/calib224/input.npy', np.random.default_rng(4).standard_normal((16, 3, 224, 224)).astype(np.float32))
np.save('$M/x224.npy', np.random.default_rng(5).standard_normal((2, 3, 224, 224)).astype(np.float32))"
[ -f $M/resnet50_full.int8.onnx ] || "$G" quantize $M/resnet50_full.onnx --calibration "$M/calib224" --device cuda \
  -o $M/resnet50_full.int8.onnx >"$D/resnet50_full.quantize.txt" 2>&1 ||
  row "resnet50_full quantize" "FAILED: $(tail -1 "$D/resnet50_full.quantize.txt")"
t() {  # model precision batch GPUOPT_INT8_CONV
  GPUOPT_INT8_CONV=$4 "$G" run "$1" --device cuda --precision "$2" --batch "$3" --iterations 30 --warmup 3 \
    --random-inputs --json 2>>"$D/run.err" | python3 -c "import json,sys; j=json.load(sys.stdin); d=j.get('device_ms',{}).get('median',0); print('%.3f ms device, %.0f img/s (%s)' % (d, $3*1000/d if d else 0, j.get('execution','?')))"
}
for b in 1 32 256; do
  row "resnet50 fp16 b$b" "$(t $M/resnet50_full.onnx fp16 $b 0)"
  row "resnet50 int8 b$b INT8_CONV=0" "$(t $M/resnet50_full.int8.onnx int8 $b 0)"
  row "resnet50 int8 b$b INT8_CONV=1" "$(t $M/resnet50_full.int8.onnx int8 $b 1)"
done
in=$(python3 -c "import onnx; print(onnx.load('$M/resnet50_full.int8.onnx', load_external_data=False).graph.input[0].name)")
"$G" run $M/resnet50_full.int8.onnx --input "$in=$M/x224.npy" --device cpu --precision int8 --iterations 1 \
  --output-dir "$D/out/r50/cpu" >/dev/null 2>>"$D/run.err"
GPUOPT_INT8_CONV=1 "$G" run $M/resnet50_full.int8.onnx --input "$in=$M/x224.npy" --device cuda --precision int8 \
  --iterations 1 --output-dir "$D/out/r50/int8conv" >/dev/null 2>>"$D/run.err"
row "resnet50 int8 INT8_CONV=1 b2 vs cpu" \
  "$(python3 scripts/gpu/compare_npy.py "$D/out/r50/cpu" "$D/out/r50/int8conv" --rel-l2 5e-2 2>&1 | tr '\n' ' ')"
GPUOPT_INT8_CONV=1 "$G" run $M/resnet50_full.int8.onnx --device cuda --precision int8 --batch 256 --random-inputs \
  --iterations 3 --profile >"$D/profile_int8conv_b256.txt" 2>&1
sed -n '/^profile:/,/^slowest/p' "$D/profile_int8conv_b256.txt" | head -20

echo "== memcheck: backend_ops Int8Conv, strided cases =="
timeout 90 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 "$B/backend_ops" test \
  --op Int8Conv --case stride >"$D/memcheck.txt" 2>&1
row "memcheck backend_ops Int8Conv stride (exit $?)" "$(tail -1 "$D/memcheck.txt")"

echo
echo "== summary =="
for r in "${rows[@]}"; do printf '%-44s %s\n' "${r%%|*}" "${r#*|}"; done
