#!/usr/bin/env bash
# Transpose sinking on the H200 (scripts/gpu_check.sh transpose): ViT-B/16, BERT-base and GPT-2
# at batch 32 from both exporters, fp16, through scripts/gpu/compare.py (device time and rel L2
# against PyTorch fp32 in each record), with the pass (default) and without it
# (GPUOPT_DISABLE_FUSION=transpose), then per model the Transpose/Attention nodes a run executes
# and the Transposes' GPU time (run --profile).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
D=${OUT:-./perf-out}/transpose
mkdir -p "$D/on" "$D/off"
MODELS=${MODELS:-vit_b_16,bert_base,gpt2}
MODELS=$MODELS BATCHES=32 EXPORTERS=legacy,dynamo RUNNERS=gpuopt,torch_eager OUT="$D/on" GPUOPT_BIN="$B/gpuopt" \
  bash scripts/gpu/compare.sh > "$D/on/log.txt" 2>&1
GPUOPT_DISABLE_FUSION=transpose MODELS=$MODELS BATCHES=32 EXPORTERS=legacy,dynamo RUNNERS=gpuopt OUT="$D/off" \
  GPUOPT_BIN="$B/gpuopt" bash scripts/gpu/compare.sh > "$D/off/log.txt" 2>&1
python3 - "$D/on/h200.json" "$D/off/h200.json" <<'PY'
import json, sys
off = {(r["model"], r["exporter"], r["runner"]): r for r in json.load(open(sys.argv[2]))}
print(f"{'model':10} {'exporter':8} {'runner':12} {'ms':>8} {'ms (pass off)':>14} {'rel_l2':>9}")
for r in json.load(open(sys.argv[1])):
    o = off.get((r["model"], r["exporter"], r["runner"]), {})
    print(f"{r['model']:10} {r['exporter']:8} {r['runner']:12} {r.get('ms', 0):8.3f} {o.get('ms', 0):14.3f} "
          f"{r.get('rel_l2_vs_fp32', 0):9.1e}  {r.get('error', '')}")
PY
for f in /tmp/compare-models/{vit_b_16,bert_base,gpt2}_{legacy,dynamo}.onnx; do
  [ -f "$f" ] || continue
  for mode in on off; do
    dis=$([ $mode = off ] && echo transpose || echo 0)
    GPUOPT_DISABLE_FUSION=$dis "$B/gpuopt" run "$f" --device cuda --precision fp16 --random-inputs --batch 32 \
      --iterations 3 --profile --json > "$D/$mode/profile_$(basename "$f" .onnx).json" 2>&1
    python3 - "$D/$mode/profile_$(basename "$f" .onnx).json" "$mode" <<'PY'
import json, sys
try:
    ops = {o["op"]: o for o in json.load(open(sys.argv[1]))["profile"]["ops"]}
except Exception:
    print(sys.argv[1], "no profile:", open(sys.argv[1]).read()[-300:]); sys.exit(0)
t = ops.get("Transpose", {})
tot = sum(o["gpu_us"] for o in ops.values())
print(f"{sys.argv[1].split('/')[-1]:32} pass {sys.argv[2]:3}: {tot/1e3:.2f} ms GPU over nodes; Transpose {t.get('nodes', 0)} nodes "
      f"{t.get('gpu_us', 0)/1e3:.3f} ms; Attention {ops.get('Attention', {}).get('nodes', 0)}; "
      f"Gather {ops.get('Gather', {}).get('nodes', 0)} {ops.get('Gather', {}).get('gpu_us', 0)/1e3:.3f} ms")
PY
  done
done
