#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, runs every test (C++ and Python)
# through CTest, then the libFuzzer targets for a bounded time (scripts/fuzz.sh). GPU tests report
# "skipped: no CUDA device" on a machine without one.
#   ./scripts/test.sh              the tests and the fuzz run
#   ./scripts/test.sh --sanitize   the sanitizer job instead: ASan+UBSan build of the unit and
#                                  server tests, then TSan of the server, batcher, net and exporter
#                                  tests, repeated (scripts/sanitize.sh); CI runs both
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --sanitize ]; then
  ./scripts/deps.sh
  exec ./scripts/sanitize.sh
fi
./scripts/deps.sh
./scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
set +e
# --output-junit keeps every test's output (skip reasons included) for tools/ctest_skips.py.
(cd "$BUILD_DIR" && ctest --output-on-failure -j"$(nproc)" --timeout 900 --output-junit ctest-junit.xml \
   --test-output-size-passed 65536 2>&1 | tee ctest.log; exit "${PIPESTATUS[0]}")
rc=$?
# Each skipped test with its reason, then a count per reason (repeated at the very end).
python3 tools/ctest_skips.py "$BUILD_DIR/ctest-junit.xml" > "$BUILD_DIR/skipped.txt" 2>&1
echo
grep '^skipped: ' "$BUILD_DIR/skipped.txt" || true
# The libFuzzer targets (request codecs, config.pbtxt, model loader, image decoders): a clang
# build of their own sharing 2*GPUOPT_FUZZ_SECONDS CPU-seconds (default 30; 0 skips them).
fuzz_rc=0
if [ "${GPUOPT_FUZZ_SECONDS:-30}" != 0 ]; then
  ./scripts/fuzz.sh "${GPUOPT_FUZZ_SECONDS:-30}" > "$BUILD_DIR/fuzz.log" 2>&1
  fuzz_rc=$?
  grep -E '^fuzz: ' "$BUILD_DIR/fuzz.log" || tail -n 20 "$BUILD_DIR/fuzz.log"
fi
# CTest lists skipped tests after its summary; repeat the summaries so the run ends with them.
echo
if [ "${GPUOPT_FUZZ_SECONDS:-30}" = 0 ]; then
  echo "fuzz: skipped (GPUOPT_FUZZ_SECONDS=0)"
elif [ $fuzz_rc = 0 ]; then
  echo "fuzz: $(grep -c ', no crash$' "$BUILD_DIR/fuzz.log") targets, no crash (each target's line above: runs, corpus, cov, ft)"
else
  echo "fuzz: FAILED (exit $fuzz_rc), see $BUILD_DIR/fuzz.log and build-fuzz/tools/fuzz/work_*/"
fi
grep -E '^[0-9]+ skipped' "$BUILD_DIR/skipped.txt" || cat "$BUILD_DIR/skipped.txt"
grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$BUILD_DIR/ctest.log" | tail -1
[ "$rc" = 0 ] && rc=$fuzz_rc
exit "$rc"
