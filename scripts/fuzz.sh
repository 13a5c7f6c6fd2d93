#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (coverage + ASan + UBSan, CPU only) into ./build-fuzz
# and runs each for SECONDS (default 30): the model loader and the server's request parsers.
# New inputs land in build-fuzz/tools/fuzz/work_*; a crash leaves crash-* there and fails the run.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-30}
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "fuzz: $tool not found (scripts/deps.sh installs it)" >&2; exit 1; }
done
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
echo "fuzz: building the libFuzzer targets with clang into $BUILD_DIR"
CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGPUOPT_CUDA=OFF -DGPUOPT_BUILD_TESTS=OFF -DGPUOPT_FUZZ=ON -DGPUOPT_FUZZ_SECONDS="$SECONDS_EACH" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target gpuopt_fuzz_model_loader gpuopt_fuzz_server_parsers
cd "$BUILD_DIR"
ctest --output-on-failure -R '^fuzz\.' -j"$(nproc)" 2>&1 | tee fuzz.log | grep -E "Test +#|stat::number_of_executed_units|tests passed"
exit "${PIPESTATUS[0]}"
