#!/usr/bin/env bash
# `gpuopt bench` on the GPU machine (issue 6): kernel checks against CPU references, then the
# whole suite with its report (bench.json, *.svg, index.html), then a short summary against
# PyTorch's anchors on the same H200. Builds nothing: expects ./build-h200 (scripts/build_h200.sh).
# Writes under "$OUT/bench" when OUT is set (else ./bench-out). About 1-2 minutes of GPU time;
# the two steps' timeouts keep it inside scripts/gpu_check.sh's 300 s per area.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build-h200}
BIN=$BUILD/gpuopt
DIR=${OUT:-./bench-out}/bench
mkdir -p "$DIR"
[ -x "$BIN" ] || { echo "bench.sh: $BIN not found (run scripts/build_h200.sh here first)"; exit 1; }

nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,power.limit --format=csv \
  >"$DIR/nvidia-smi-before.csv" 2>&1 || true

# 1. Correctness of every benchmark kernel (copy/read/write, FMA, roofline, GEMM per type, graph).
checks=skipped
if [ -x "$BUILD/tests/test_bench" ]; then
  if timeout 60 "$BUILD/tests/test_bench" --gtest_filter='GpuCheck.*:CpuGemm.*' >"$DIR/test_bench.log" 2>&1; then
    checks=passed
  else
    checks="FAILED (see test_bench.log)"
  fi
fi

# 2. The suite. Progress goes to progress.log; tables to bench.txt.
start=$(date +%s)
timeout 220 "$BIN" bench all --check --report "$DIR" >"$DIR/bench.txt" 2>"$DIR/progress.log"
rc=$?
end=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv \
  >"$DIR/nvidia-smi-after.csv" 2>&1 || true

# 3. Short table last: the headline figures against the anchors.
echo "== gpuopt bench all: exit $rc, $((end - start)) s; kernel checks: $checks; report in $DIR =="
grep -E "^  (check|.*FAILED)" "$DIR/bench.txt" | sort -u | head -20
tail -n 5 "$DIR/progress.log" | grep -i error || true
sed -n '/^Summary$/,$p' "$DIR/bench.txt"
exit $rc
