#!/usr/bin/env bash
# Int8 convolutions at ResNet-50's conv shapes (torchvision v1.5, 224x224, NHWC, the 7x7 stem left
# out: 52 convs, 22 distinct shapes) on the H200, at N=256 and N=32 (NS=...): can a CUTLASS 3 sm_90a
# implicit-GEMM int8 fprop (TMA im2col, epilogue inside: per-output-channel float scale, float bias,
# ReLU or none, RNE + saturate to int8 NHWC) beat cuDNN's int8 convs? bench.cu -DCFG=0..5 are six
# tile / cluster / stage configurations (6: 128x256 c2x1, spills; CFGS="0 6" to add it), each
# checked first against a naive CUDA kernel on small 1x1 / 3x3 s1 / 3x3 s2 / 1x1 s2 shapes;
# -DCFG=-1 is cuDNN's legacy int8 API (cudnnConvolutionBiasActivationForward, fastest algorithm);
# ref.py is the fp16 baseline (torch F.conv2d channels_last, cuDNN). Per shape: ms (median of 20)
# and TOP/s; per configuration the multiplicity-weighted total; at the end a per-shape table
# (best CUTLASS config vs cuDNN int8 vs torch fp16) and a summary (goal: 65k img/s = 3.9 ms per
# b256 batch for the whole network; today int8 6.1 ms, fp16 5.7 ms).
# Standalone: needs nvcc, the CUTLASS headers (CUTLASS_INCLUDE, or the sysroot's copy that
# scripts/make_sysroot.sh packs), cuDNN 9 (CUDNN_HOME, /usr/local/cuda, /usr, or the nvidia-cudnn
# wheel) and torch. Run from the repository root on the GPU machine:
#   bash scripts/gpu/conv8/run.sh        (about 3-4 minutes on 16 cores; WORK=/tmp/conv8 by default)
set -uo pipefail
source scripts/gpu/cutlass_bench.inc conv8
rm -f "$W"/out* "$W"/ref.out
CFGS=${CFGS:-0 1 2 3 4 5}
NS=${NS:-256 32}

# cuDNN: header dir and a libcudnn.so* beside it; the nvidia-cudnn wheel as the fallback.
CUDNN_INC=; CUDNN_LIB=
for p in ${CUDNN_HOME:-} /usr/local/cuda /usr $(python3 -c 'import nvidia.cudnn,os;print(os.path.dirname(nvidia.cudnn.__file__))' 2>/dev/null); do
  for i in "$p/include" "$p/include/x86_64-linux-gnu"; do [ -f "$i/cudnn.h" ] || continue
    for l in "$p/lib" "$p/lib64" "$p/lib/x86_64-linux-gnu"; do
      if ls "$l"/libcudnn.so* >/dev/null 2>&1; then CUDNN_INC=$i; CUDNN_LIB=$l; break 3; fi
    done
  done
done
if [ -n "$CUDNN_LIB" ]; then
  LCUDNN=-lcudnn; [ -e "$CUDNN_LIB/libcudnn.so" ] || LCUDNN=-l:$(basename "$(ls "$CUDNN_LIB"/libcudnn.so.* | head -1)")
  echo "cuDNN: $CUDNN_INC, $CUDNN_LIB ($LCUDNN)"
else
  echo "cuDNN not found (set CUDNN_HOME): no cuDNN int8 baseline"
fi

build() {  # name, extra flags
  nvcc -std=c++17 -O3 -DNDEBUG -arch=sm_90a --expt-relaxed-constexpr -I"$INC" -I"$D/include" "${@:2}" "$D/bench.cu" -o "$W/b$1" \
    >"$W/log$1" 2>&1 || { echo "CFG $1: build failed: $(grep -m3 error "$W/log$1")"; rm -f "$W/b$1"; }
}
rm -f "$W"/b*
for c in $CFGS; do build "$c" -DCFG="$c" & done
[ -n "$CUDNN_LIB" ] && build cudnn -DCFG=-1 -I"$CUDNN_INC" -L"$CUDNN_LIB" "$LCUDNN" -Xlinker -rpath,"$CUDNN_LIB" \
  -Xcompiler -Wno-deprecated-declarations &
timeout 240 python3 "$D/ref.py" $NS 2>&1 | grep -v Warn | tee "$W/ref.out"
wait
echo "build $(( $(date +%s)-T0 )) s (ref.py ran meanwhile)"
for c in cudnn $CFGS; do
  [ -x "$W/b$c" ] || continue
  timeout 240 "$W/b$c" $NS 2>&1 | tee "$W/out$c"
  rc=${PIPESTATUS[0]}; [ "$rc" = 0 ] || echo "b$c exited with $rc (partial results above)"
done

# Per-shape table and summary from the rows (tag N idx H W C K R S st relu mult ms TOP/s).
TAGS="$(for c in $CFGS; do printf 'cfg%s ' "$c"; done)cudnn8 torch16"
cat "$W"/out* "$W/ref.out" 2>/dev/null | awk -v NS="$NS" -v TAGS="$TAGS" '
  $1 != "TOTAL" && $1 !~ /^#/ && NF >= 14 && $2 ~ /^[0-9]+$/ && $13 + 0 > 0 {
    n = $2; i = $3; key = n SUBSEP i; shape[key] = sprintf("%3dx%-3d C%-4d K%-4d %dx%d s%d%s", $4, $5, $6, $7, $8, $9, $10, $11 ? " relu" : "");
    mult[key] = $12; if (i + 1 > nsh) nsh = i + 1;
    if ($1 ~ /^cfg/) { if (!(key in best) || $13 < best[key]) { best[key] = $13; bcfg[key] = $1 } }
    else ms[$1, key] = $13
  }
  $1 == "TOTAL" { total[$2, $3] = $4; if ($0 ~ /partial/) partial[$2, $3] = 1 }
  END {
    nn = split(NS, ns, " "); nt = split(TAGS, tg, " ");
    for (j = 1; j <= nn; ++j) { n = ns[j]; bmiss = 0;
      printf "\n== N=%d per shape: best CUTLASS configuration vs cuDNN int8 vs torch fp16 (ms; x = multiplicity)\n", n;
      printf "%3s %-34s %2s %9s %-5s %9s %9s %7s\n", "idx", "shape", "x", "cutlass", "cfg", "cudnn8", "torch16", "c/cudnn";
      bt = 0;
      for (i = 0; i < nsh; ++i) { k = n SUBSEP i; if (!(k in mult)) continue;
        c = (k in best) ? best[k] : -1; d = (("cudnn8", k) in ms) ? ms["cudnn8", k] : -1; tm = (("torch16", k) in ms) ? ms["torch16", k] : -1;
        if (c > 0) bt += c * mult[k]; else bmiss = 1;
        printf "%3d %-34s %2d %9.4f %-5s %9.4f %9.4f %7s\n", i, shape[k], mult[k], c, (k in bcfg) ? bcfg[k] : "-", d, tm,
               (c > 0 && d > 0) ? sprintf("%.2f", c / d) : "-" }
      printf "== N=%d weighted totals over the 52 convs (ms):", n;
      for (t = 1; t <= nt; ++t) if ((tg[t], n) in total) printf " %s %.3f%s |", tg[t], total[tg[t], n], ((tg[t], n) in partial) ? " (partial)" : "";
      printf " best CUTLASS per shape %.3f%s\n", bt, bmiss ? " (some shapes missing)" : "";
    }
  }'
echo "(goal: 65k img/s = 3.9 ms per b256 batch for the whole network; stem, pooling, adds and FC are not in these totals)"
echo "total $(( $(date +%s)-T0 )) s"
