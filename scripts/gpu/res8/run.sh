#!/usr/bin/env bash
# Int8 ResNet-50 bottleneck conv3 (1x1 stride 1, no ReLU) with the residual add fused into the
# epilogue, on the H200: can one CUTLASS 3 sm_90a int8 TN GEMM (A = activations [N*H*W, C], B =
# weights [Cout, C], D = int8 [N*H*W, Cout]) whose custom Sm90EVT epilogue also reads the residual Z
# as its int8 C source (conv3's int8 code c = sat(rne((acc * alpha[n] + bias[n]) / y_scale)), then
# D = sat(rne(act(c * y_scale + Z * z_scale) / out_scale))) beat cuDNN's conv3 + gpuopt's separate
# Int8Add (today at b256: 52 int8 convs 3.59 ms, the 16 Int8Add 1.30 ms)? bench.cu -DCFG=0..3 are four
# tile / cluster / schedule configurations (CFGS="0 1 2 3 4" adds a 128x128x64 ping-pong one); each
# binary first checks its residual (ReLU off / on) and plain kernels against a naive CUDA kernel
# (same float math) at batch 2, then times the 4 distinct conv3 shapes (x3/x4/x6/x3 = the 16 layers)
# at NB=256 and NB=32 (NS=...): per shape ms (median of 20 after a ~10 ms spin), GB/s over
# A + B + Z + D, TOP/s; the "plain" rows are the same GEMM without the residual (D = c), to set
# beside cuDNN's conv3 (scripts/gpu/conv8: its 1x1 C->4C rows). At the end: per configuration the
# multiplicity-weighted totals, and the best configuration per shape, residual and plain.
# Standalone: needs nvcc and the CUTLASS headers (CUTLASS_INCLUDE, else the copy in the sysroot that
# scripts/make_sysroot.sh packs, .device/sys/sysroot.tgz). Run from the repository root on the GPU
# machine:   bash scripts/gpu/res8/run.sh      (WORK=/tmp/res8 by default)
set -uo pipefail
source scripts/gpu/cutlass_bench.inc res8
CFGS=${CFGS:-0 1 2 3}
NS=${NS:-256 32}
rm -f "$W"/b* "$W"/out* "$W"/log*
build() {  # cfg ("3f": CFG 3 with -DFASTEPI=1, the divisions as reciprocal products)
  local extra=; [ "${1%f}" != "$1" ] && extra=-DFASTEPI=1
  nvcc -std=c++17 -O3 -DNDEBUG -arch=sm_90a --expt-relaxed-constexpr -I"$INC" -I scripts/gpu/conv8/include -DCFG="${1%f}" $extra "$D/bench.cu" \
    -o "$W/b$1" >"$W/log$1" 2>&1 || { echo "CFG $1: build failed: $(grep -m3 error "$W/log$1")"; rm -f "$W/b$1"; }
}
for c in $CFGS; do build "$c" & done
wait
echo "build $(( $(date +%s)-T0 )) s"
for c in $CFGS; do
  [ -x "$W/b$c" ] || continue
  for n in $NS; do
    timeout 120 "$W/b$c" "$n" 2>&1 | tee -a "$W/out$c"
    rc=${PIPESTATUS[0]}; [ "$rc" = 0 ] || echo "b$c $n exited with $rc (2: a correctness check failed; 124: timeout; partial results above)"
  done
done

# Summary from the rows (tag var NB idx M K N mult ms GB/s TOP/s) and TOTAL lines.
cat "$W"/out* 2>/dev/null | awk -v NS="$NS" -v CFGS="$CFGS" '
  $1 ~ /^cfg/ && NF >= 11 && $3 ~ /^[0-9]+$/ {
    if ($9 + 0 <= 0) next;
    k = $2 SUBSEP $3 SUBSEP $4; mult[k] = $8; shape[k] = sprintf("M%-8d K%-4d N%-5d", $5, $6, $7); if ($4 + 1 > nsh) nsh = $4 + 1;
    if (!(k in best) || $9 < best[k]) { best[k] = $9; bcfg[k] = $1 }
  }
  $1 == "TOTAL" { total[$2, $3, $4] = $5; if ($0 ~ /partial/) partial[$2, $3, $4] = 1 }
  END {
    nn = split(NS, ns, " "); nc = split(CFGS, cs, " ");
    for (j = 1; j <= nn; ++j) { n = ns[j];
      printf "\n== NB=%d per shape, best configuration (ms; x = multiplicity)\n", n;
      printf "%3s %-26s %2s %10s %-5s %10s %-5s %8s\n", "idx", "shape", "x", "res", "cfg", "plain", "cfg", "res-plain";
      for (v = 1; v <= 2; ++v) bt[v] = 0;
      miss = 0;
      for (i = 0; i < nsh; ++i) {
        kr = "res" SUBSEP n SUBSEP i; kp = "plain" SUBSEP n SUBSEP i;
        r = (kr in best) ? best[kr] : -1; p = (kp in best) ? best[kp] : -1; x = (kr in mult) ? mult[kr] : mult[kp];
        if (r > 0) bt[1] += r * x; else miss = 1;
        if (p > 0) bt[2] += p * x; else miss = 1;
        printf "%3d %-26s %2d %10.4f %-5s %10.4f %-5s %8s\n", i, (kr in shape) ? shape[kr] : shape[kp], x, r, (kr in bcfg) ? bcfg[kr] : "-",
               p, (kp in bcfg) ? bcfg[kp] : "-", (r > 0 && p > 0) ? sprintf("%.4f", r - p) : "-";
      }
      printf "== NB=%d weighted totals over the 16 conv3 layers (ms), residual | plain:\n", n;
      for (c = 1; c <= nc; ++c) { t = "cfg" cs[c];
        printf "   %-5s res %s%s | plain %s%s\n", t, ((t, "res", n) in total) ? sprintf("%.4f", total[t, "res", n]) : "-",
               ((t, "res", n) in partial) ? " (partial)" : "", ((t, "plain", n) in total) ? sprintf("%.4f", total[t, "plain", n]) : "-",
               ((t, "plain", n) in partial) ? " (partial)" : "" }
      printf "   best per shape: res %.4f | plain %.4f%s   (fused add costs res - plain = %.4f ms)\n", bt[1], bt[2],
             miss ? " (some shapes missing)" : "", bt[1] - bt[2];
    }
  }'
grep -h "check" "$W"/out* 2>/dev/null | grep -c FAIL | sed "s/^/correctness lines with FAIL: /"
echo "(compare: today at b256 the 16 Int8Add take 1.30 ms on top of cuDNN conv3; see scripts/gpu/conv8 for cuDNN's 1x1 C->4C rows)"
echo "total $(( $(date +%s)-T0 )) s"
