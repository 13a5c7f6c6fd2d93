#!/usr/bin/env bash
# Attention on the H200 (scripts/gpu_check.sh attention): backend-ops Attention against the CPU
# reference (the f16/bf16 cases run cuDNN's flash attention now), then BERT-base, ViT-B/16 and
# GPT-2 (legacy export, fp16) through scripts/gpu/compare.py with GPUOPT_ATTENTION_KERNEL=wmma
# (gpuopt's tensor-core kernel) and auto (cuDNN SDPA where it applies), device time and accuracy
# against PyTorch fp32 in each record, and the per-op profile at batch 32 with auto.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
D=${OUT:-./perf-out}/attention
mkdir -p "$D"
"$B/backend_ops" test --op Attention > "$D/backend_ops.txt" 2>&1
echo "backend_ops Attention (exit $?): $(tail -1 "$D/backend_ops.txt")"
grep -E "FAIL" "$D/backend_ops.txt" | head -10
for mode in wmma auto; do
  echo "== GPUOPT_ATTENTION_KERNEL=$mode =="; mkdir -p "$D/$mode"
  GPUOPT_ATTENTION_KERNEL=$mode MODELS=${MODELS:-bert_base,vit_b_16,gpt2} BATCHES=${BATCHES:-32,256} EXPORTERS=legacy \
    RUNNERS=gpuopt OUT="$D/$mode" PROFILE_BATCH=$([ $mode = auto ] && echo 32) GPUOPT_LOG_LEVEL=info \
    bash scripts/gpu/compare.sh > "$D/$mode/log.txt" 2>&1
  grep -E "attention: cuDNN|SDPA" "$D/$mode/log.txt" | sort | uniq -c | head -5
  python3 - "$D/$mode/h200.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    print(f"{r['model']:10} b{r['batch']:<4} {r.get('ms', 0):8.3f} ms  rel_l2 {r.get('rel_l2_vs_fp32', 0):.1e}  {r.get('execution', r.get('error', ''))}")
PY
  grep -E "^profile_" "$D/$mode/log.txt"
done
