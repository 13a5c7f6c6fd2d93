#!/usr/bin/env bash
# `gpuopt serve` on the H200 (issue 7). Builds nothing: uses the binaries in build-h200/.
#  1. tiny add_sub model on CPU instances and on GPU instances: max throughput, p50/p99 at several
#     concurrencies, overhead per request: client latency minus server queue + compute (perf_analyzer's
#     definition) and the server's own share (its request duration minus queue + compute);
#  2. ResNet-50 FP16 on the GPU through the server vs `gpuopt run` at the same batch size;
#  3. SIGTERM under load: exit time and exit code.
# Logs and JSON under $OUT/server (default ./server-out/server); a short table is printed last.
set -uo pipefail
cd "$(dirname "$0")/../.."
G=build-h200/bin/gpuopt
[ -x "$G" ] || G=build-h200/gpuopt
D=${OUT:-./server-out}/server
mkdir -p "$D"
PY=${PY:-python3}
R=$(mktemp -d /tmp/gpuopt-serve-XXXX)
PORT=${PORT:-18000}
MPORT=${MPORT:-18002}
CORES=$(nproc)

echo "== model repository in $R =="
$PY - "$R" "$CORES" <<'EOF'
import os, sys
sys.path.insert(0, "tests/server")
import server_harness as H
root, cores = sys.argv[1], int(sys.argv[2])
# tiny_cpu0: no queue delay, for the per-request overhead at concurrency 1.
for name, kind, count, delay in [("tiny_cpu", "KIND_CPU", max(1, cores // 2), 50), ("tiny_cpu0", "KIND_CPU", 2, 0),
                                 ("tiny_gpu", "KIND_GPU", 2, 50)]:
    H.add_sub_model(os.path.join(root, name, "1", "model.onnx"))
    with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
        f.write(f'max_batch_size: 64\ndynamic_batching {{ max_queue_delay_microseconds: {delay} }}\n'
                f'instance_group {{ count: {count} kind: {kind} }}\n')
EOF
$PY tools/models/make_models.py --out "$R/src" resnet50_full >"$D/make_models.log" 2>&1
if [ -f "$R/src/resnet50_full.onnx" ]; then
  mkdir -p "$R/resnet50/1" && cp "$R/src/resnet50_full.onnx" "$R/resnet50/1/model.onnx"
  $PY - "$R/resnet50" <<'EOF'
import os, sys, onnx
m = onnx.load(os.path.join(sys.argv[1], "1", "model.onnx"), load_external_data=False)
d0 = m.graph.input[0].type.tensor_type.shape.dim[0]
batching = d0.dim_param != "" or d0.dim_value <= 0
cfg = 'parameters { key: "gpuopt.precision" value: { string_value: "fp16" } }\ninstance_group { count: 2 kind: KIND_GPU }\n'
cfg += ("max_batch_size: 32\ndynamic_batching { preferred_batch_size: [8, 16, 32] max_queue_delay_microseconds: 500 }\n"
        if batching else "max_batch_size: 0\n")
open(os.path.join(sys.argv[1], "config.pbtxt"), "w").write(cfg)
print("resnet50 batching:", batching)
EOF
fi
rm -rf "$R/src"

"$G" serve --model-repository "$R" --http-address 127.0.0.1 --http-port $PORT --metrics-port $MPORT --grpc-port 0 \
  --exit-timeout-secs 30 >"$D/serve.log" 2>&1 &
SPID=$!
for _ in $(seq 1 600); do
  curl -sf "127.0.0.1:$PORT/v2/health/ready" >/dev/null && break
  kill -0 $SPID 2>/dev/null || break
  sleep 0.5
done
cat "$D/serve.log"
if ! curl -sf "127.0.0.1:$PORT/v2/health/ready" >/dev/null; then echo "server did not become ready"; kill $SPID; exit 1; fi

perf() {  # name out.json args...
  local m=$1 out=$2; shift 2
  echo "== perf $m $* =="
  timeout 90 "$G" perf -m "$m" -u 127.0.0.1:$PORT -p 1500 -r 5 --json "$@" >"$D/$out" 2>"$D/$out.err"
  echo "exit $?"
}
perf tiny_cpu0 tiny_cpu0.json --concurrency-range 1:1
perf tiny_cpu0 tiny_cpu0_json.json --concurrency-range 1:1 --json-data
perf tiny_cpu tiny_cpu.json --concurrency-range 1:1
perf tiny_cpu tiny_cpu_load.json --concurrency-range 64:256:96
perf tiny_gpu tiny_gpu.json --concurrency-range 1:1
perf tiny_gpu tiny_gpu_load.json --concurrency-range 64:128:64
if [ -d "$R/resnet50" ]; then
  perf resnet50 resnet50.json -b 8 --concurrency-range 1:4
  perf resnet50 resnet50_b1.json -b 1 --concurrency-range 1:64:21
  echo "== gpuopt run resnet50 fp16 batch 8 =="
  timeout 120 "$G" run "$R/resnet50/1/model.onnx" --device cuda --precision fp16 --batch 8 --random-inputs --iterations 50 \
    --warmup 5 --json >"$D/run_resnet50.json" 2>"$D/run_resnet50.err"
  echo "exit $?"; tail -3 "$D/run_resnet50.err"
fi
curl -s "127.0.0.1:$MPORT/metrics" >"$D/metrics.txt"
grep -E '^nv_gpu_(utilization|memory_used_bytes)' "$D/metrics.txt" | head -4
# The batcher (issue 14): per-instance executions and busy time, the most instances seen running at
# once (2 = the two GPU instances overlapped), batches staged while both were busy.
grep -E '^gpuopt_(instance_(execution_count|busy_us|concurrency_max)|batches_staged_ahead)\{model="resnet50"' "$D/metrics.txt"

echo "== SIGTERM under load =="
"$G" perf -m tiny_gpu -u 127.0.0.1:$PORT -p 5000 -r 3 --concurrency-range 32 --json >"$D/sigterm_perf.json" 2>&1 &
LPID=$!
sleep 4
T0=$(date +%s.%N)
kill -TERM $SPID
wait $SPID
CODE=$?
T1=$(date +%s.%N)
wait $LPID
echo "server exit code $CODE after $(awk -v a="$T0" -v b="$T1" 'BEGIN { printf "%.2f", b - a }') s"
tail -2 "$D/serve.log"
rm -rf "$R"

echo "== summary =="
$PY - "$D" <<'EOF'
import json, os, sys
d = sys.argv[1]
def load(n):
    try:
        return json.load(open(os.path.join(d, n)))
    except Exception:
        return None
rows = []
for name in ["tiny_cpu0", "tiny_cpu0_json", "tiny_cpu", "tiny_cpu_load", "tiny_gpu", "tiny_gpu_load", "resnet50",
             "resnet50_b1"]:
    j = load(name + ".json")
    if not j:
        rows.append((name, "-", "-", "-", "-", "-", "-", "-")); continue
    for r in j["results"]:
        comp = r["server_compute_input_us"] + r["server_compute_infer_us"] + r["server_compute_output_us"]
        rows.append((f'{name} b{j["batch_size"]}', r.get("concurrency", r.get("request_rate")),
                     f'{r["throughput_infer_per_s"]:.0f}', f'{r["p50_us"]:.0f}', f'{r["p99_us"]:.0f}',
                     f'{comp:.0f}', f'{r["overhead_us"]:.1f}', f'{r.get("server_overhead_us", 0):.1f}'))
print(f'{"model":18} {"conc":>5} {"infer/s":>10} {"p50 us":>9} {"p99 us":>9} {"compute us":>11} '
      f'{"overhead us":>12} {"server ovh us":>14}')
for r in rows:
    print(f"{r[0]:18} {str(r[1]):>5} {r[2]:>10} {r[3]:>9} {r[4]:>9} {r[5]:>11} {r[6]:>12} {r[7]:>14}")
run = load("run_resnet50.json")
srv = load("resnet50.json")
if run and srv:
    # The server runs 2 instances; compare per-request latency at concurrency 1 and the best
    # throughput with what `gpuopt run` does alone at the same batch size.
    r1 = srv["results"][0]
    best = max(r["throughput_infer_per_s"] for r in srv["results"])
    med = run["latency_ms"]["median"]
    print(f'resnet50 fp16 b8: gpuopt run median {med:.2f} ms = {run["throughput_per_s"]:.0f} img/s; '
          f'server conc 1 p50 {r1["p50_us"] / 1000:.2f} ms ({r1["p50_us"] / 1000 / med:.2f}x), '
          f'best {best:.0f} infer/s ({best / run["throughput_per_s"]:.2f}x of run)')
elif run:
    print("gpuopt run resnet50 fp16 b8:", json.dumps(run.get("latency_ms", run))[:200])
EOF
# One file back instead of many (the device tool returns a limited number of files).
tar czf "$D.tgz" -C "$(dirname "$D")" "$(basename "$D")" && rm -rf "$D"
