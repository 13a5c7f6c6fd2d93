#!/usr/bin/env bash
# Runs on the H200 machine, from the repository root, over binaries built here by
# scripts/build_h200.sh (carry build-h200/bin): every scripts/gpu/<area>.sh named on the command
# line (default: all), each logged to $OUT/<area>.log, then a summary table.
#
#   scripts/gpu_check.sh info bench      # on the GPU machine
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
# cuDNN: the headers we build against are 9.19; PyTorch's venv carries the matching library.
CUDNN_DIR=$(ls -d /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib 2>/dev/null | head -1)
[ -n "$CUDNN_DIR" ] && export LD_LIBRARY_PATH="$CUDNN_DIR:${LD_LIBRARY_PATH:-}"
export BIN=$PWD/build-h200/bin
# grpc++, its dependencies and the shared libprotobuf (scripts/copy_shared_libs.sh put them here).
[ -d "$BIN/lib" ] && export LD_LIBRARY_PATH="$BIN/lib:${LD_LIBRARY_PATH:-}"
export GPUOPT_BIN=$BIN/gpuopt
chmod +x "$BIN"/* 2>/dev/null || true
if [ -f "$BIN/onnx-node-tests.tgz" ] && [ ! -d /tmp/onnx-node ]; then
  mkdir -p /tmp/onnx-node && tar xzf "$BIN/onnx-node-tests.tgz" -C /tmp/onnx-node
fi
export ONNX_NODE_TESTS=/tmp/onnx-node/node
# The area scripts may also name binaries by their build paths.
mkdir -p build-h200/tests
for f in "$BIN"/*; do
  case "$(basename "$f")" in
    lib) continue ;;
    test_*) ln -sf "$f" "build-h200/tests/$(basename "$f")" ;;
    *.tgz) ;;
    *) ln -sf "$f" "build-h200/$(basename "$f")" ;;
  esac
done

areas=("$@")
if [ ${#areas[@]} -eq 0 ]; then
  for f in scripts/gpu/*.sh; do areas+=("$(basename "$f" .sh)"); done
fi
declare -A rc
for a in "${areas[@]}"; do
  echo "=== $a ==="
  start=$(date +%s)
  timeout "${GPU_CHECK_TIMEOUT:-300}" bash "scripts/gpu/$a.sh" > "$OUT/$a.log" 2>&1
  rc[$a]=$?
  echo "--- $a: exit ${rc[$a]} in $(( $(date +%s) - start )) s; last lines:"
  tail -n "${GPU_CHECK_TAIL:-25}" "$OUT/$a.log"
done
echo
printf '%-12s %s\n' area exit
for a in "${areas[@]}"; do printf '%-12s %s\n' "$a" "${rc[$a]}"; done
