#!/usr/bin/env bash
# The README's main job: installs dependencies, builds gpuopt, then shows what it finds on this
# machine (`gpuopt info`).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
./scripts/build.sh
echo
./build/gpuopt info
