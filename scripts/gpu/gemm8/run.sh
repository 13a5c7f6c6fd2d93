#!/usr/bin/env bash
# Int8 GEMMs at BERT-base b256 shapes (M = 32768 tokens) on the H200: CUTLASS 3 sm_90a kernels
# with Int8Gemm's whole epilogue (per-column dequantize, bias, GELU, f16 or int8 out) in eight
# tile / cluster / schedule configurations (bench.cu, -DCFG=0..7; "3f": CFG 3 with a tanh.approx
# GELU), beside PyTorch's cuBLASLt int8 (s32 out), f16 and fp8 (f16 out) GEMMs (ref.py).
# Standalone: needs nvcc, the CUTLASS headers (CUTLASS_INCLUDE, or the sysroot's copy that
# scripts/make_sysroot.sh packs) and torch. Run from the repository root on the GPU machine.
set -uo pipefail
source scripts/gpu/cutlass_bench.inc gemm8
CFGS=${CFGS:-0 1 2 3 4 5 6 7}
build() {  # name, extra flags
  nvcc -std=c++17 -O3 -DNDEBUG -arch=sm_90a --expt-relaxed-constexpr -I"$INC" "${@:2}" "$D/bench.cu" -o "$W/b$1" \
    >"$W/log$1" 2>&1 || echo "CFG $1: build failed: $(grep -m3 error "$W/log$1")"
}
for c in $CFGS; do build "$c" -DCFG="$c" & done
build 3f -DCFG=3 -DFASTGELU=1 &
python3 "$D/ref.py" 2>&1 | grep -v Warn
wait
echo "build $(( $(date +%s)-T0 )) s"
for c in $CFGS 3f; do [ -x "$W/b$c" ] && "$W/b$c"; done
