#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, runs every test (C++ and Python)
# through CTest. GPU tests report "skipped: no CUDA device" on a machine without one.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
./scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j"$(nproc)" --timeout 900
