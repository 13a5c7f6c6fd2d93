#!/usr/bin/env bash
# The README's main job: installs dependencies, builds gpuopt, then runs the whole loop on this
# machine (tools/mainjob.py): the hardware found (with a GPU, a few seconds of measured
# ceilings), a generated ResNet-style model compiled for the best device and precision (with a
# GPU, beside the CPU), `gpuopt serve` with a short `gpuopt perf` run against it and the batch
# sizes the server formed, a clean SIGTERM shutdown, and one summary table with where to go next.
# About a minute once built. Environment: SKIP_DEPS=1 / SKIP_BUILD=1 skip those steps.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
if [ "${SKIP_DEPS:-0}" != 1 ]; then
  echo "==> dependencies (scripts/deps.sh: Debian packages, pinned Python packages in .venv)"
  ./scripts/deps.sh
fi
# With a GPU the main job builds the whole engine into build/; without one (no working
# `nvidia-smi -L`) it builds gpuopt without its CUDA kernels into build-cpu/, which takes about
# half as long on a small machine, unless build/ is already configured (./scripts/test.sh ran:
# then build/gpuopt is brought up to date). GPUOPT_CUDA=ON|OFF or BUILD_DIR override the choice.
if [ -z "${BUILD_DIR:-}" ] && [ -z "${GPUOPT_CUDA:-}" ] && [ ! -f build/CMakeCache.txt ] &&
   ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }; then
  export BUILD_DIR=build-cpu GPUOPT_CUDA=OFF
fi
export BUILD_DIR=${BUILD_DIR:-build}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  echo "==> build (scripts/build.sh -> $BUILD_DIR/gpuopt alone, not the tests${GPUOPT_CUDA:+, GPUOPT_CUDA=$GPUOPT_CUDA}; minutes the first time, seconds after)"
  BUILD_TARGETS=gpuopt ./scripts/build.sh
  echo "    $BUILD_DIR/gpuopt is up to date ($(( $(date +%s) - t0 )) s so far)"
fi
exec .venv/bin/python3 tools/mainjob.py --gpuopt "$BUILD_DIR/gpuopt" --out "$BUILD_DIR/mainjob" --json "$BUILD_DIR/mainjob/summary.json"
