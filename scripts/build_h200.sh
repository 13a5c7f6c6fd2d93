#!/usr/bin/env bash
# Builds the binaries for the H200 machine (sm_90, non-CUDA dependencies static) and copies the
# ones scripts/gpu_check.sh runs, stripped, into build-h200/bin (the folder to carry: the device
# tool carries at most 64 MiB), with the shared libraries grpc++ needs in build-h200/bin/lib. Also packs the pinned ONNX node-test data for conformance there.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=build-h200 GPUOPT_CUDA=ON GPUOPT_CUDA_ARCHS=90 ./scripts/build.sh -DGPUOPT_STATIC=ON "$@"
mkdir -p build-h200/bin
for f in build-h200/gpuopt build-h200/backend_ops build-h200/gpuopt_conformance build-h200/tests/test_*; do
  [ -x "$f" ] && [ -f "$f" ] || continue
  strip --strip-unneeded -o "build-h200/bin/$(basename "$f")" "$f"
done
# grpc++ and the shared libprotobuf (Debian has no static ones) travel next to the binaries.
scripts/copy_shared_libs.sh build-h200/bin/lib build-h200/gpuopt
node=$(ls -d .venv/lib/python3*/site-packages/onnx/backend/test/data/node 2>/dev/null | head -1)
[ -n "$node" ] && tar czf build-h200/bin/onnx-node-tests.tgz -C "$(dirname "$node")" node
du -sh build-h200/bin
