#!/usr/bin/env bash
# One device call for kernel work without the gpuopt binary: builds only test_llm_cuda and
# backend_ops against the sysroot (build_on_gpu_machine.sh's configure), then runs
# LLM_FILTER on test_llm_cuda (with LLM_KERNEL_BENCH=1 for the timing tests) and `backend_ops test
# --op OP` for each of OPS. Outputs under $OUT.
#   LLM_FILTER='LlmQuantKernels*:CudaRunnerQuant*' OPS='Conv ConvTranspose' scripts/gpu/kernels_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/kernels-out}
mkdir -p "$OUT"
t=$(date +%s)
# The script ends with `test -x build-h200/gpuopt`, which fails when gpuopt is not a target.
OUT=$OUT TARGETS="test_llm_cuda backend_ops" scripts/build_on_gpu_machine.sh > "$OUT/build.log" 2>&1
grep -E "error|FAILED" "$OUT/build.log" | head -20
echo "build: $(( $(date +%s) - t )) s"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/tmp/gpuopt-sysroot/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
if [ -n "${LLM_FILTER:-}" ]; then
  echo "== test_llm_cuda $LLM_FILTER =="
  LLM_KERNEL_BENCH=1 timeout ${LLM_TIMEOUT:-200} build-h200/tests/test_llm_cuda --gtest_filter="$LLM_FILTER" 2>&1 |
    tee "$OUT/llm_cuda.log" | grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which is|GB/s|worst|error" | head -80
fi
for op in ${OPS:-}; do
  echo "== backend_ops test --op $op =="
  timeout ${OPS_TIMEOUT:-60} build-h200/backend_ops test --op "$op" 2>&1 | tee "$OUT/backend_ops_$op.log" |
    grep -vE "^\s*(ok|OK|pass)" | tail -15
done
