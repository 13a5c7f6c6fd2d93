#!/usr/bin/env bash
# Issue 40 on the H200. STEP=build (default): build gpuopt, test_llm_cuda and llm_bench against the
# sysroot, run the quantized kernels' and runner's tests and the kernels' timing, then start
# `llm_quant.py speed --prepare` (7B folder, tokenizer, int8/int4/fp8 folders) in the background
# (setsid: it outlives this call). STEP=speed: wait for it, then the timed comparison. STEP=accuracy:
# the trained small model. Outputs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/quant-out}
mkdir -p "$OUT"
B=build-h200
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$(python3 -c 'import nvidia.cublas, os; print(os.path.join(nvidia.cublas.__path__[0], "lib"))' 2>/dev/null):$B/bin/lib:${LD_LIBRARY_PATH:-}
commit=${GPUOPT_COMMIT:-unknown}
case "${STEP:-build}" in
build)
  t=$(date +%s)
  OUT=$OUT TARGETS="gpuopt test_llm_cuda llm_bench" scripts/build_on_gpu_machine.sh > "$OUT/build.log" 2>&1
  grep -E "error|FAILED" "$OUT/build.log" | head -20
  echo "build: $(( $(date +%s) - t )) s"
  test -x $B/gpuopt || exit 1
  setsid nohup python3 scripts/gpu/llm_quant.py speed --prepare --gpuopt $B/gpuopt --out /tmp/prep.json \
    > /tmp/prep.log 2>&1 < /dev/null &
  echo "== quantized kernels and runner =="
  timeout 240 $B/tests/test_llm_cuda --gtest_filter='CudaRunnerQuant*:LlmQuantKernels*:LlmQuantMma*' 2>&1 | tee "$OUT/quant_test.log" |
    grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|worst|Expected|Which is|error" | head -60
  echo "== kernel timing =="
  LLM_KERNEL_BENCH=1 timeout 90 $B/tests/test_llm_cuda --gtest_filter='LlmQuantKernelsBench.*' 2>&1 |
    tee "$OUT/kernel_bench.log" | grep -vE "^\[ *(RUN|OK) " | head -60
  echo "== prepare so far =="; tail -5 /tmp/prep.log
  ;;
speed)
  for i in $(seq 1 60); do pgrep -f "llm_quant.py speed --prepare" > /dev/null || break; sleep 5; done
  echo "== prepare =="; cat /tmp/prep.log
  PYTHONUNBUFFERED=1 timeout 540 python3 scripts/gpu/llm_quant.py speed --gpuopt $B/gpuopt --bench $B/llm_bench \
    --out "$OUT/quant_speed.json" --commit "$commit" 2>&1 | grep -v -i warn
  ;;
accuracy)
  PYTHONUNBUFFERED=1 timeout 560 python3 scripts/gpu/llm_quant.py accuracy --gpuopt $B/gpuopt \
    --out "$OUT/quant_acc.json" --commit "$commit" ${ACC_ARGS:-} 2>&1 | grep -v -i warn
  ;;
esac
