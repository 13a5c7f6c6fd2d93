#!/usr/bin/env bash
# Issue 16 (the op layout): the move of every op into src/ops/<family>/ must not change a result.
# Runs backend-ops (every CUDA op against the CPU reference; each case's verdict, not its random
# error figures) and the ONNX conformance suite on cpu and cuda with this build's binaries, and,
# when BASE names the bin folder of a build of the commit before the move (e.g. main at f5ef98b),
# the same with those and a diff of the verdicts. Also: backend_ops coverage (every CUDA op has a
# case) and the CPU thread pool at 1 thread vs all (GPUOPT_NUM_THREADS) on conformance.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${BIN:-build-h200/bin}
D=${OUT:-./layout-out}/layout
mkdir -p "$D"
DATA=${ONNX_NODE_TESTS:?set ONNX_NODE_TESTS to the onnx node test data folder}

results() {  # conformance JSON -> "name outcome message" lines (no timings)
  python3 -c 'import json,sys; [print(t["name"], t["outcome"], t["message"]) for t in json.load(open(sys.argv[1]))["tests"]]' "$1" | sort
}

verdicts() {  # bin label: backend_ops verdicts and conformance per-test results into $D/<label>_*
  local bin=$1 label=$2
  "$bin/backend_ops" test >"$D/${label}_backend_ops.txt" 2>&1
  echo "$label backend_ops: exit $? | $(tail -1 "$D/${label}_backend_ops.txt")"
  awk 'NF >= 3 && ($0 ~ / OK / || $0 ~ / FAIL / || $0 ~ / SKIP /) { print substr($0, 1, 67) }' "$D/${label}_backend_ops.txt" \
    | sed 's/ *$//' | sort >"$D/${label}_backend_ops.verdicts"
  for dev in cpu cuda; do
    "$bin/gpuopt_conformance" --device "$dev" --data-dir "$DATA" --expectations tools/conformance/expectations -j 12 --json \
      >"$D/${label}_conformance_$dev.json" 2>"$D/${label}_conformance_$dev.err"
    echo "$label conformance $dev: exit $? | $(tail -1 "$D/${label}_conformance_$dev.err")"
  done
}

verdicts "$B" new
"$B/backend_ops" coverage; echo "backend_ops coverage: exit $?"
GPUOPT_NUM_THREADS=1 "$B/gpuopt_conformance" --device cpu --data-dir "$DATA" --expectations tools/conformance/expectations \
  -j 12 --json >"$D/new_conformance_cpu_1thread.json" 2>"$D/new_conformance_cpu_1thread.err"
echo "conformance cpu, 1 thread: exit $? | $(tail -1 "$D/new_conformance_cpu_1thread.err")"
if cmp -s <(results "$D/new_conformance_cpu.json") <(results "$D/new_conformance_cpu_1thread.json"); then
  echo "conformance cpu: same results with 1 thread and all"
else
  echo "conformance cpu: results differ between 1 thread and all (see $D)"
fi
if [ -n "${BASE:-}" ]; then
  verdicts "$BASE" base
  if diff "$D/base_backend_ops.verdicts" "$D/new_backend_ops.verdicts" >"$D/backend_ops.diff"; then
    echo "backend_ops: same verdicts as the base build ($(wc -l <"$D/new_backend_ops.verdicts") cases)"
  else
    echo "backend_ops: verdicts differ from the base build:"; head -20 "$D/backend_ops.diff"
  fi
  for dev in cpu cuda; do
    if diff <(results "$D/base_conformance_$dev.json") <(results "$D/new_conformance_$dev.json") >"$D/conformance_$dev.diff"; then
      echo "conformance $dev: same results as the base build"
    else
      echo "conformance $dev: results differ from the base build:"; head -20 "$D/conformance_$dev.diff"
    fi
  done
fi
