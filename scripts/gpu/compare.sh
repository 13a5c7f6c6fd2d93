#!/usr/bin/env bash
# gpuopt beside PyTorch on the H200 (issue 12's benchmark): scripts/gpu/compare.py over the built
# binary, records to $OUT/h200.json (copy to docs/perf/h200.json, then python3 tools/perf_table.py),
# then a per-node profile of each model at its largest batch ($OUT/profile_*.json).
#   MODELS=resnet50,bert_base BATCHES=1,32,256 RUNNERS=gpuopt,torch_eager EXPORTERS=legacy \
#   STORED=shared/bench/x.json scripts/gpu_check.sh compare
set -uo pipefail
cd "$(dirname "$0")/../.."
G=${GPUOPT_BIN:-build-h200/bin/gpuopt}
M=/tmp/compare-models; mkdir -p "$M"
args=(--gpuopt "$G" --out "${OUT:-.}/h200.json" --model-dir "$M" --precision "${PRECISION:-fp16}"
      --models "${MODELS:-resnet50,mobilenet_v3_large,efficientnet_b0,convnext_tiny,vit_b_16,bert_base,gpt2}"
      --batches "${BATCHES:-1,8,32,256}" --exporters "${EXPORTERS:-legacy,dynamo}"
      --runners "${RUNNERS:-gpuopt,torch_eager,torch_eager_channels_last}" --time-budget "${BUDGET_S:-1e9}"
      --commit "${GPUOPT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}")
[ -n "${STORED:-}" ] && args+=(--stored "$STORED")
PYTHONUNBUFFERED=1 python3 scripts/gpu/compare.py "${args[@]}" 2>&1 | grep -v Warning
for f in "$M"/*_legacy.onnx; do
  [ -n "${PROFILE_BATCH:-}" ] || break
  m=$(basename "$f" _legacy.onnx)
  "$G" run "$f" --device cuda --precision "${PRECISION:-fp16}" --random-inputs --batch "$PROFILE_BATCH" \
    --iterations 3 --profile --json > "${OUT:-.}/profile_${m}_b$PROFILE_BATCH.json" 2>&1
  python3 - "${OUT:-.}/profile_${m}_b$PROFILE_BATCH.json" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[1], "no profile:", open(sys.argv[1]).read()[-300:]); sys.exit(0)
ops = sorted(j["profile"]["ops"], key=lambda o: -o["gpu_us"])[:8]
tot = sum(o["gpu_us"] for o in j["profile"]["ops"])
print(f"{sys.argv[1].split('/')[-1]}: {tot/1e3:.2f} ms GPU over nodes; " +
      ", ".join(f"{o['op']} {o['gpu_us']/1e3:.2f} ({o['nodes']})" for o in ops))
PY
done
