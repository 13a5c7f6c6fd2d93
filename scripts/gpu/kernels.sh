#!/usr/bin/env bash
# Where a run's GPU time goes, kernel by kernel (Nsight Compute): each model of MODELS (exported by
# compare.py, legacy exporter) at batch BATCH in fp16, node by node (no CUDA graph, so every
# kernel is its own launch), every kernel's gpu__time_duration over RUNS runs, summed per kernel
# name and divided by RUNS (PRECISION: fp16 by default; int8 and fp8 calibrate on the run's inputs). Clocks are left as they are (--clock-control none), so the figures are
# comparable with the device times of compare.py; their sum is the GPU's busy time per run.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
G=${GPUOPT_BIN:-build-h200/bin/gpuopt}
D=${OUT:-./perf-out}/kernels
M=/tmp/compare-models
mkdir -p "$D" "$M"
B=${BATCH:-32}
RUNS=2
P=${PRECISION:-fp16}
# Export (and time, for the device figure beside the kernel sum) through compare.py; with
# SKIP_COMPARE=1 the models already in $M are profiled as they are (no export, no timing).
if [ "${SKIP_COMPARE:-0}" != 1 ]; then
  MODELS=${MODELS:-bert_base,vit_b_16,gpt2} BATCHES=$B EXPORTERS=legacy RUNNERS=gpuopt OUT="$D" \
    bash scripts/gpu/compare.sh > "$D/compare.log" 2>&1
  grep -E "gpuopt" "$D/compare.log" | tail -n 8
fi
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
for f in "$M"/*_legacy.onnx; do
  m=$(basename "$f" _legacy.onnx)
  case ",${MODELS:-bert_base,vit_b_16,gpt2}," in *",$m,"*) ;; *) continue ;; esac
  # The first run builds plans (and autotunes); RUNS runs after it are counted.
  "$NCU" --metrics gpu__time_duration.sum --csv --print-units base --clock-control none --cache-control none \
    --launch-skip-before-match 0 "$G" run "$f" --device cuda --precision "$P" --batch "$B" --random-inputs \
    --iterations "$RUNS" --warmup 1 --no-cuda-graphs > "$D/ncu_${m}_${P}_b$B.csv" 2> "$D/ncu_${m}_${P}_b$B.err"
  python3 scripts/gpu/ncu_summary.py "$D/ncu_${m}_${P}_b$B.csv" --runs "$RUNS" --title "$m $P b$B"
  "$G" inspect "$f" --optimized --device cuda --precision "$P" > "$D/inspect_${m}_${P}.txt" 2>&1
done
