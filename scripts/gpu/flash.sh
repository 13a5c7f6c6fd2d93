#!/usr/bin/env bash
# gpuopt's flash attention kernel (src/ops/transformer/cuda/attention_fa.cu; the default for head
# size 64 and at most 128 keys) on the H200, about 4 minutes, from the repository root with the
# binaries in build-h200/bin:
#  1. backend_ops Attention with GPUOPT_ATTENTION_KERNEL auto, fa (the kernel wherever it applies)
#     and cudnn (the choice before it): pass counts and failures;
#  2. compute-sanitizer memcheck (packed cases) and racecheck (129-key cases) with fa;
#  3. per launch (backend_ops perf --case perf: BERT-base b1/b32 with a [B,1,1,S] mask and with
#     the model's [B,1,S,S] one, GPT-2 causal, ViT-B/16), auto against cudnn;
#  4. BERT-base b1/b32/b256 and GPT-2 b32/b64 (compare.py's legacy exports, fp16, device ms,
#     median of 30, CUDA graph), one binary: auto, cudnn, and auto without the attention_mask pass
#     (GPUOPT_DISABLE_FUSION=attention_mask: the flash kernel then reads BERT's [B,1,1,S] mask,
#     one row per tile, instead of the [B,1,S,S] copy the pass makes for cuDNN), two runs each.
set -uo pipefail
source "$(dirname "$0")/preamble.inc" flash

echo "== 1. backend_ops Attention =="
for k in auto fa cudnn; do
  GPUOPT_ATTENTION_KERNEL=$k timeout 120 "$B/backend_ops" test --op Attention >"$D/bo_$k.txt" 2>&1
  echo "backend_ops Attention (GPUOPT_ATTENTION_KERNEL=$k): exit $? $(tail -1 "$D/bo_$k.txt")"
  grep -E " FAIL " "$D/bo_$k.txt" | head -8
done

lap
echo "== 2. compute-sanitizer =="
if command -v compute-sanitizer >/dev/null 2>&1; then
  GPUOPT_ATTENTION_KERNEL=fa timeout 90 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
    "$B/backend_ops" test --op Attention --case qkv_packed >"$D/memcheck.txt" 2>&1
  echo "memcheck --case qkv_packed (fa): exit $? $(tail -1 "$D/memcheck.txt")"
  GPUOPT_ATTENTION_KERNEL=fa timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 \
    "$B/backend_ops" test --op Attention --case "kv 129" >"$D/racecheck.txt" 2>&1
  echo "racecheck --case 'kv 129' (fa): exit $? $(grep -E 'RACECHECK SUMMARY' "$D/racecheck.txt" | head -1)"
else
  echo "compute-sanitizer not found"
fi

lap
echo "== 3. per launch (us), auto against cudnn =="
for k in auto cudnn; do
  GPUOPT_ATTENTION_KERNEL=$k timeout 60 "$B/backend_ops" perf --op Attention --case perf >"$D/perf_$k.txt" 2>&1
done
python3 scripts/gpu/perf_us.py Attention auto "$D/perf_auto.txt" cudnn "$D/perf_cudnn.txt"

# compare.py exports the models (transformers, random weights) on first use.
[ -f "$M/bert_base_legacy.onnx" ] && [ -f "$M/gpt2_legacy.onnx" ] || {
  echo "== exporting the models (compare.sh) =="
  mkdir -p "$D/export"
  MODELS=bert_base,gpt2 BATCHES=1 EXPORTERS=legacy RUNNERS=gpuopt OUT="$D/export" bash scripts/gpu/compare.sh 2>&1 | tail -3
}

lap
echo "== 4. device ms: auto / cudnn / auto without the attention_mask pass, two runs each =="
ms() {  # model batch [env...]
  env "${@:3}" "$G" run "$M/$1_legacy.onnx" --device cuda --precision fp16 --batch "$2" --random-inputs \
    --iterations 30 --json 2>/dev/null |
    python3 -c "import json, sys; print(round(json.load(sys.stdin)['device_ms']['median'], 3))" 2>/dev/null || echo "-"
}
for mb in "bert_base 1" "bert_base 32" "bert_base 256" "gpt2 32" "gpt2 64"; do
  set -- $mb
  row="$1 b$2:"
  for e in "GPUOPT_ATTENTION_KERNEL=auto" "GPUOPT_ATTENTION_KERNEL=cudnn" "GPUOPT_DISABLE_FUSION=attention_mask"; do
    row="$row  ${e#GPUOPT_} $(ms "$1" "$2" "$e") $(ms "$1" "$2" "$e")"
  done
  echo "$row"
done
lap
