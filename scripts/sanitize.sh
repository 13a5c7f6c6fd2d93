#!/usr/bin/env bash
# The sanitizer job (`./scripts/test.sh --sanitize`, run by CI after the tests):
#  1. ASan + UBSan (CUDA off) in ./build-asan: the gpuopt binary, the C++ unit and server tests
#     and the fuzz corpus replays; every test must pass with no report (leaks included).
#  2. TSan in ./build-tsan: the server, batcher, net and exporter tests, three times over
#     (ctest --repeat until-fail:3), since races show up in some interleavings only.
# Only the targets these need are built. GPUOPT_SANITIZE_STEPS="asan tsan" picks steps.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
STEPS=${GPUOPT_SANITIZE_STEPS:-asan tsan}
J=$(nproc)
# -O1: the sanitizers' usual level (fast enough to run, quicker to compile than -O3).
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -g1" "-DCMAKE_C_FLAGS_RELEASE=-O1 -g1"
        -DGPUOPT_CUDA=OFF -DGPUOPT_BUILD_TESTS=ON)
# The test list of a folder whose binary is not built here reads <target>_NOT_BUILT; the Python
# checks, the conformance runner and the example drive release builds and run in the normal test job.
skip='_NOT_BUILT|^py\.|^conformance\.|^example\.|^fuzz\.replay'
# allocator_may_return_null: an allocation too large for the host must fail as in a normal build
# (the out-of-memory tests expect a Status), not stop the process.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tools/sanitize/tsan.supp}
rc=0
summary=()
t0=$(date +%s)

if [[ " $STEPS " == *" asan "* ]]; then
  s=$(date +%s)
  cmake -S . -B build-asan "${common[@]}" -DGPUOPT_ASAN=ON -DGPUOPT_UBSAN=ON >/dev/null
  targets=(gpuopt fake_nvml fake_nvml_old)
  for d in tests/*/; do
    n=$(basename "$d")
    case $n in python|data|fake_nvml|cuda|llm_cuda|backend_ops) continue ;; esac
    ls "$d"*.cpp >/dev/null 2>&1 && targets+=("test_$n")
  done
  for k in json_codec binary_codec model_config model_loader image_decoders http_router grpc_messages tokenizer llm_files openai_request; do targets+=("gpuopt_fuzz_replay_$k"); done
  cmake --build build-asan -j"$J" --target "${targets[@]}"
  set +e
  (cd build-asan && ctest -j"$J" --timeout 900 --output-on-failure -E "$skip" 2>&1 | tee ctest.log; exit "${PIPESTATUS[0]}")
  r=$?
  set -e
  [ $r = 0 ] || rc=1
  summary+=("sanitize: asan+ubsan $(grep -oE '[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' build-asan/ctest.log | tail -1) in $(( $(date +%s) - s )) s")
fi

if [[ " $STEPS " == *" tsan "* ]]; then
  s=$(date +%s)
  cmake -S . -B build-tsan "${common[@]}" -DGPUOPT_TSAN=ON >/dev/null
  cmake --build build-tsan -j"$J" --target gpuopt fake_nvml fake_nvml_old test_server test_net test_monitor
  set +e
  (cd build-tsan && ctest -j"$J" --timeout 900 --output-on-failure -E "$skip" --repeat until-fail:3 2>&1 | tee ctest.log
   exit "${PIPESTATUS[0]}")
  r=$?
  set -e
  [ $r = 0 ] || rc=1
  summary+=("sanitize: tsan (server, batcher, net, exporter; 3 runs each) $(grep -oE '[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' build-tsan/ctest.log | tail -1) in $(( $(date +%s) - s )) s")
fi

echo
printf '%s\n' "${summary[@]}"
echo "sanitize: $([ $rc = 0 ] && echo clean || echo FAILED) in $(( $(date +%s) - t0 )) s"
exit $rc
