#!/usr/bin/env bash
# Configures and builds gpuopt into ./build (binary: build/gpuopt).
# Environment: GPUOPT_CUDA=AUTO|ON|OFF, GPUOPT_CUDA_ARCHS (default: this machine's GPU, else 90),
# BUILD_DIR (default build), CMAKE_BUILD_TYPE (default Release), GPUOPT_WERROR=ON (warnings are
# errors; CI sets it), BUILD_TARGETS (default: every target; the main job builds only `gpuopt`),
# extra args are passed to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
if [ -z "${GPUOPT_CUDA_ARCHS:-}" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then GPUOPT_CUDA_ARCHS=native; else GPUOPT_CUDA_ARCHS=90; fi
fi
export PATH="$PATH:/usr/local/cuda/bin"
# ccache keys on paths relative to the repository, so every clone (CI's fresh one too) shares hits.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" \
  -DGPUOPT_CUDA="${GPUOPT_CUDA:-AUTO}" -DGPUOPT_CUDA_ARCHS="$GPUOPT_CUDA_ARCHS" \
  -DGPUOPT_WERROR="${GPUOPT_WERROR:-OFF}" "$@" >/dev/null
# shellcheck disable=SC2086  # BUILD_TARGETS is a list of target names
cmake --build "$BUILD_DIR" -j"$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
