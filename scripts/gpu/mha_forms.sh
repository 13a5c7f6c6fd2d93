#!/usr/bin/env bash
# Every form of ONNX Runtime's contrib attention ops (Attention mask forms, MultiHeadAttention
# cross/4-D, RotaryEmbedding 3-D/4-D/interleaved/partial/offset, EmbedLayerNormalization) through
# `gpuopt run --device cuda` at fp32 and fp16 against ONNX Runtime on the CPU
# (scripts/gpu/mha_forms.py; scripts/gpu_check.sh mha_forms). About a minute.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
D=${OUT:-./perf-out}/mha_forms
mkdir -p "$D"
PY=python3
for p in /opt/torch/.venv/bin/python .venv/bin/python python3; do
  if $p -c "import onnx, onnxruntime" 2>/dev/null; then PY=$p; break; fi
done
timeout 170 $PY scripts/gpu/mha_forms.py "$B/gpuopt" "$D"
