#!/usr/bin/env bash
# merge_qkv (one GEMM for an attention's Q, K and V, read in place by the Attention node's
# qkv_packed form), the attention mask expanded once (attention_mask) and the NaN guard left to
# cuDNN (opt-in), on the H200 (scripts/gpu_check.sh qkv),
# about 3 minutes with the exports cached in /tmp/compare-models (GPU_CHECK_TIMEOUT=300):
#  1. backend_ops Attention: every case (cuDNN's SDPA where it applies, the scalar kernel for f32),
#     the qkv_packed cases through gpuopt's tensor-core kernel, and the fully masked cases with
#     GPUOPT_SDPA_NAN_GUARD=cudnn (does cuDNN itself write 0 for a row whose every key is
#     masked? if these pass, the NaN pass after cuDNN can go; if they fail, it must stay);
#  2. compute-sanitizer memcheck on the 2-head qkv_packed cases (cuDNN, then gpuopt's kernels);
#  3. how many attentions merge_qkv packed (inspect --optimized --json);
#  4. BERT-base, GPT-2 and ViT-B/16 (compare.py's legacy exports, fp16) at batch 1, 32 and 256:
#     device ms (gpuopt run --json, median of 20, CUDA graph), the same binary: before (merge_qkv
#     and attention_mask off, masks copied before cuDNN as before: GPUOPT_SDPA_BIAS=copy),
#     merge_qkv alone (BERT, GPT-2), the defaults, and (BERT) the defaults with the NaN guard
#     left to cuDNN (GPUOPT_SDPA_NAN_GUARD=cudnn: only meaningful if step 1's fully masked cases
#     passed with it);
#  5. the output against ONNX Runtime fp32 (rel L2, batch 2, a padding mask) before and after.
set -uo pipefail
source "$(dirname "$0")/preamble.inc" qkv
MODELS=(bert_base gpt2 vit_b_16)

echo "== 1. backend_ops Attention =="
for spec in "auto - auto" "wmma qkv_packed auto" "auto nan_to_zero cudnn"; do
  set -- $spec
  filter=(); [ "$2" != - ] && filter=(--case "$2")
  GPUOPT_ATTENTION_KERNEL=$1 GPUOPT_SDPA_NAN_GUARD=${3/auto/pass} timeout 50 "$B/backend_ops" test --op Attention \
    "${filter[@]}" >"$D/bo_$1_$3.txt" 2>&1
  echo "backend_ops Attention (kernel $1, case $2, nan guard $3): exit $? $(tail -1 "$D/bo_$1_$3.txt")"
  grep -E " FAIL " "$D/bo_$1_$3.txt" | head -6
done
timeout 30 "$B/backend_ops" perf --op Attention --case perf >"$D/perf.txt" 2>&1
echo "-- backend_ops perf --op Attention --case perf (exit $?):"; grep -E "perf BERT" "$D/perf.txt" | cut -c1-150

lap
echo "== 2. compute-sanitizer memcheck (qkv_packed) =="
if command -v compute-sanitizer >/dev/null 2>&1; then
  for spec in "auto qkv_packed 2 heads" "wmma qkv_packed 2 heads causal"; do  # seq 1, 7, 129; heads 64, 128
    k=${spec%% *} case=${spec#* }
    GPUOPT_ATTENTION_KERNEL=$k timeout 45 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
      "$B/backend_ops" test --op Attention --case "$case" >"$D/memcheck_$k.txt" 2>&1
    echo "memcheck (kernel $k, case '$case'): exit $? $(tail -1 "$D/memcheck_$k.txt")"
  done
else
  echo "compute-sanitizer not found"
fi

# compare.py exports the models (random weights) on first use.
for m in "${MODELS[@]}"; do [ -f "$M/${m}_legacy.onnx" ] || need=1; done
if [ -n "${need:-}" ]; then
  echo "== exporting the models (compare.sh, batch 1) =="
  MODELS=bert_base,gpt2,vit_b_16 BATCHES=1 EXPORTERS=legacy RUNNERS=gpuopt OUT="$D/export" \
    bash -c 'mkdir -p $OUT; scripts/gpu/compare.sh' 2>&1 | tail -3
fi

lap
echo "== 3. attentions packed =="
for m in "${MODELS[@]}"; do
  for off in "" merge_qkv; do
    GPUOPT_DISABLE_FUSION=$off "$G" inspect "$M/${m}_legacy.onnx" --optimized --device cuda --precision fp16 --json \
      2>/dev/null | python3 -c 'import json,sys
j = json.load(sys.stdin)
f = j["compile"]["fusions"]
att = sum(1 for x in f if x.get("fusion") == "attention")
packed = sum(1 for x in f if "merge_qkv" in x.get("pattern", ""))
gemm = sum(o["count"] for o in j["ops"] if o["op"] in ("Gemm", "FusedGemm", "MatMul"))
print("%-10s GPUOPT_DISABLE_FUSION=%-9s attentions %2d, packed %2d, GEMMs %3d" % (sys.argv[1], sys.argv[2] or "-", att, packed, gemm))' \
      "$m" "$off" || echo "$m inspect failed"
  done
done

lap
echo "== 4. device ms, one binary (median of 20, CUDA graph; * = not replayed as a graph) =="
ms() {  # model batch [env...]
  local m=$1 b=$2; shift 2
  env "$@" "$G" run "$M/${m}_legacy.onnx" --device cuda --precision fp16 --random-inputs --batch "$b" \
    --iterations 20 --warmup 3 --json 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print("%.3f%s" % (j["device_ms"]["median"], "" if j.get("execution","graph")=="graph" else "*"))' \
      2>/dev/null || echo fail
}
# before: both passes off and every mask copied before cuDNN (GPUOPT_SDPA_BIAS=copy, the old
# behaviour); merge: merge_qkv alone; after: the defaults (+ a mask already in cuDNN's bias layout
# read in place, the mask pass); +nan: the defaults with the NaN guard left to cuDNN (BERT).
BEFORE=(GPUOPT_DISABLE_FUSION=merge_qkv,attention_mask GPUOPT_SDPA_BIAS=copy)
printf "%-10s %5s %10s %10s %10s %10s\n" model batch before merge after "+nan_cudnn"
for m in "${MODELS[@]}"; do
  for b in 1 32 256; do
    x=-; y=-
    [ "$m" = vit_b_16 ] || x=$(ms $m $b GPUOPT_DISABLE_FUSION=attention_mask GPUOPT_SDPA_BIAS=copy)
    [ "$m" = bert_base ] && y=$(ms $m $b GPUOPT_SDPA_NAN_GUARD=cudnn)
    printf "%-10s %5s %10s %10s %10s %10s\n" "$m" "$b" "$(ms $m $b "${BEFORE[@]}")" "$x" "$(ms $m $b)" "$y"
  done
done | tee "$D/table.txt"

lap
echo "== 5. output against ONNX Runtime fp32 (batch 2, padding mask) =="
for m in "${MODELS[@]}"; do
  timeout 60 python3 scripts/gpu/qkv_accuracy.py "$M/${m}_legacy.onnx" --gpuopt "$G" --work "$D/acc_$m" \
    --config 'before=GPUOPT_DISABLE_FUSION=merge_qkv,attention_mask;GPUOPT_SDPA_BIAS=copy' --config after= 2>&1 | tail -3
done
lap
