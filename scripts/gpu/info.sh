#!/usr/bin/env bash
# `gpuopt info` / `version` on the GPU machine (issue 2): runs the already-built ./build-h200/gpuopt
# against the real driver, compares with nvidia-smi and the H200's datasheet, and runs the
# NVML tests of test_gpu against the real library. Builds nothing. Writes under "$OUT/info" when
# OUT is set (else ./info-out). Takes a few seconds; changes no clocks, limits or modes.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build-h200}
BIN=$BUILD/gpuopt
DIR=${OUT:-./info-out}/info
mkdir -p "$DIR"
[ -x "$BIN" ] || { echo "info.sh: $BIN not found (run scripts/build_h200.sh here first)"; exit 1; }

"$BIN" info --verbose >"$DIR/info.txt" 2>"$DIR/info.err"; rc_info=$?
"$BIN" info --json >"$DIR/info.json" 2>>"$DIR/info.err"; rc_json=$?
"$BIN" info --env >"$DIR/env.txt" 2>>"$DIR/info.err"
"$BIN" version >"$DIR/version.txt" 2>&1; rc_ver=$?
"$BIN" version --json >"$DIR/version.json" 2>&1
# The newer cuDNN in PyTorch's venv, to show `version` reports what the loader finds.
CUDNN_VENV=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib
[ -d "$CUDNN_VENV" ] && LD_LIBRARY_PATH=$CUDNN_VENV "$BIN" version >"$DIR/version-venv-cudnn.txt" 2>&1
# No driver and an NVML lacking symbols must still exit 0 with one line.
GPUOPT_NVML_LIBRARY=/nonexistent "$BIN" info >"$DIR/info-no-nvml.txt" 2>&1; rc_nonvml=$?
GPUOPT_NVML_LIBRARY=libc.so.6 "$BIN" info >"$DIR/info-bad-nvml.txt" 2>&1; rc_badnvml=$?
nvidia-smi --query-gpu=name,uuid,pci.bus_id,memory.total,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,power.limit,clocks.max.sm,clocks.max.mem,driver_version,persistence_mode,mig.mode.current,compute_cap \
  --format=csv >"$DIR/nvidia-smi.csv" 2>&1 || true

# NVML tests that need no fake: ABI constants, the loader's error paths, spec table.
tests=skipped
if [ -x "$BUILD/tests/test_gpu" ]; then
  if GPUOPT_BIN=$BIN GPUOPT_TEST_SOURCE_DIR=$PWD timeout 120 "$BUILD/tests/test_gpu" \
       --gtest_filter='NvmlAbi.*:NvmlLoad.NoLibrary*:NvmlLoad.LibraryWithout*:SpecTable.*' >"$DIR/test_gpu.log" 2>&1; then
    tests=passed
  else
    tests="FAILED (see test_gpu.log)"
  fi
fi

# Checks against the datasheet, from the JSON (python3 is on the machine).
python3 - "$DIR/info.json" >"$DIR/checks.txt" 2>&1 <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
gpus = j.get("gpus", [])
print(f"driver {j['nvml']['driver_version']}, CUDA driver {j['nvml']['cuda_driver_version']}, "
      f"{len(gpus)} GPU(s); missing optional NVML symbols: {j['nvml']['missing_optional_symbols'] or 'none'}")
ok_all = True
for g in gpus:
    mem_gb = (g["memory"]["total_bytes"] or 0) / 1e9
    peaks = g["theoretical"]["peak_ops_per_s"]
    bw = g["theoretical"]["mem_bandwidth_bytes_per_s"] or 0
    checks = [
        ("name", g["name"], "H200" in (g["name"] or "")),
        ("SMs", g["sm_count"], g["sm_count"] == 132),
        ("memory GB", f"{mem_gb:.1f}", 139 <= mem_gb <= 152),
        ("compute capability", g["compute_capability"], g["compute_capability"] == "9.0"),
        ("PCIe max", f"gen {g['pcie']['max_gen']} x{g['pcie']['max_width']}",
         g["pcie"]["max_gen"] == 5 and g["pcie"]["max_width"] == 16),
        ("PCIe now", f"gen {g['pcie']['gen']} x{g['pcie']['width']}", True),  # idle links train down
        ("power limit W", g["power_limit_w"], g["power_limit_w"] is not None and abs(g["power_limit_w"] - 700) < 1),
        ("bus width", g["mem_bus_width_bits"], True),
        ("mem bandwidth TB/s", f"{bw/1e12:.2f}", 4.6e12 <= bw <= 5.1e12),
        ("FP32 TFLOP/s", f"{(peaks['fp32'] or 0)/1e12:.1f}", 60e12 <= (peaks["fp32"] or 0) <= 70e12),
        ("BF16 TFLOP/s @max clk", f"{(peaks['bf16'] or 0)/1e12:.0f}", 950e12 <= (peaks["bf16"] or 0) <= 1100e12),
        ("FP8 TFLOP/s @max clk", f"{(peaks['fp8'] or 0)/1e12:.0f}", 1900e12 <= (peaks["fp8"] or 0) <= 2200e12),
        ("SM source", g["sm_count_source"], g["sm_count_source"] == "cuda"),
    ]
    print(f"GPU {g['index']} {g['pci_bus_id']}: n/a values: {len(g['unavailable'])}")
    for name, value, ok in checks:
        ok_all &= ok
        print(f"  {'ok ' if ok else 'BAD'}  {name:24s} {value}")
print("datasheet checks:", "all ok" if ok_all else "SOME FAILED")
EOF

echo "== gpuopt info on $(hostname): info exit $rc_info, --json exit $rc_json, version exit $rc_ver," \
     "no-NVML exit $rc_nonvml, bad-NVML exit $rc_badnvml; tests: $tests; logs in $DIR =="
grep -E "none usable|NVML" "$DIR/info-no-nvml.txt" "$DIR/info-bad-nvml.txt" | cut -c1-160
cat "$DIR/version.txt"
cat "$DIR/checks.txt"
[ $rc_info -eq 0 ] && [ $rc_json -eq 0 ] && [ $rc_nonvml -eq 0 ] && [ $rc_badnvml -eq 0 ] && grep -q "all ok" "$DIR/checks.txt"
