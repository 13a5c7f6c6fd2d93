#!/usr/bin/env bash
# Issue 37 on the H200, one call: the CUDA runner's tests (test_llm_cuda --gtest_filter=CudaRunner*)
# KERNEL_BENCH=1 adds the kernels' timing mode (KERNEL_FILTER), then scripts/gpu/llm.py (7B-shaped gpuopt vs transformers; records to $OUT/llm_records.json).
# Binaries: bin-h200/{test_llm_cuda,llm_bench} when carried (built here by
# `cmake --build build-h200 --target test_llm_cuda llm_bench`, GPUOPT_STATIC=ON), else built on
# the machine against the sysroot (scripts/build_on_gpu_machine.sh's configure, two targets only).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/llm-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv,noheader
B=bin-h200
if [ ! -x "$B/llm_bench" ]; then
  t=$(date +%s)
  # That script ends with `test -x build-h200/gpuopt`, which fails when gpuopt is not a target.
  TARGETS="test_llm_cuda llm_bench" scripts/build_on_gpu_machine.sh > "$OUT/build.log" 2>&1
  grep -E "error|FAILED" "$OUT/build.log" | head -20
  B=build-h200
  cp build-h200/tests/test_llm_cuda build-h200/ 2>/dev/null
  echo "build: $(( $(date +%s) - t )) s"
fi
# libcublasLt.so.13: the toolkit's, else the one in PyTorch's wheels.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$(python3 -c 'import nvidia.cublas, os; print(os.path.join(nvidia.cublas.__path__[0], "lib"))' 2>/dev/null):${LD_LIBRARY_PATH:-}
echo "== CUDA runner tests =="
timeout ${TEST_TIMEOUT:-100} "$B/test_llm_cuda" --gtest_filter="${FILTER:-CudaRunner*}" 2>&1 | tee "$OUT/runner_test.log" |
  grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|worst|Expected|Which is|error" | head -60
if [ "${KERNEL_BENCH:-0}" = 1 ]; then
  echo "== kernel timing (LLM_KERNEL_BENCH=1) =="
  LLM_KERNEL_BENCH=1 timeout 120 "$B/test_llm_cuda" --gtest_filter="${KERNEL_FILTER:-LlmKernelsBench.*}" 2>&1 |
    tee "$OUT/kernel_bench.log" | grep -E "GB/s|us|FAILED|Failure" | head -60
fi
[ "${SKIP_BENCH:-0}" = 1 ] && exit 0
echo "== 7B-shaped benchmark =="
PYTHONUNBUFFERED=1 timeout ${BENCH_TIMEOUT:-480} python3 scripts/gpu/llm.py --bench "$B/llm_bench" \
  --out "$OUT/llm_records.json" --commit "${GPUOPT_COMMIT:-unknown}" ${LLM_ARGS:-} 2>&1 | grep -v -i warn
