#!/usr/bin/env bash
# `gpuopt tune` and `gpuopt profile` on the H200 (docs/tune.md, docs/profile.md):
#   1. test_tune (choice, config, summary, trace) and the measured ceilings (bench memory + compute)
#   2. tune ResNet-50 fp16, online (real serve + perf), under a 25 ms p99 budget: the chosen
#      config, its throughput and p99 next to the default config's at the same concurrency, and
#      how long tune took
#   3. profile BERT-base fp16 batch 32 seq 128: top-10 nodes against the roofline, host-gap
#      share, the trace (a GPU track with every node), how long it took
#   4. Nsight Compute selects kernels by gpuopt's NVTX range of BERT's slowest node
#      (--nvtx --nvtx-include "gpuopt:<node>/"): the kernel names it finds in that range
# Needs GPU_CHECK_TIMEOUT=1200 under scripts/gpu_check.sh (tune alone takes a few minutes;
# TUNE_BUDGET_S caps its --time-budget, default 600).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=build-h200/bin
G=$B/gpuopt
D=${OUT:-./perf-out}/profile
mkdir -p "$D"
PY=python3
M=/tmp/models
$PY tools/models/make_models.py --out $M resnet50_full bert_base >/dev/null || exit 1

echo "== test_tune =="
"$B/test_tune" >"$D/test_tune.txt" 2>&1; echo "exit $?"; grep -E "^\[  (PASSED|FAILED) " "$D/test_tune.txt"
echo "== test_cuda: per-node profile times (trace origin, order) =="
"$B/test_cuda" --gtest_filter='CudaTraceTimes.*:CudaGraphs.PerNodeProfile*' >"$D/test_cuda_trace.txt" 2>&1; echo "exit $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$D/test_cuda_trace.txt"

echo "== ceilings (gpuopt bench memory, compute) =="
"$G" bench memory --json >"$D/bench_memory.json" 2>"$D/bench.err"; echo "bench memory exit $?"
"$G" bench compute --json >"$D/bench_compute.json" 2>>"$D/bench.err"; echo "bench compute exit $?"

echo "== tune ResNet-50 fp16 (online) =="
t0=$(date +%s.%N)
"$G" tune $M/resnet50_full.onnx -m resnet50 --device cuda --precision fp16 --mode online --max-batch 512 \
  --instances 1 2 --max-queue-delay-us 0 500 --latency-budget-ms 25 --measurement-ms 1000 --max-concurrency 256 \
  --time-budget "${TUNE_BUDGET_S:-600}" --output-dir "$D/tune_resnet50" >"$D/tune_resnet50.txt" 2>"$D/tune_resnet50.err"
echo "tune exit $? in $($PY -c "print(round($(date +%s.%N) - $t0, 1))") s"
tail -n 40 "$D/tune_resnet50.txt"
cat "$D/tune_resnet50/repository/resnet50/config.pbtxt" 2>/dev/null
# The default config (no config.pbtxt: max_batch_size 4, 1 instance, no queue delay) at the
# chosen point's concurrency, served the same way.
conc=$($PY -c "import json; j=json.load(open('$D/tune_resnet50/tune.json')); print(j['points'][j['chosen']].get('concurrency', 1) if j['chosen'] is not None else 1)")
rm -rf "$D/default_repo"; mkdir -p "$D/default_repo/resnet50/1"
ln -sf $M/resnet50_full.onnx "$D/default_repo/resnet50/1/model.onnx"
serve_perf() {  # $1 repository, $2 label
  "$G" serve --model-repository "$1" --precision fp16 --http-address 127.0.0.1 --http-port 0 --metrics-port 0 \
    >"$D/serve_$2.log" 2>&1 &
  local pid=$! port=""
  for _ in $(seq 600); do
    port=$(sed -n 's/.*Started HTTPService at [0-9.]*:\([0-9]*\).*/\1/p' "$D/serve_$2.log" | head -1)
    [ -n "$port" ] && $PY -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/v2/health/ready', timeout=2)" \
      2>/dev/null && break
    sleep 0.2
  done
  "$G" perf -m resnet50 -u "127.0.0.1:$port" --concurrency-range "$conc" -p 2000 --json >"$D/perf_$2.json" 2>>"$D/serve_$2.log"
  kill $pid; wait $pid 2>/dev/null
  $PY -c "import json; l=json.load(open('$D/perf_$2.json'))['results'][0]; print('%-8s concurrency %d: %.0f infer/s, p50 %.2f ms, p99 %.2f ms' % ('$2', l['concurrency'], l['throughput_infer_per_s'], l['p50_us']/1e3, l['p99_us']/1e3))"
}
if [ -f "$D/tune_resnet50/repository/resnet50/config.pbtxt" ]; then
  serve_perf "$D/tune_resnet50/repository" chosen
else
  echo "no config chosen: see $D/tune_resnet50.txt"
fi
serve_perf "$D/default_repo" default

echo "== profile BERT-base fp16, batch 32, seq 128 =="
t0=$(date +%s.%N)
"$G" profile $M/bert_base.onnx --device cuda --precision fp16 --batch 32 --dim sequence=128 --runs 3 --top 10 \
  --ceilings "$D/bench_memory.json" --ceilings "$D/bench_compute.json" --trace "$D/bert_base.trace.json" \
  >"$D/profile_bert.txt" 2>"$D/profile_bert.err"
echo "profile exit $? in $($PY -c "print(round($(date +%s.%N) - $t0, 1))") s"
cat "$D/profile_bert.txt"
"$G" profile $M/bert_base.onnx --device cuda --precision fp16 --batch 32 --dim sequence=128 --runs 3 --top 10 \
  --ceilings "$D/bench_memory.json" --ceilings "$D/bench_compute.json" --no-trace --json >"$D/profile_bert.json" 2>/dev/null
$PY - "$D/bert_base.trace.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
ev = [e for e in t["traceEvents"] if e["ph"] == "X"]
tracks = {e["tid"]: e["args"]["name"] for e in t["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
gpu = [e for e in ev if e["cat"] == "kernel"]
launch = [e for e in ev if e["cat"] in ("launch", "node cpu")]
print("trace tracks:", sorted(tracks.values()), "| events:", len(ev), "| device nodes:", len(gpu), "| launches:", len(launch))
early = [e for e in gpu if e["ts"] + 1e-3 < min(l["ts"] for l in launch if l["name"] == e["name"] and l["args"]["run"] == e["args"]["run"])]
print("device nodes starting before their launch:", len(early))
EOF

echo "== Nsight Compute: kernels inside gpuopt's NVTX range of BERT's slowest node =="
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -z "$NCU" ]; then echo "ncu not found"; exit 0; fi
node=$($PY -c "import json; print(json.load(open('$D/profile_bert.json'))['top'][0]['node'])")
range="gpuopt:${node//\//.}"
echo "node '$node' -> NVTX range '$range'"
for filter in "$range/" "regex:^${range//./\\.}\$/"; do
  "$NCU" --nvtx --nvtx-include "$filter" --launch-count 4 --section LaunchStats \
    "$G" run $M/bert_base.onnx --device cuda --precision fp16 --batch 8 --dim sequence=128 --random-inputs \
    --iterations 1 --warmup 0 --no-cuda-graphs >"$D/ncu.txt" 2>&1
  rc=$?
  n=$(grep -c '==PROF== Profiling' "$D/ncu.txt")
  echo "ncu --nvtx-include '$filter': exit $rc, $n kernel launch(es) profiled"
  [ "$n" -gt 0 ] && break
done
grep '==PROF== Profiling' "$D/ncu.txt" | sed 's/.*Profiling "\([^"]*\)".*/kernel: \1/' | sort | uniq -c | head
grep -m3 -i "nvtx\|$range" "$D/ncu.txt" || true
