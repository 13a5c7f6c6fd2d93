#!/usr/bin/env bash
# The tidy branch's shared helpers on the GPU (issue 16; scripts/gpu_check.sh tidy), about a minute:
#  1. backend-ops Attention with each of gpuopt's kernels forced (GPUOPT_ATTENTION_KERNEL=wmma:
#     the tensor-core kernel where it applies, the scalar one elsewhere; =scalar: the scalar one
#     everywhere): both now apply one mask rule and one launch (transformer/cuda/attention_common.cuh);
#  2. backend-ops QLinearConv (its CUDA plan reads the window through nn::conv_window), Conv,
#     ConvTranspose and the pools (their CPU references, the oracle, share conv_window and
#     pool_window.h now);
#  3. bench's device (query_device reads the monitor's cuda_device_props now) against `info --json`:
#     name, compute capability, SM count and L2 size agree.
# Prints PASS/FAIL per check; exits 1 when any failed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
D=${OUT:-./tidy-out}/tidy
mkdir -p "$D"
fail=0
check() { if [ "$1" = 0 ]; then echo "PASS $2"; else echo "FAIL $2"; fail=1; fi; }

ops() {  # label env... -- op...
  local label=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  for op in "$@"; do
    env "${envs[@]}" timeout 60 "$B/backend_ops" test --op "$op" >"$D/${label}_$op.txt" 2>&1
    local rc=$?
    grep -E "FAIL" "$D/${label}_$op.txt" | head -5
    # A run that skipped everything (no device) must not pass as checked.
    ! grep -q "skipped: no CUDA device" "$D/${label}_$op.txt"
    check $(( rc | $? )) "backend_ops $op ($label): $(tail -1 "$D/${label}_$op.txt")"
  done
}
ops wmma GPUOPT_ATTENTION_KERNEL=wmma -- Attention
ops scalar GPUOPT_ATTENTION_KERNEL=scalar -- Attention
ops default GPUOPT_LOG_LEVEL=warn -- QLinearConv Conv ConvTranspose MaxPool AveragePool GlobalAveragePool

"$B/gpuopt" bench latency --json -q --repeat 3 >"$D/bench_latency.json" 2>"$D/bench_latency.err"
"$B/gpuopt" info --json >"$D/info.json" 2>"$D/info.err"
python3 - "$D/bench_latency.json" "$D/info.json" <<'PY'
import json, sys
dev = json.load(open(sys.argv[1]))["device"]
gpus = json.load(open(sys.argv[2]))["gpus"]
print("bench device:", {k: dev.get(k) for k in ("name", "compute_capability", "sm_count", "l2_bytes",
                                                 "total_mem_bytes", "pci_bus_id")})
if not dev.get("available") or not gpus:
    print("FAIL bench device vs info: bench", dev.get("why"), "/ info gpus", len(gpus))
    sys.exit(1)
g = gpus[0]
bad = [k for k in ("name", "compute_capability", "sm_count", "l2_bytes") if dev.get(k) != g.get(k)]
print(("FAIL" if bad else "PASS") + " bench device matches info's GPU 0" + (f": differs in {bad}" if bad else ""),
      {k: g.get(k) for k in ("name", "compute_capability", "sm_count", "l2_bytes")})
sys.exit(1 if bad else 0)
PY
[ $? = 0 ] || fail=1
exit $fail
