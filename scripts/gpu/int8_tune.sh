#!/usr/bin/env bash
# Int8Conv engine autotuning and the residual fusion (issue 13): on the H200 through
# `scripts/gpu_check.sh int8_tune`, over build-h200/bin; about 3 minutes (GPU_CHECK_TIMEOUT=400
# to be safe: every tuned run times up to 16 cuDNN plans per conv shape on its first run):
#  1. backend_ops Int8Conv, every case (the residual ones too) with GPUOPT_INT8_CONV_AUTOTUNE=0
#     (heuristics' plan 0) and the residual cases again tuned (the plans timing picks must be
#     right too), Int8Add; test_cuda Int8Conv* (the residual block against the CPU session, the
#     fused residual against the pair on the GPU, the prep kernel's residual scalars);
#     the path each shape took and the tuning lines (GPUOPT_LOG_LEVEL=info) are counted;
#  2. compute-sanitizer memcheck over backend_ops' residual "3x3 stride 2" cases;
#  3. full-size ResNet-50 (random weights) quantized as int8_conv.sh does (same files, reused
#     when there): device ms (median of 20) at b256 and b32 for GPUOPT_INT8_CONV_AUTOTUNE=1/0 x
#     GPUOPT_DISABLE_FUSION=+int8_residual (opt-in) or not, and rel-L2 at b2 against the CPU reference for
#     the tuned, fused configuration; the tuning lines of the b256 run (first plan's time against
#     the chosen one's) summed.
# Ends with a table.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
G=$B/gpuopt
D=${OUT:-./perf-out}/int8_tune
M=/tmp/models-int8
mkdir -p "$D" "$M"
declare -a rows
row() { rows+=("$1|$2"); echo "$1: $2"; }
T0=$SECONDS

echo "== backend_ops Int8Conv (plan 0), residual cases tuned, Int8Add =="
GPUOPT_INT8_CONV_AUTOTUNE=0 GPUOPT_LOG_LEVEL=info "$B/backend_ops" test --op Int8Conv >"$D/backend_ops.txt" 2>&1
row "backend_ops Int8Conv autotune=0 (exit $?)" "$(tail -1 "$D/backend_ops.txt")"
grep -E "FAIL" "$D/backend_ops.txt" | head -10
grep -E "Int8Conv [0-9,a-z]+( \+residual)?: " "$D/backend_ops.txt" | sed -E 's/.*Int8Conv [0-9,a-z]+//' | sort | uniq -c
GPUOPT_LOG_LEVEL=info "$B/backend_ops" test --op Int8Conv --case residual >"$D/backend_ops_tuned.txt" 2>&1
row "backend_ops Int8Conv residual tuned (exit $?)" "$(tail -1 "$D/backend_ops_tuned.txt")"
grep -E "FAIL" "$D/backend_ops_tuned.txt" | head -10
grep -E ": plan [0-9]+ of" "$D/backend_ops_tuned.txt" | head -5
"$B/backend_ops" test --op Int8Add >"$D/backend_ops_add.txt" 2>&1
row "backend_ops Int8Add (exit $?)" "$(tail -1 "$D/backend_ops_add.txt")"
"$B/test_cuda" --gtest_filter='Int8Conv*' >"$D/test_cuda.txt" 2>&1
row "test_cuda Int8Conv* (exit $?)" "$(grep -E '^\[  (PASSED|FAILED)' "$D/test_cuda.txt" | tr '\n' ' ')"
grep -E -A12 "Failure" "$D/test_cuda.txt" | head -40
echo "[$((SECONDS - T0)) s]"

echo "== memcheck: backend_ops Int8Conv residual 3x3 stride 2 =="
GPUOPT_INT8_CONV_AUTOTUNE=0 timeout 90 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
  "$B/backend_ops" test --op Int8Conv --case "3x3 stride 2 residual" >"$D/memcheck.txt" 2>&1
row "memcheck Int8Conv residual (exit $?)" "$(tail -1 "$D/memcheck.txt")"
echo "[$((SECONDS - T0)) s]"

echo "== ResNet-50 int8 (full size, random weights): autotune x residual fusion =="
python3 tools/models/make_models.py --out $M resnet50_full >/dev/null
mkdir -p "$M/calib224"
python3 -c "
import numpy as np; np.save('$M/calib224/input.npy', np.random.default_rng(4).standard_normal((16, 3, 224, 224)).astype(np.float32))
np.save('$M/x224.npy', np.random.default_rng(5).standard_normal((2, 3, 224, 224)).astype(np.float32))"
[ -f $M/resnet50_full.int8.onnx ] || "$G" quantize $M/resnet50_full.onnx --calibration "$M/calib224" --device cuda \
  -o $M/resnet50_full.int8.onnx >"$D/quantize.txt" 2>&1 || row "resnet50_full quantize" "FAILED: $(tail -1 "$D/quantize.txt")"
echo "[$((SECONDS - T0)) s]"
t() {  # batch autotune fusion-off-list log
  GPUOPT_INT8_CONV_AUTOTUNE=$2 GPUOPT_DISABLE_FUSION=$3 GPUOPT_LOG_LEVEL=info "$G" run $M/resnet50_full.int8.onnx \
    --device cuda --precision int8 --batch "$1" --iterations 20 --warmup 3 --random-inputs --json 2>"$4" |
    python3 -c "import json,sys; j=json.load(sys.stdin); d=j.get('device_ms',{}).get('median',0); print('%.3f ms device, %.0f img/s (%s)' % (d, $1*1000/d if d else 0, j.get('execution','?')))"
}
for b in 256 32; do
  for tune in 1 0; do
    for res in on off; do
      off=0
      [ $res = on ] && off=+int8_residual  # opt-in since the first measurement
      log=$D/run_b${b}_tune${tune}_res${res}.err
      s0=$SECONDS
      r=$(t $b $tune $off "$log")
      row "resnet50 int8 b$b autotune=$tune residual=$res" "$r [$((SECONDS - s0)) s, $(grep -c '+residual: cuDNN' "$log") residual graphs]"
    done
  done
  echo "[$((SECONDS - T0)) s]"
done
# What timing bought, per shape, at b256 (tuned, fused): chosen plan's us against plan 0's.
python3 - "$D/run_b256_tune1_reson.err" <<'EOF' || true
import re, sys
best = first = n = 0
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"plan (\d+) of (\d+) \((.*?)\) ([\d.]+) us; the first plan ([\d.]+) us", line)
    if m:
        n += 1; best += float(m.group(4)); first += float(m.group(5))
print(f"b256 tuning: {n} graphs timed; sum of chosen plans {best:.0f} us vs first plans {first:.0f} us (one run each)")
EOF
in=$(python3 -c "import onnx; print(onnx.load('$M/resnet50_full.int8.onnx', load_external_data=False).graph.input[0].name)")
"$G" run $M/resnet50_full.int8.onnx --input "$in=$M/x224.npy" --device cpu --precision int8 --iterations 1 \
  --output-dir "$D/out/cpu" >/dev/null 2>>"$D/acc.err"
GPUOPT_INT8_CONV_AUTOTUNE=1 "$G" run $M/resnet50_full.int8.onnx --input "$in=$M/x224.npy" --device cuda --precision int8 \
  --iterations 1 --output-dir "$D/out/cuda" >/dev/null 2>>"$D/acc.err"
row "resnet50 int8 tuned+residual b2 vs cpu" \
  "$(python3 scripts/gpu/compare_npy.py "$D/out/cpu" "$D/out/cuda" --rel-l2 5e-2 2>&1 | tr '\n' ' ')"

echo
echo "== summary ($((SECONDS - T0)) s) =="
for r in "${rows[@]}"; do printf '%-48s %s\n' "${r%%|*}" "${r#*|}"; done
