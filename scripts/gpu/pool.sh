#!/usr/bin/env bash
# issue 12, three memory-bound kernels of the CNNs' channels-last graphs: gpuopt's max pool
# (GPUOPT_POOL_KERNEL: ours, the default, or cudnn, the earlier path), the interleave transpose
# for NCHW -> NHWC of 2-8 channels (GPUOPT_SMALL_C_TRANSPOSE: 1, the default, or 0, the earlier
# strided copy) and the [outer, mid, inner] reduction over 16-byte vectors (the NHWC global
# average pool's ReduceMean: 32 vectors x 8 slices of mid per block; no switch). On the H200
# through `scripts/gpu_check.sh pool`, over build-h200/bin; about 3 minutes:
#  1. backend_ops NhwcMaxPool under both kernels, Transpose and the Reduce ops, against the
#     CPU reference;
#  2. kernel times: ResNet-50's stem pool (b64, 103 MB in) and its input transpose (b256, 77 MB
#     each way), old and new, and its 7x7 mean at b256 (backend_ops perf, 50 runs as one CUDA
#     graph);
#  3. compute-sanitizer memcheck on the new kernels' cases, racecheck on the mean's shared memory;
#  4. full-size ResNet-50 (tools/models, random weights) fp16: device ms (median of 20, CUDA
#     graph) at b256 with the old kernels, the new pool alone and both new, at b32 old and new
#     (the new mean in every run), and the b2 outputs of old and new (exact rewrites: expect
#     rel-L2 ~0, conv algorithm choices aside).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
G=$B/gpuopt
D=${OUT:-./perf-out}/pool
M=/tmp/models-int8
mkdir -p "$D" "$M"
declare -a rows
row() { rows+=("$1|$2"); echo "$1: $2"; }
T0=$SECONDS

echo "== 1. backend_ops test =="
for k in ours cudnn; do
  GPUOPT_POOL_KERNEL=$k "$B/backend_ops" test --op NhwcMaxPool --case '!perf' >"$D/bo_pool_$k.txt" 2>&1
  row "backend_ops NhwcMaxPool $k (exit $?)" "$(tail -1 "$D/bo_pool_$k.txt")"
  grep -E "FAIL" "$D/bo_pool_$k.txt" | head -5
done
"$B/backend_ops" test --op MaxPool >"$D/bo_maxpool.txt" 2>&1
row "backend_ops MaxPool (exit $?)" "$(tail -1 "$D/bo_maxpool.txt")"
"$B/backend_ops" test --op Transpose --case '!perf' >"$D/bo_transpose.txt" 2>&1
row "backend_ops Transpose (exit $?)" "$(tail -1 "$D/bo_transpose.txt")"
grep -E "FAIL" "$D/bo_transpose.txt" | head -5
for op in ReduceMean ReduceMax ReduceMin ReduceSum ReduceL2 ReduceSumSquare; do
  "$B/backend_ops" test --op $op --case '!perf' >"$D/bo_$op.txt" 2>&1
  row "backend_ops $op (exit $?)" "$(tail -1 "$D/bo_$op.txt")"
  grep -E "FAIL" "$D/bo_$op.txt" | head -5
done
echo "[$((SECONDS - T0)) s]"

echo "== 2. kernel times =="
for k in cudnn ours; do
  GPUOPT_POOL_KERNEL=$k "$B/backend_ops" perf --op NhwcMaxPool --case perf >"$D/perf_pool_$k.txt" 2>&1
  row "stem pool b64 $k" "$(grep -E 'ResNet stem' "$D/perf_pool_$k.txt" | tail -1 | tr -s ' |' ' ')"
done
for v in 0 1; do
  GPUOPT_SMALL_C_TRANSPOSE=$v "$B/backend_ops" perf --op Transpose --case 'ResNet input' >"$D/perf_tr_$v.txt" 2>&1
  row "input transpose b256 SMALL_C=$v" "$(grep -E 'ResNet input' "$D/perf_tr_$v.txt" | tail -1 | tr -s ' |' ' ')"
done
"$B/backend_ops" perf --op ReduceMean --case 'ResNet head' >"$D/perf_mean.txt" 2>&1
row "7x7 mean b256 (reduce_mid_vec; kernel sums at f65647f: reduce_mid 126 us)" \
  "$(grep -E 'ResNet head' "$D/perf_mean.txt" | tail -1 | tr -s ' |' ' ')"
echo "[$((SECONDS - T0)) s]"

echo "== 3. compute-sanitizer =="
if command -v compute-sanitizer >/dev/null 2>&1; then
  for spec in "memcheck NhwcMaxPool !perf" "memcheck Transpose interleave" "memcheck ReduceMean 32,5,3,4096" \
    "racecheck ReduceMean 3,7,7,96"; do
    read -r tool op case <<<"$spec"
    timeout 60 compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 3 "$B/backend_ops" test \
      --op "$op" --case "$case" >"$D/${tool}_$op.txt" 2>&1
    row "$tool $op --case '$case' (exit $?)" "$(tail -1 "$D/${tool}_$op.txt")"
  done
else
  row "memcheck" "compute-sanitizer not found"
fi
echo "[$((SECONDS - T0)) s]"

echo "== 4. ResNet-50 fp16 =="
python3 tools/models/make_models.py --out $M resnet50_full >/dev/null
python3 -c "import numpy as np; np.save('$M/x224.npy', np.random.default_rng(5).standard_normal((2, 3, 224, 224)).astype(np.float32))"
# One plan cache for every run: the conv algorithms are timed once, and every run uses the same.
C=$D/cache
t() {  # batch pool-kernel small-c
  GPUOPT_POOL_KERNEL=$2 GPUOPT_SMALL_C_TRANSPOSE=$3 "$G" run $M/resnet50_full.onnx --device cuda --precision fp16 \
    --batch "$1" --iterations 20 --warmup 3 --random-inputs --cache-dir "$C" --json 2>>"$D/run.err" |
    python3 -c "import json,sys; j=json.load(sys.stdin); d=j.get('device_ms',{}).get('median',0); print('%.3f ms device, %.0f img/s (%s)' % (d, $1*1000/d if d else 0, j.get('execution','?')))"
}
for cfg in "256 cudnn 0" "256 ours 0" "256 ours 1" "32 cudnn 0" "32 ours 1"; do
  s0=$SECONDS
  set -- $cfg
  row "resnet50 fp16 b$1 pool=$2 small_c=$3" "$(t $1 $2 $3) [$((SECONDS - s0)) s]"
done
in=$(python3 -c "import onnx; print(onnx.load('$M/resnet50_full.onnx', load_external_data=False).graph.input[0].name)")
for cfg in "cudnn 0 old" "ours 1 new"; do
  set -- $cfg
  GPUOPT_POOL_KERNEL=$1 GPUOPT_SMALL_C_TRANSPOSE=$2 "$G" run $M/resnet50_full.onnx --input "$in=$M/x224.npy" \
    --device cuda --precision fp16 --cache-dir "$C" --iterations 1 --output-dir "$D/out/$3" >/dev/null 2>>"$D/acc.err"
done
row "resnet50 fp16 b2 new vs old" \
  "$(python3 scripts/gpu/compare_npy.py "$D/out/old" "$D/out/new" --rel-l2 1e-3 2>&1 | tr '\n' ' ')"

echo
echo "== summary ($((SECONDS - T0)) s) =="
for r in "${rows[@]}"; do printf '%-46s %s\n' "${r%%|*}" "${r#*|}"; done
