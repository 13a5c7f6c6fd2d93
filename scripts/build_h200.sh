#!/usr/bin/env bash
# Builds the binaries for the H200 machine (sm_90, non-CUDA dependencies static) into build-h200/,
# the folder scripts/gpu_check.sh expects. Run here, then carry build-h200 to the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=build-h200 GPUOPT_CUDA=ON GPUOPT_CUDA_ARCHS=90 ./scripts/build.sh -DGPUOPT_STATIC=ON "$@"
# Keep only what runs there (the carry limit is 64 MiB): strip symbols.
find build-h200 -maxdepth 2 -type f -perm -u+x \( -name gpuopt -o -name 'test_*' -o -name '*.so' \) -exec strip --strip-unneeded {} + 2>/dev/null || true
