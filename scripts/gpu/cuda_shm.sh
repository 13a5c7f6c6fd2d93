#!/usr/bin/env bash
# Serving paths only a GPU host takes (tests/python/test_server_gpu_paths.py, about 30 s): a
# 4.8 MB binary request to a GPU instance over HTTP and gRPC (its body read into a pinned block
# and copied to the device from there) and Triton's CUDA shared memory through
# tritonclient.utils.cuda_shared_memory over HTTP and gRPC, and 4.8 MB inputs in system shared
# memory (read in place from the region, page-locked by the server), each checked against numpy. Needs
# pytest, numpy, onnx and tritonclient (with cuda-python for the CUDA shared-memory part) in $PY:
# what is missing is said first, and pytest reports each skipped test with its reason.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
PY=${PY:-python3}
G=build-h200/bin/gpuopt
[ -x "$G" ] || G=build-h200/gpuopt
[ -x "$G" ] || G=build/gpuopt
export GPUOPT_BIN=${GPUOPT_BIN:-$PWD/$G}
for m in pytest numpy onnx tritonclient.http tritonclient.grpc tritonclient.utils.cuda_shared_memory; do
  $PY -c "import $m" >/dev/null 2>&1 || echo "not importable in $PY: $m"
done
$PY -m pytest -v -rs -p no:cacheprovider tests/python/test_server_gpu_paths.py
