#!/usr/bin/env bash
# cuDNN algorithm choice on the H200 (scripts/gpu_check.sh convalgo): ResNet-50 and ConvNeXt-T
# (torchvision, legacy export) through scripts/gpu/compare.py at batch 32 and 256, fp16, with
# GPUOPT_CONV_ALGO=heuristic (cuDNN's ranking untimed) and timed (the default); the records
# give device time and the first result's wall time (load + first run, where the timing happens).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
D=${OUT:-./perf-out}/convalgo
for mode in heuristic timed; do
  echo "== GPUOPT_CONV_ALGO=$mode =="; mkdir -p "$D/$mode"
  GPUOPT_CONV_ALGO=$mode MODELS=${MODELS:-resnet50,convnext_tiny} BATCHES=${BATCHES:-32,256} EXPORTERS=legacy \
    RUNNERS=gpuopt OUT="$D/$mode" bash scripts/gpu/compare.sh 2>&1 | grep '^{' | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    print(f"{r[\"model\"]:14} b{r[\"batch\"]:<4} {r.get(\"ms\", 0):8.3f} ms  first {r.get(\"first_result_s\")} s  rel_l2 {r.get(\"rel_l2_vs_fp32\", 0):.2e}  {r.get(\"execution\", r.get(\"error\", \"\"))}")'
done
