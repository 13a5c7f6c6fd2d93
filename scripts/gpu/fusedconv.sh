#!/usr/bin/env bash
# FusedConv on the H200 (run through scripts/gpu_check.sh fusedconv, over build-h200/bin):
#  1. backend_ops: every FusedConv case (bias/zero bias, Z/no Z, Relu/identity, stride 2, groups,
#     1x1, odd channels; f32/f16/bf16) against the CPU reference, and Conv's cases for company;
#  2. the fused graphs against the CPU reference: ResNet-18/50 and MobileNetV2 (generated), fp32
#     (max abs 1e-4) and fp16/bf16 (relative L2 1e-2), with fusion on and off;
#  3. whether cuDNN took the fused call or the plan fell back to separate calls (log lines);
#  4. ResNet-50 (full size) latency, fp16 b1/b32 and fp32 b32, GPUOPT_DISABLE_FUSION=0 vs 1, and
#     the b32 per-op profile with fusion on. Ends with a table.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${BIN:-build-h200/bin}
G=$B/gpuopt
D=${OUT:-./perf-out}/fusedconv
mkdir -p "$D"
PY=python3
declare -a rows

echo "== backend_ops FusedConv / Conv =="
for op in FusedConv Conv; do
  "$B/backend_ops" test --op $op >"$D/backend_ops_$op.txt" 2>&1
  echo "$op exit $?: $(tail -1 "$D/backend_ops_$op.txt")"
  grep -E "FAIL" "$D/backend_ops_$op.txt" | head -10
  rows+=("backend_ops $op|$(tail -1 "$D/backend_ops_$op.txt")")
done

echo "== generated CNNs: CUDA vs CPU reference, fusion on (0) and off (1) =="
M=/tmp/models; O=/tmp/outs_fc
$PY tools/models/make_models.py --out $M --inputs 2 resnet18 resnet50 mobilenetv2 >/dev/null
for m in resnet18 resnet50 mobilenetv2; do
  args=()
  for f in $M/${m}_inputs/*.npy; do args+=(--input "$(basename "$f" .npy)=$f"); done
  GPUOPT_DISABLE_FUSION=1 "$G" run $M/$m.onnx "${args[@]}" --device cpu --iterations 1 --output-dir $O/$m/cpu \
    >/dev/null 2>"$D/$m.err"
  for p in fp32 fp16 bf16; do
    for off in 0 1; do
      out=$O/$m/${p}_$off
      if GPUOPT_DISABLE_FUSION=$off GPUOPT_LOG_LEVEL=info "$G" run $M/$m.onnx "${args[@]}" --device cuda --precision $p \
        --iterations 2 --output-dir $out >/dev/null 2>>"$D/$m.err"; then
        if [ $p = fp32 ]; then bound="--max-abs 1e-4"; else bound="--rel-l2 1e-2"; fi
        res=$($PY scripts/gpu/compare_npy.py $O/$m/cpu $out $bound 2>&1)
        rc=$?
        res="$(echo "$res" | tr '\n' ' ')$([ $rc -ne 0 ] && echo ' OVER BOUND')"
        echo "$m $p fusion_off=$off: $res"
        rows+=("$m $p fusion_off=$off|$res")
      else
        echo "$m $p fusion_off=$off: RUN FAILED: $(tail -1 "$D/$m.err")"
        rows+=("$m $p fusion_off=$off|RUN FAILED")
      fi
    done
  done
done
echo "-- cuDNN fallbacks (separate calls instead of the fused one):"
grep -h "declined the fused" "$D"/*.err | sed 's/.*\] //' | sort | uniq -c | head -20 || true
rows+=("fused-call fallbacks|$(grep -h "declined the fused" "$D"/*.err | wc -l) log lines")

echo "== ResNet-50 (full size) latency, median of 50 =="
$PY tools/models/make_models.py --out $M resnet50_full >/dev/null
lat() {
  "$G" run "$@" --random-inputs --json 2>>"$D/run.err" | $PY -c "import json,sys; j=json.load(sys.stdin); print('%.3f ms host, %.3f ms device (%s)' % (j['latency_ms']['median'], j.get('device_ms',{}).get('median',0), j.get('execution','?')))"
}
for spec in "fp16 1" "fp16 32" "fp32 32"; do
  set -- $spec
  for off in 1 0; do
    r=$(GPUOPT_DISABLE_FUSION=$off lat $M/resnet50_full.onnx --device cuda --precision $1 --batch $2 --iterations 50 --warmup 5)
    echo "resnet50_full $1 b$2 fusion_off=$off: $r"
    rows+=("resnet50_full $1 b$2 fusion_off=$off|$r")
  done
done
for off in 1 0; do
  GPUOPT_DISABLE_FUSION=$off "$G" run $M/resnet50_full.onnx --device cuda --precision fp16 --batch 32 --random-inputs \
    --iterations 3 --profile >"$D/profile_b32_fusion_off_$off.txt" 2>&1
  echo "-- profile fp16 b32 fusion_off=$off"; sed -n '/^profile:/,/^slowest/p' "$D/profile_b32_fusion_off_$off.txt" | head -14
done

echo
echo "== summary =="
printf '%-40s %s\n' "check" "result"
for r in "${rows[@]}"; do printf '%-40s %s\n' "${r%%|*}" "${r#*|}"; done
