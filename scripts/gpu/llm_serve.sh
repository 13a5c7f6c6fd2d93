#!/usr/bin/env bash
# Issue 38 on the H200, one call: builds gpuopt and test_llm_cuda from the sysroot
# (scripts/build_on_gpu_machine.sh), runs the LLM CUDA tests (kernels, runner, engine, hidden
# states), then scripts/gpu/llm_serve.py: a 7B-shaped fp16 model served by `gpuopt serve
# --llm-model`, loaded by `gpuopt perf --service-kind openai`; records to $OUT/llm_serve_records.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/llm-serve-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv,noheader
t=$(date +%s)
mkdir -p /tmp/buildlogs
OUT=/tmp/buildlogs TARGETS="gpuopt test_llm_cuda" timeout ${BUILD_TIMEOUT:-400} scripts/build_on_gpu_machine.sh > "$OUT/build.log" 2>&1
echo "build: rc=$? $(( $(date +%s) - t )) s"; grep -E "error|FAILED" "$OUT/build.log" | head -20
G=build-h200/bin/gpuopt
[ -x "$G" ] || { echo "no binary"; tail -30 /tmp/buildlogs/cmake-configure.log; exit 1; }
# The binary and its libraries come back (stripped, xz) so a later call can carry them
# (.devbin/) instead of building again: scripts/gpu/llm_soak.py's call.
mkdir -p "$OUT/bin" && strip -o /tmp/gpuopt.stripped "$G" && xz -T0 -9 -c /tmp/gpuopt.stripped | split -b 15M - "$OUT/bin/gpuopt.xz." &&
  tar cJf "$OUT/bin/lib.tar.xz" -C build-h200/bin lib && ls -la "$OUT/bin"
export LD_LIBRARY_PATH=build-h200/bin/lib:/usr/local/cuda/lib64:$(python3 -c 'import nvidia.cublas, os; print(os.path.join(nvidia.cublas.__path__[0], "lib"))' 2>/dev/null):${LD_LIBRARY_PATH:-}
echo "== LLM CUDA tests =="
timeout ${TEST_TIMEOUT:-120} build-h200/tests/test_llm_cuda --gtest_filter="${FILTER:-*}:-LlmKernelsBench.*" 2>&1 |
  tee "$OUT/llm_cuda_test.log" | grep -E "^\[ *(FAILED|PASSED|SKIPPED) |Failure|Expected|Which is|tests ran" | head -40
[ "${SKIP_SERVE:-0}" = 1 ] && exit 0
echo "== serving benchmark =="
PYTHONUNBUFFERED=1 timeout ${SERVE_TIMEOUT:-420} python3 scripts/gpu/llm_serve.py --gpuopt "$G" \
  --out "$OUT/llm_serve_records.json" --commit "${GPUOPT_COMMIT:-unknown}" ${SERVE_ARGS:-} 2>&1 | grep -v -i warn
# SOAK_SECS > 0: then a soak at 80% of the best 128/128 request rate (scripts/gpu/llm_soak.py).
if [ "${SOAK_SECS:-0}" -gt 0 ] && [ -f "$OUT/llm_serve_records.json" ]; then
  rate=$(python3 -c "import json; r=[x for x in json.load(open('$OUT/llm_serve_records.json')) if x['prompt_tokens']==128 and not x['shared_prefix_tokens']]; print(round(0.8*max(x['request_s'] for x in r),1))")
  echo "== soak: ${SOAK_SECS} s at $rate requests/s =="
  PYTHONUNBUFFERED=1 timeout $(( SOAK_SECS + 90 )) python3 scripts/gpu/llm_soak.py --gpuopt "$G" --rate "$rate" \
    --duration "$SOAK_SECS" --out "$OUT/llm_soak.json" --commit "${GPUOPT_COMMIT:-unknown}"
fi
