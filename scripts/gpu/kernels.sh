#!/usr/bin/env bash
# Where a run's GPU time goes, kernel by kernel (Nsight Compute): each model of MODELS (exported by
# compare.py, legacy exporter) at batch BATCH in fp16, node by node (no CUDA graph, so every
# kernel is its own launch), every kernel's gpu__time_duration over RUNS runs, summed per kernel
# name and divided by RUNS. Clocks are left as they are (--clock-control none), so the figures are
# comparable with the device times of compare.py; their sum is the GPU's busy time per run.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
G=${GPUOPT_BIN:-build-h200/bin/gpuopt}
D=${OUT:-./perf-out}/kernels
M=/tmp/compare-models
mkdir -p "$D" "$M"
B=${BATCH:-32}
RUNS=2
# Export (and time, for the device figure beside the kernel sum) through compare.py.
MODELS=${MODELS:-bert_base,vit_b_16,gpt2} BATCHES=$B EXPORTERS=legacy RUNNERS=gpuopt OUT="$D" \
  bash scripts/gpu/compare.sh > "$D/compare.log" 2>&1
grep -E "gpuopt" "$D/compare.log" | tail -n 8
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
for f in "$M"/*_legacy.onnx; do
  m=$(basename "$f" _legacy.onnx)
  case ",${MODELS:-bert_base,vit_b_16,gpt2}," in *",$m,"*) ;; *) continue ;; esac
  # The first run builds plans (and autotunes); RUNS runs after it are counted.
  "$NCU" --metrics gpu__time_duration.sum --csv --print-units base --clock-control none --cache-control none \
    --launch-skip-before-match 0 "$G" run "$f" --device cuda --precision fp16 --batch "$B" --random-inputs \
    --iterations "$RUNS" --warmup 1 --no-cuda-graphs > "$D/ncu_${m}_b$B.csv" 2> "$D/ncu_${m}_b$B.err"
  python3 - "$D/ncu_${m}_b$B.csv" "$m" "$B" "$RUNS" <<'PY'
import csv, collections, io, re, sys
path, model, batch, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
text = open(path, errors="replace").read()
start = text.find('"ID"')
if start < 0:
    print(f"{model} b{batch}: no ncu records:", text[-400:]); sys.exit(0)
rows = list(csv.DictReader(io.StringIO(text[start:])))
ns = [(r["Kernel Name"], float(r["Metric Value"])) for r in rows if r.get("Metric Name") == "gpu__time_duration.sum"]
# The warm-up run comes first: keep the last `runs` thirds (each run launches the same kernels).
per_run = len(ns) // (runs + 1)
ns = ns[len(ns) - per_run * runs:]
def short(n):
    n = re.sub(r"\(.*", "", n)
    n = re.sub(r"<.*", "", n)
    return n[:70]
agg = collections.defaultdict(lambda: [0.0, 0])
for n, t in ns:
    agg[short(n)][0] += t / runs
    agg[short(n)][1] += 1
tot = sum(v[0] for v in agg.values())
print(f"== {model} b{batch}: {per_run} kernels per run, {tot/1e6:.3f} ms GPU busy per run")
for n, (t, c) in sorted(agg.items(), key=lambda kv: -kv[1][0])[:18]:
    print(f"  {t/1e3:9.1f} us  {100*t/tot:5.1f}%  x{c//runs:<4d} {n}")
PY
done
