#!/usr/bin/env bash
# Front-end cost of `gpuopt serve` with a tiny engine: two gpuopt binaries (before, after) serve the
# same repository in turn; `gpuopt perf` drives each over HTTP and gRPC at two concurrencies with
# batch-1 requests. Per line: throughput, the server's queue+compute and its own time per request
# (statistics extension), and the server's CPU time per request (/proc utime+stime over the run,
# divided by the successes the statistics counted).
#
#   scripts/serve_ab.sh OLD/gpuopt build/gpuopt            # models: add (16 floats), big (393 KB out)
#   ROUNDS=3 CONC="64 256" MODELS=add scripts/serve_ab.sh A B
set -euo pipefail
A=${1:?usage: serve_ab.sh GPUOPT_BEFORE GPUOPT_AFTER}
B=${2:?usage: serve_ab.sh GPUOPT_BEFORE GPUOPT_AFTER}
ROUNDS=${ROUNDS:-1}
CONC=${CONC:-64 256}
MODELS=${MODELS:-add big}
PY=${PYTHON:-$(dirname "$0")/../.venv/bin/python}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
"$PY" - "$DIR" <<'EOF'
import os, sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
root = sys.argv[1]
def save(name, nodes, ins, outs, inits=()):
    g = helper.make_graph(nodes, name, ins, outs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    os.makedirs(f"{root}/{name}/1")
    onnx.save(m, f"{root}/{name}/1/model.onnx")
    with open(f"{root}/{name}/config.pbtxt", "w") as f:
        f.write(f'name: "{name}"\nmax_batch_size: 128\ndynamic_batching {{ }}\n'
                'instance_group [ { count: 1 kind: KIND_CPU } ]\n')
v = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
save("add", [helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"])],
     [v("INPUT0", ["b", 16]), v("INPUT1", ["b", 16])], [v("OUTPUT0", ["b", 16])])
# BERT-base's last hidden state per request: [128, 768] floats out of 128 in.
save("big", [helper.make_node("Expand", ["X", "shape"], ["Y"])], [v("X", ["b", 128, 1])], [v("Y", ["b", 128, 768])],
     [numpy_helper.from_array(np.array([1, 128, 768], np.int64), "shape")])
EOF
TCK=$(getconf CLK_TCK)
count() { curl -s "localhost:$1/v2/models/$2/stats" | "$PY" -c \
  "import json,sys; print(json.load(sys.stdin)['model_stats'][0]['inference_stats']['success'].get('count', 0))"; }
for r in $(seq "$ROUNDS"); do
  for tag in before after; do
    BIN=$A; [ "$tag" = after ] && BIN=$B
    "$BIN" serve --model-repository "$DIR" --http-address 127.0.0.1 --http-port 18931 --grpc-port 18932 \
      --metrics-port 0 > "$DIR/serve.log" 2>&1 &
    P=$!
    for _ in $(seq 100); do curl -sf localhost:18931/v2/health/ready > /dev/null && break; sleep 0.1; done
    for m in $MODELS; do for pr in http grpc; do for c in $CONC; do
      port=18931; [ "$pr" = grpc ] && port=18932
      n0=$(count 18931 "$m"); t0=$(awk '{print $14+$15}' "/proc/$P/stat")
      line=$("$B" perf -m "$m" -i "$pr" -u "127.0.0.1:$port" --concurrency-range "$c" -p 1500 -r 3 2>&1 | tail -1)
      t1=$(awk '{print $14+$15}' "/proc/$P/stat"); n1=$(count 18931 "$m")
      echo "$line" | awk -v r="$r" -v t="$tag" -v m="$m" -v p="$pr" -v cpu=$((t1 - t0)) -v n=$((n1 - n0)) -v tck="$TCK" \
        '{printf "round %s %-6s %-4s %-4s c%-4s %9s infer/s  queue+compute %7.0f us  server own %8s us  server CPU %6.1f us/req\n",
          r, t, m, p, $1, $2, $8 + $9, $11, n ? cpu * 1e6 / tck / n : 0}'
    done; done; done
    kill "$P"; wait "$P" 2>/dev/null || true
  done
done
