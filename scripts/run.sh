#!/usr/bin/env bash
# The README's main job: installs dependencies, builds gpuopt, shows what it finds on this
# machine (`gpuopt info`), then generates a small ResNet-style model with the project's own
# generator and runs it with `gpuopt run` — on the GPU (fp16) when there is one, else on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
./scripts/build.sh
G=./build/gpuopt
echo
$G info
mkdir -p build/models
.venv/bin/python3 tools/models/make_models.py --out build/models resnet_small
echo
$G inspect build/models/resnet_small.onnx
echo
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && $G run --help | grep -q -- --device; then
  $G run build/models/resnet_small.onnx --random-inputs --batch 8 --iterations 50 --device cuda --precision fp16 \
    || $G run build/models/resnet_small.onnx --random-inputs --batch 8 --iterations 20 --device cpu
else
  $G run build/models/resnet_small.onnx --random-inputs --batch 8 --iterations 20 --device cpu
fi
