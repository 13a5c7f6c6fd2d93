#!/usr/bin/env bash
# torch.compile figures for docs/perf/h200.json (issue 12's compile columns), in priority order
# within one device call: default mode at the serving batches first, then max-autotune on the two
# headline points, then the small batches. Each step is a compare.py run with the torch runners
# only (no export, no gpuopt); records land in $OUT/compile_*.json as they come, so a step cut by
# the deadline loses only itself. Merge with: python3 tools/perf_table.py --merge $OUT/compile_*.json
#   OUT=/tmp/c DEADLINE_S=560 [STEPS=ma,small] bash scripts/gpu/compile_run.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.}; mkdir -p "$OUT"
end=$(( $(date +%s) + ${DEADLINE_S:-560} ))
step() {  # NAME RUNNER MODELS BATCHES (STEPS=ma,small runs only the steps named)
  case ",${STEPS:-all}," in ",all,"|*",$1,"*) ;; *) return ;; esac
  local left=$(( end - $(date +%s) ))
  if [ "$left" -lt 30 ]; then echo "compile_run: $1 skipped (deadline)"; return; fi
  echo "compile_run: $1 ($2 $3 b$4), ${left} s left"
  PYTHONUNBUFFERED=1 timeout "$left" python3 scripts/gpu/compare.py --out "$OUT/compile_$1.json" --exporters "" \
    --runners "$2" --models "$3" --batches "$4" --commit "${GPUOPT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}" \
    2>&1 | grep -v Warning | grep -E '^\{|compile_run|Error|error' | cut -c1-300
}
step cnn256 torch_compile resnet50,mobilenet_v3_large,efficientnet_b0,convnext_tiny 32,256
step tr torch_compile bert_base,vit_b_16 32,256
step gpt2 torch_compile gpt2 32,64
step ma torch_compile_max_autotune resnet50,bert_base 256
step small torch_compile resnet50,bert_base,vit_b_16,gpt2,mobilenet_v3_large,efficientnet_b0,convnext_tiny 1,8
ls -la "$OUT"/compile_*.json
