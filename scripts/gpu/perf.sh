#!/usr/bin/env bash
# The CUDA backend's speed on the H200: test_cuda (CUDA graph tests included), full-size
# ResNet-50 and BERT-base latency in fp16 with and without CUDA graphs, where a run's time goes
# (`gpuopt run --profile`, node by node), and PyTorch's own reduced-precision error on the
# generated models (scripts/gpu/torch_precision.py) next to gpuopt's. Ends with a table.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=build-h200/bin
G=$B/gpuopt
D=${OUT:-./perf-out}/perf
mkdir -p "$D"
PY=python3
TPY=""  # a Python with torch, onnx and onnxruntime, for the PyTorch figures
for p in /opt/torch/.venv/bin/python python3; do
  if $p -c "import torch, onnx, onnxruntime" 2>/dev/null; then TPY=$p; break; fi
done

echo "== test_cuda =="
"$B/test_cuda" >"$D/test_cuda.txt" 2>&1; echo "exit $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$D/test_cuda.txt" | head -20

M=/tmp/models
$PY tools/models/make_models.py --out $M resnet50_full bert_base vit_tiny >/dev/null
lat() { "$G" run "$@" --random-inputs --json 2>>"$D/run.err" | $PY -c "import json,sys; j=json.load(sys.stdin); print('%.3f ms host-to-host, %.3f ms device (%s)' % (j['latency_ms']['median'], j.get('device_ms',{}).get('median',0), j.get('execution','?')))"; }
echo "== full-size models, fp16, median of 50 =="
for m in resnet50_full bert_base; do
  dims=(); [ $m = bert_base ] && dims=(--dim sequence=128)
  for b in 1 8 32; do
    echo "$m b$b graphs: $(lat $M/$m.onnx --device cuda --precision fp16 --batch $b "${dims[@]}" --iterations 50 --warmup 3)"
    echo "$m b$b eager:  $(lat $M/$m.onnx --device cuda --precision fp16 --batch $b "${dims[@]}" --iterations 50 --warmup 3 --no-cuda-graphs)"
  done
done
echo "== where the time goes (node by node, fp16) =="
for spec in "resnet50_full 1" "resnet50_full 32" "bert_base 32"; do
  set -- $spec
  dims=(); [ $1 = bert_base ] && dims=(--dim sequence=128)
  "$G" run $M/$1.onnx --device cuda --precision fp16 --batch $2 "${dims[@]}" --random-inputs --iterations 3 --profile \
    >"$D/profile_$1_b$2.txt" 2>&1
  echo "-- $1 b$2"; sed -n '/^profile:/,/^slowest/p' "$D/profile_$1_b$2.txt" | head -16
done
echo "== PyTorch's reduced-precision error on the generated models (vs ONNX Runtime f32) =="
[ -n "$TPY" ] || echo "no Python with torch+onnx+onnxruntime: $(/opt/torch/.venv/bin/python -c 'import torch, onnx, onnxruntime' 2>&1 | tail -1)"
[ -n "$TPY" ] && $TPY scripts/gpu/torch_precision.py vit_tiny bert gpt_block resnet18 --json "$D/torch_precision.json" 2>&1 | tail -20
