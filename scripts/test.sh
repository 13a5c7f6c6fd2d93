#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, runs every test (C++ and Python)
# through CTest. GPU tests report "skipped: no CUDA device" on a machine without one.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
./scripts/build.sh
cd "${BUILD_DIR:-build}"
set +e
ctest --output-on-failure -j"$(nproc)" --timeout 900 2>&1 | tee ctest.log
rc=${PIPESTATUS[0]}
# CTest lists skipped tests after its summary; repeat the summary so the run ends with it.
echo
grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" ctest.log | tail -1
exit "$rc"
