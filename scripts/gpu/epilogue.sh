#!/usr/bin/env bash
# Epilogue fusions on the H200 (scripts/gpu_check.sh epilogue): backend-ops FusedGemm,
# SkipLayerNormalization and Attention (nan_to_zero) against the CPU reference, then BERT-base,
# GPT-2 and ViT-B/16 (legacy export, fp16) through scripts/gpu/compare.py with the fusions off
# (GPUOPT_DISABLE_FUSION=gemm_activation,skip_layernorm) and on: device time and accuracy
# against PyTorch fp32 in each record; and with cuDNN reading the padding mask in place
# (GPUOPT_SDPA_BIAS=broadcast).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
D=${OUT:-./perf-out}/epilogue
mkdir -p "$D"
for op in FusedGemm SkipLayerNormalization Attention; do
  "$B/backend_ops" test --op "$op" > "$D/backend_ops_$op.txt" 2>&1
  echo "backend_ops $op (exit $?): $(tail -1 "$D/backend_ops_$op.txt")"
  grep -E "FAIL" "$D/backend_ops_$op.txt" | head -5
done
GPUOPT_SDPA_BIAS=broadcast "$B/backend_ops" test --op Attention > "$D/backend_ops_Attention_broadcast.txt" 2>&1
echo "backend_ops Attention, GPUOPT_SDPA_BIAS=broadcast (exit $?): $(tail -1 "$D/backend_ops_Attention_broadcast.txt")"
grep -E "FAIL" "$D/backend_ops_Attention_broadcast.txt" | head -5
for mode in off on broadcast; do
  echo "== fusions $mode =="; mkdir -p "$D/$mode"
  dis=$([ $mode = off ] && echo gemm_activation,skip_layernorm || echo 0)
  GPUOPT_SDPA_BIAS=$([ $mode = broadcast ] && echo broadcast || echo expand) GPUOPT_DISABLE_FUSION=$dis MODELS=${MODELS:-bert_base,gpt2,vit_b_16} BATCHES=${BATCHES:-1,32,256} EXPORTERS=legacy \
    RUNNERS=gpuopt OUT="$D/$mode" bash scripts/gpu/compare.sh > "$D/$mode/log.txt" 2>&1
  python3 - "$D/$mode/h200.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    print(f"{r['model']:10} b{r['batch']:<4} {r.get('ms', 0):8.3f} ms  rel_l2 {r.get('rel_l2_vs_fp32', 0):.1e}  {r.get('execution', r.get('error', ''))}")
PY
done
