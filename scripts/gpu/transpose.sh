#!/usr/bin/env bash
# Transpose sinking on the H200 (scripts/gpu_check.sh transpose): ViT-B/16 from both exporters and
# BERT-base / GPT-2 from the dynamo exporter at batch 32, fp16, through scripts/gpu/compare.py
# (device time, rel L2 against PyTorch fp32 in each record, torch eager beside), with the pass
# (default) and without it (GPUOPT_DISABLE_FUSION=transpose), then per model the Transpose,
# Attention and Gemm nodes a run executes and the Transposes' GPU time (run --profile).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
D=${OUT:-./perf-out}/transpose
mkdir -p "$D/on" "$D/off"
compare() {  # compare MODE TAG RUNNERS MODELS EXPORTERS
  local dis; dis=$([ "$1" = off ] && echo transpose || echo 0)
  mkdir -p "$D/$1/$2"
  GPUOPT_DISABLE_FUSION=$dis MODELS=$4 BATCHES=32 EXPORTERS=$5 RUNNERS=$3 OUT="$D/$1/$2" GPUOPT_BIN="$B/gpuopt" \
    bash scripts/gpu/compare.sh > "$D/$1/$2/log.txt" 2>&1
  python3 -c 'import json, sys
for r in json.load(open(sys.argv[1])):
    print(sys.argv[2], r["model"], r["exporter"], r["runner"], r.get("ms"), r.get("rel_l2_vs_fp32"), r.get("error", ""))' \
    "$D/$1/$2/h200.json" "pass $1:" 2>/dev/null || tail -3 "$D/$1/$2/log.txt"
}
for mode in on off; do
  runners=$([ $mode = on ] && echo gpuopt,torch_eager || echo gpuopt)
  compare $mode vit "$runners" vit_b_16 legacy,dynamo
  compare $mode lm "$runners" bert_base,gpt2 dynamo
done
python3 - "$D" <<'PY'
import glob, json, sys
def load(mode):
    recs = []
    for f in glob.glob(f"{sys.argv[1]}/{mode}/*/h200.json"):
        recs += json.load(open(f))
    return recs
off = {(r["model"], r["exporter"], r["runner"]): r for r in load("off")}
print(f"{'model':10} {'exporter':8} {'runner':12} {'ms':>8} {'ms (pass off)':>14} {'rel_l2':>9}")
for r in sorted(load("on"), key=lambda r: (r["model"], r["exporter"], r["runner"])):
    o = off.get((r["model"], r["exporter"], r["runner"]), {})
    print(f"{r['model']:10} {r['exporter']:8} {r['runner']:12} {r.get('ms', 0):8.3f} {o.get('ms', 0):14.3f} "
          f"{r.get('rel_l2_vs_fp32', 0):9.1e}  {r.get('error', '')}")
PY
for f in /tmp/compare-models/vit_b_16_{legacy,dynamo}.onnx /tmp/compare-models/{bert_base,gpt2}_dynamo.onnx; do
  [ -f "$f" ] || { echo "$f: not exported"; continue; }
  "$B/gpuopt" run "$f" --device cuda --precision fp16 --random-inputs --batch 32 --iterations 3 --profile --json \
    > "$D/on/profile_$(basename "$f" .onnx).json" 2>&1
  python3 - "$D/on/profile_$(basename "$f" .onnx).json" <<'PY'
import json, sys
try:
    ops = {o["op"]: o for o in json.load(open(sys.argv[1]))["profile"]["ops"]}
except Exception:
    print(sys.argv[1], "no profile:", open(sys.argv[1]).read()[-300:]); sys.exit(0)
tot = sum(o["gpu_us"] for o in ops.values())
top = sorted(ops.values(), key=lambda o: -o["gpu_us"])[:6]
print(f"{sys.argv[1].split('/')[-1]:30} {tot/1e3:.2f} ms GPU over nodes; Transpose {ops.get('Transpose', {}).get('nodes', 0)} "
      f"({ops.get('Transpose', {}).get('gpu_us', 0)/1e3:.3f} ms), Attention {ops.get('Attention', {}).get('nodes', 0)}, "
      f"Gemm {ops.get('Gemm', {}).get('nodes', 0)}; top: " + ", ".join(f"{o['op']} {o['gpu_us']/1e3:.2f}" for o in top))
PY
done
