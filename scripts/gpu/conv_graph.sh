#!/usr/bin/env bash
# GPUOPT_CONV_ENGINE=graph (issue 12, an A/B off by default): channels-last fp16 convolutions
# through cuDNN's graph API with the engine chosen by timing (TunedGraph) against the legacy
# cudnnConvolutionBiasActivationForward path. On the H200 through `scripts/gpu_check.sh
# conv_graph`, over build-h200/bin; about 2 minutes:
#  1. backend_ops NhwcFusedConv with GPUOPT_CONV_ENGINE=graph against the CPU reference (which
#     path each shape took and the tuning lines counted);
#  2. full-size ResNet-50 (tools/models, random weights) at fp16: device ms (median of 20) at b32
#     and b256 with the legacy engine and the graph engine, and the graph engine's output at b2
#     against the legacy one's (rel-L2).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
G=$B/gpuopt
D=${OUT:-./perf-out}/conv_graph
M=/tmp/models-int8
mkdir -p "$D" "$M"
declare -a rows
row() { rows+=("$1|$2"); echo "$1: $2"; }
T0=$SECONDS

GPUOPT_CONV_ENGINE=graph GPUOPT_LOG_LEVEL=info "$B/backend_ops" test --op NhwcFusedConv >"$D/backend_ops.txt" 2>&1
row "backend_ops NhwcFusedConv graph (exit $?)" "$(tail -1 "$D/backend_ops.txt")"
grep -E "FAIL" "$D/backend_ops.txt" | head -10
grep -oE "GPUOPT_CONV_ENGINE=graph\): (cuDNN graph|legacy path)" "$D/backend_ops.txt" | sort | uniq -c
echo "[$((SECONDS - T0)) s]"

python3 tools/models/make_models.py --out $M resnet50_full >/dev/null
python3 -c "import numpy as np; np.save('$M/x224.npy', np.random.default_rng(5).standard_normal((2, 3, 224, 224)).astype(np.float32))"
t() {  # batch engine log
  GPUOPT_CONV_ENGINE=$2 GPUOPT_LOG_LEVEL=info "$G" run $M/resnet50_full.onnx --device cuda --precision fp16 \
    --batch "$1" --iterations 20 --warmup 3 --random-inputs --json 2>"$3" |
    python3 -c "import json,sys; j=json.load(sys.stdin); d=j.get('device_ms',{}).get('median',0); print('%.3f ms device, %.0f img/s (%s)' % (d, $1*1000/d if d else 0, j.get('execution','?')))"
}
for b in 256 32; do
  for e in legacy graph; do
    s0=$SECONDS
    log=$D/run_b${b}_$e.err
    r=$(t $b $e "$log")
    row "resnet50 fp16 b$b engine=$e" "$r [$((SECONDS - s0)) s, $(grep -c ': cuDNN graph' "$log") graph shapes]"
  done
done
python3 - "$D/run_b256_graph.err" <<'PY' || true
import re, sys
best = first = n = 0
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"plan (\d+) of (\d+) \((.*?)\) ([\d.]+) us; the first plan ([\d.]+) us", line)
    if m:
        n += 1; best += float(m.group(4)); first += float(m.group(5))
print(f"b256 tuning: {n} graphs timed; sum of chosen plans {best:.0f} us vs first plans {first:.0f} us")
PY
in=$(python3 -c "import onnx; print(onnx.load('$M/resnet50_full.onnx', load_external_data=False).graph.input[0].name)")
for e in legacy graph; do
  GPUOPT_CONV_ENGINE=$e "$G" run $M/resnet50_full.onnx --input "$in=$M/x224.npy" --device cuda --precision fp16 \
    --iterations 1 --output-dir "$D/out/$e" >/dev/null 2>>"$D/acc.err"
done
row "resnet50 fp16 b2 graph vs legacy" \
  "$(python3 scripts/gpu/compare_npy.py "$D/out/legacy" "$D/out/graph" --rel-l2 1e-2 2>&1 | tr '\n' ' ')"

echo
echo "== summary ($((SECONDS - T0)) s) =="
for r in "${rows[@]}"; do printf '%-44s %s\n' "${r%%|*}" "${r#*|}"; done
