#!/usr/bin/env bash
# ONNX Runtime's contrib attention ops on the H200 (scripts/gpu_check.sh mha, over build-h200/bin),
# under 3 minutes:
#  1. backend_ops RotaryEmbedding (3-D/4-D, interleaved, partial rotation, position_ids or
#     per-token caches; seq 1/7/129, head 64/80/128; f32/f16/bf16) and Attention (regressions);
#  2. BERT-base as ONNX Runtime's optimizer writes it (com.microsoft Attention, SkipLayerNormalization,
#     BiasGelu; scripts/gpu/mha_bert.py): the transformers export through optimize_model when
#     its fusion writes Attention, and the same encoder written directly with those ops; each at
#     batch 32, seq 128 through `gpuopt run --device cuda --precision fp16`: device ms (median of
#     30), execution (graph or eager), ops per node count, rel-L2 against ONNX Runtime on the CPU.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
D=${OUT:-./perf-out}/mha
mkdir -p "$D"
PY=python3  # a Python with onnx and onnxruntime (and torch + transformers for the export)
for p in /opt/torch/.venv/bin/python .venv/bin/python python3; do
  if $p -c "import onnx, onnxruntime" 2>/dev/null; then PY=$p; break; fi
done
declare -a rows
row() { rows+=("$1|$2"); echo "$1: $2"; }

echo "== backend_ops =="
for op in RotaryEmbedding Attention; do
  "$B/backend_ops" test --op $op >"$D/backend_ops_$op.txt" 2>&1
  rc=$?
  grep -E "FAIL" "$D/backend_ops_$op.txt" | head -10
  row "backend_ops $op (exit $rc)" "$(tail -1 "$D/backend_ops_$op.txt")"
done

echo "== BERT-base with com.microsoft ops, fp16, batch ${BATCH:-32} =="
timeout 150 $PY scripts/gpu/mha_bert.py "$B/gpuopt" "$D" --batch "${BATCH:-32}" --seq 128 >"$D/bert.txt" 2>"$D/bert.err"
rc=$?
[ $rc -ne 0 ] && tail -5 "$D/bert.err"
while IFS= read -r line; do
  row "bert $(echo "$line" | python3 -c 'import json,sys; print(json.load(sys.stdin)["model"])')" \
    "$(echo "$line" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r.get("skipped") or r.get("error") or "%s ms device, %.3f ms latency, rel-L2 %.1e vs ORT CPU, %s, contrib %s" % (r["device_ms"], r["latency_ms"], r["rel_l2_vs_ort_cpu"], r.get("execution"), r["contrib_ops"]))')"
done <"$D/bert.txt"
row "mha_bert.py (exit $rc)" "$D/mha_bert.json"

echo
echo "== summary =="
for r in "${rows[@]}"; do printf '%-36s %s\n' "${r%%|*}" "${r#*|}"; done
