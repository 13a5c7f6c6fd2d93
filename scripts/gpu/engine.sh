#!/usr/bin/env bash
# The CUDA backend end to end on the H200 (issue 4): backend-ops (and under memcheck), ONNX
# conformance on cuda, the generated architectures on CUDA fp32/fp16/bf16 against the CPU
# reference, and full-size ResNet-50 / BERT-base latency on CPU and CUDA fp16.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=build-h200/bin
G=$B/gpuopt
D=${OUT:-./engine-out}/engine
mkdir -p "$D"
PY=python3

echo "== backend_ops test =="
"$B/backend_ops" test >"$D/backend_ops.txt" 2>&1; echo "exit $?"
grep -E " FAIL " "$D/backend_ops.txt" | head -25; tail -1 "$D/backend_ops.txt"
echo "== compute-sanitizer memcheck over backend_ops =="
compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 "$B/backend_ops" test >"$D/memcheck.txt" 2>&1
echo "exit $?"; grep -E "ERROR SUMMARY|passed," "$D/memcheck.txt" | tail -2

for dev in cpu cuda; do
  echo "== conformance --device $dev =="
  "$B/gpuopt_conformance" --device "$dev" --data-dir "$ONNX_NODE_TESTS" --expectations tools/conformance/expectations \
    -j 12 --quiet >"$D/conformance_$dev.txt" 2>&1
  echo "exit $?"; tail -3 "$D/conformance_$dev.txt"
done

echo "== architectures: CUDA vs CPU reference =="
M=/tmp/models; O=/tmp/outs
$PY tools/models/make_models.py --out $M --inputs 2 resnet18 resnet50 mobilenetv2 vit_tiny bert gpt_block >/dev/null
for m in resnet18 resnet50 mobilenetv2 vit_tiny bert gpt_block; do
  args=()
  for f in $M/${m}_inputs/*.npy; do args+=(--input "$(basename "$f" .npy)=$f"); done
  "$G" run $M/$m.onnx "${args[@]}" --device cpu --iterations 1 --output-dir $O/$m/cpu >/dev/null 2>"$D/$m.err"
  for p in fp32 fp16 bf16; do
    if "$G" run $M/$m.onnx "${args[@]}" --device cuda --precision $p --iterations 1 --output-dir $O/$m/$p >/dev/null 2>>"$D/$m.err"; then
      if [ $p = fp32 ]; then bound="--max-abs 1e-4"; else bound="--rel-l2 1e-2"; fi
      echo "$m $p: $($PY scripts/gpu/compare_npy.py $O/$m/cpu $O/$m/$p $bound | tr '\n' ' ')"
    else
      echo "$m $p: RUN FAILED: $(tail -1 "$D/$m.err")"
    fi
  done
done

echo "== full-size models: latency (ms) =="
$PY tools/models/make_models.py --out $M resnet50_full bert_base >/dev/null
run_json() { "$G" run "$@" --random-inputs --json 2>>"$D/full.err" | $PY -c "import json,sys; j=json.load(sys.stdin); print(j.get('latency_ms'), 'device', j.get('device_ms'), j.get('execution'))" ; }
for m in resnet50_full bert_base; do
  dims=(); [ $m = bert_base ] && dims=(--dim sequence=128)
  echo "$m cpu b1:        $(run_json $M/$m.onnx --device cpu --batch 1 "${dims[@]}" --iterations 2 --warmup 0)"
  for b in 1 32; do
    echo "$m cuda fp16 b$b: $(run_json $M/$m.onnx --device cuda --precision fp16 --batch $b "${dims[@]}" --iterations 50 --warmup 5)"
    echo "$m cuda fp32 b$b: $(run_json $M/$m.onnx --device cuda --batch $b "${dims[@]}" --iterations 20 --warmup 3)"
  done
done
