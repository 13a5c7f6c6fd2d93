#!/usr/bin/env bash
# The main job's loop on the GPU machine (issue 20): what ./scripts/run.sh runs after deps and
# build (tools/mainjob.py), over the prebuilt build-h200 binary: hardware and a few seconds of
# measured ceilings, resnet_small compiled for cuda fp16 beside the CPU, `gpuopt serve` on GPU
# instances with a short `gpuopt perf` run and the batch-size histogram from /metrics, SIGTERM,
# summary table. Builds nothing. Output in $OUT/mainjob (default ./mainjob-out/mainjob).
#   scripts/gpu_check.sh mainjob       (or: bash scripts/gpu/mainjob.sh)
set -uo pipefail
cd "$(dirname "$0")/../.."
G=build-h200/bin/gpuopt
[ -x "$G" ] || G=build-h200/gpuopt
[ -x "$G" ] || { echo "mainjob.sh: build-h200/bin/gpuopt not found (scripts/build_h200.sh, carry build-h200/bin)"; exit 1; }
D=${OUT:-./mainjob-out}/mainjob
mkdir -p "$D"
# cuDNN: the library matching the headers we build against is in PyTorch's venv (as gpu_check.sh).
CUDNN_DIR=$(ls -d /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib 2>/dev/null | head -1)
[ -n "$CUDNN_DIR" ] && export LD_LIBRARY_PATH="$CUDNN_DIR:${LD_LIBRARY_PATH:-}"
PY=${PY:-python3}
$PY -c "import onnx" 2>/dev/null || PY=/opt/torch/.venv/bin/python3
start=$(date +%s)
$PY tools/mainjob.py --gpuopt "$G" --out "$D" --models "$D/models" --json "$D/summary.json" 2>&1 | tee "$D/mainjob.log"
rc=${PIPESTATUS[0]}
echo "mainjob.sh: exit $rc in $(( $(date +%s) - start )) s; log $D/mainjob.log, JSON $D/summary.json"
exit "$rc"
