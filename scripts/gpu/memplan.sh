#!/usr/bin/env bash
# The static memory plan on the H200 (GPUOPT_MEMORY_PLAN=static against the default pool), run
# through scripts/gpu_check.sh memplan over build-h200/bin. Decides whether static can become
# the CUDA default (docs/environment.md):
#  1. test_cuda's MemoryPlan tests (static vs pool vs CPU sessions: equal outputs over eager,
#     capture and replay runs, several batch sizes per context, a CPU node between GPU nodes);
#  2. the models scripts/gpu/compare.py exports (torchvision / transformers, legacy exporter),
#     fp16 at batch 1 and 32 (BATCHES=): outputs of static vs pool (rel L2 1e-3: cuDNN may time
#     different algorithms per run), peak device memory (`run --json` peak_device_bytes), device
#     time (median of 30) and how it ran (graph / eager);
#  3. the generated models (tools/models) at fp32 and fp16 the same way.
# Ends with a table. A few minutes: GPU_CHECK_TIMEOUT=1200. The generated transformers (bert,
# gpt_block) have a symbolic 'sequence' dim besides the batch: every run binds it (SEQ=16;
# `run` ignores a --dim the model does not have).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
G=$B/gpuopt
D=${OUT:-./perf-out}/memplan
M=/tmp/compare-models
GM=/tmp/models
mkdir -p "$D" "$M" "$GM"
declare -a rows
row() { rows+=("$1|$2"); echo "$1: $2"; }

echo "== test_cuda MemoryPlan =="
"$B/test_cuda" --gtest_filter='*MemoryPlan*' >"$D/test_cuda.txt" 2>&1
rc=$?
row "test_cuda MemoryPlan (exit $rc)" "$(grep -E '^\[  (PASSED|FAILED)|skipped' "$D/test_cuda.txt" | head -3 | tr '\n' ' ')"
grep -E "FAILED|Failure" "$D/test_cuda.txt" | head -20

# One run: prints "peak_bytes device_ms execution" and writes outputs to $out.
one() {  # model batch precision mode out
  local model=$1 b=$2 p=$3 mode=$4 out=$5
  GPUOPT_MEMORY_PLAN=$mode "$G" run "$model" --device cuda --precision "$p" --batch "$b" --random-inputs --seed 1 \
    --dim "sequence=${SEQ:-16}" --iterations 30 --warmup 3 --json --output-dir "$out" 2>>"$D/run.err" | python3 -c "
import json, sys
j = json.load(sys.stdin)
print(j.get('peak_device_bytes', 0), '%.3f' % j.get('device_ms', {}).get('median', 0), j.get('execution', '?'))"
}

compare_modes() {  # label model batch precision
  local label=$1 model=$2 b=$3 p=$4
  local base=$D/out/$label
  local pool static
  pool=$(one "$model" "$b" "$p" pool "$base/pool") || pool="FAILED"
  static=$(one "$model" "$b" "$p" static "$base/static") || static="FAILED"
  if [[ $pool == FAILED* || $static == FAILED* || -z $pool || -z $static ]]; then
    row "$label" "RUN FAILED: $(tail -1 "$D/run.err")"
    return
  fi
  read -r pk pms pex <<<"$pool"
  read -r sk sms sex <<<"$static"
  local eq
  eq=$(python3 scripts/gpu/compare_npy.py "$base/pool" "$base/static" --rel-l2 1e-3 2>&1 | tr '\n' ' ')
  row "$label" "peak $((pk / 1048576)) -> $((sk / 1048576)) MiB, device $pms -> $sms ms, $pex/$sex; static vs pool: $eq"
}

echo "== compare.py's models (legacy export), fp16 =="
if [ ! -f "$M/resnet50_legacy.onnx" ]; then
  # Exports the models (torch in the GPU machine's venv); one gpuopt point per model keeps it short.
  PYTHONUNBUFFERED=1 python3 scripts/gpu/compare.py --gpuopt "$G" --out "$D/export.json" --model-dir "$M" \
    --batches 1 --exporters legacy --runners gpuopt --iterations 3 >"$D/export.log" 2>&1 || tail -5 "$D/export.log"
fi
for f in "$M"/*_legacy.onnx; do
  [ -f "$f" ] || continue
  m=$(basename "$f" _legacy.onnx)
  for b in ${BATCHES:-1 32}; do compare_modes "$m b$b fp16" "$f" "$b" fp16; done
done

echo "== generated models (tools/models), fp16 and fp32 =="
python3 tools/models/make_models.py --out "$GM" resnet18 mobilenetv2 vit_tiny bert gpt_block >/dev/null
for m in resnet18 mobilenetv2 vit_tiny bert gpt_block; do
  for p in fp32 fp16; do compare_modes "$m b4 $p" "$GM/$m.onnx" 4 $p; done
done

echo
echo "== summary (pool -> static) =="
for r in "${rows[@]}"; do printf '%-34s %s\n' "${r%%|*}" "${r#*|}"; done
