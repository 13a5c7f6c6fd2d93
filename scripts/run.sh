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
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  echo "==> build (scripts/build.sh -> build/gpuopt alone, not the tests; minutes the first time, seconds after)"
  BUILD_TARGETS=gpuopt ./scripts/build.sh
  echo "    build/gpuopt is up to date ($(( $(date +%s) - t0 )) s so far)"
fi
exec .venv/bin/python3 tools/mainjob.py --gpuopt build/gpuopt --out build/mainjob --json build/mainjob/summary.json
