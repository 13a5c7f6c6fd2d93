#!/usr/bin/env bash
# The server's front ends on this host's GPUs (issue 39): the tiny add model (4 CPU instances) and
# BERT-base s128 fp16 (batch-1 requests, dynamic batching up to 128, one GPU instance) under
# `gpuopt perf` over HTTP and gRPC (one thread per request, and -a), with the server's CPU time
# per request read from /proc and perf's own cores; BERT-base's `run --batch 128` in the same call.
# BERT-base runs twice: as configured (batches one after another) and with gpuopt.pipeline on
# (the next batch's upload and compute overlap the previous one's download). Each record carries
# the batches the server formed during its run (/metrics' gpuopt_inference_batch_size: count, mean
# rows, the histogram) and the server's queue / compute split.
# Records (runner gpuopt_serve: gpus, protocol, concurrency, infer_per_s, p99_ms, ...) go to
# $OUT/serve/serve_records.json for docs/perf/h200.json (tools/perf_table.py --merge).
#   OUT=/tmp/o GPUOPT_COMMIT=abc1234 scripts/gpu/serve_scale.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
G=${GPUOPT_BIN:-build-h200/bin/gpuopt}; [ -x "$G" ] || G=build-h200/gpuopt
# Per-run outputs in a scratch folder; $OUT/serve keeps the records, the table and the server's log.
D=$(mktemp -d /tmp/serve-scale-XXXX)
R=${OUT:-.}/serve; mkdir -p $R
REC=$R/serve_records.json; echo "[]" > $REC
COMMIT=${GPUOPT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}
GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
W=/tmp/srv; rm -rf $W; mkdir -p $W
python3 tools/models/make_models.py --out $W/src bert_base > /dev/null 2>&1 || echo make_models failed
python3 - $W <<'PY'
import os, sys
sys.path.insert(0, "tests/server"); import server_harness as H
w = sys.argv[1]
def repo(name, cfg, model=None):
    os.makedirs(f"{w}/repo/{name}/1", exist_ok=True)
    dst = f"{w}/repo/{name}/1/model.onnx"
    H.add_sub_model(dst) if model is None else os.symlink(model, dst)
    open(f"{w}/repo/{name}/config.pbtxt", "w").write(cfg)
repo("tiny", "max_batch_size: 64\ndynamic_batching { max_queue_delay_microseconds: 0 }\ninstance_group { count: 4 kind: KIND_CPU }\n")
repo("bert", 'parameters { key: "gpuopt.precision" value: { string_value: "fp16" } }\nmax_batch_size: 128\ndynamic_batching { }\ninstance_group { count: 1 kind: KIND_GPU }\n', f"{w}/src/bert_base.onnx")
repo("bert_pipe", 'parameters { key: "gpuopt.precision" value: { string_value: "fp16" } }\nparameters { key: "gpuopt.pipeline" value: { string_value: "on" } }\nmax_batch_size: 128\ndynamic_batching { }\ninstance_group { count: 1 kind: KIND_GPU }\n', f"{w}/src/bert_base.onnx")
PY
$G run $W/src/bert_base.onnx --device cuda --precision fp16 --random-inputs --batch 128 --dim sequence=128 --iterations 30 --json > $D/bert_run128.json 2>&1
python3 - $D/bert_run128.json $REC "$COMMIT" <<'PY' || head -c 300 $D/bert_run128.json
import datetime, json, sys
j = json.load(open(sys.argv[1])); ms = j["device_ms"]["median"]
print(f"engine: bert_base b128 fp16 {ms:.2f} ms, {128e3 / ms:.0f} seq/s")
recs = json.load(open(sys.argv[2]))
recs.append({"model": "bert_base", "exporter": "generated", "batch": 128, "runner": "gpuopt", "precision": "fp16",
             "ms": ms, "items_per_s": 128e3 / ms, "execution": j.get("execution", ""),
             "date": datetime.date.today().isoformat(), "commit": sys.argv[3], "source": "serve_scale.sh"})
json.dump(recs, open(sys.argv[2], "w"), indent=1)
PY
$G serve --model-repository $W/repo --http-port 18300 --grpc-port 18301 --metrics-port 18302 > $R/serve.log 2>&1 &
SPID=$!
for i in $(seq 120); do curl -sf localhost:18300/v2/health/ready >/dev/null && break; sleep 1; done
cpu() { awk '{print $14+$15}' /proc/$SPID/stat; }
hist() { curl -s localhost:18302/metrics | grep "^gpuopt_inference_batch_size_.*model=\"$1\"" > $2; }
one() {  # name model proto c extra...
  local name=$1 m=$2 proto=$3 c=$4; shift 4
  local port=18300; [ $proto = grpc ] && port=18301
  hist $m $D/$name.h0
  local c0=$(cpu)
  timeout 100 $G perf -m $m -u 127.0.0.1:$port -i $proto --concurrency-range $c -p 2000 -r 4 -s 20 --json "$@" > $D/$name.json 2> $D/$name.err || echo "$name failed: $(tail -1 $D/$name.err)"
  local c1=$(cpu)
  hist $m $D/$name.h1
  python3 - $D/$name.json $c0 $c1 $(getconf CLK_TCK) "$name" $m $proto $c "$*" $REC "$COMMIT" $GPUS $D/$name.h0 $D/$name.h1 <<'PY'
import datetime, json, re, sys
f, c0, c1, hz, name = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
model, proto, conc, extra, rec, commit, gpus, h0, h1 = sys.argv[6:15]
def samples(path):  # the batch-size histogram's samples: {(kind, le): value}
    d = {}
    for line in open(path):
        m = re.match(r'gpuopt_inference_batch_size_(\w+)\{([^}]*)\}\s+(\S+)', line)
        if m:
            le = re.search(r'le="([^"]+)"', m.group(2))
            d[(m.group(1), le.group(1) if le else "")] = float(m.group(3))
    return d
a, b = samples(h0), samples(h1)
delta = {k: v - a.get(k, 0.0) for k, v in b.items()}
batches = int(delta.get(("count", ""), 0))
hist, prev = {}, 0.0  # rows bucket (upper bound) -> batches, from the cumulative buckets
for (kind, le), v in sorted(((k, v) for k, v in delta.items() if k[0] == "bucket"),
                            key=lambda kv: float(kv[0][1].replace("+Inf", "inf"))):
    if v - prev > 0:
        hist[le] = int(v - prev)
    prev = v
try:
    l = json.load(open(f))["results"][0]
except Exception as e:
    print(name, "no result", e); sys.exit(0)
tot = l["sent"]
recs = json.load(open(rec))
recs.append({"model": {"tiny": "add_sub", "bert": "bert_base", "bert_pipe": "bert_base"}[model], "exporter": "generated", "batch": 1,
             "runner": "gpuopt_serve", "precision": "fp32" if model == "tiny" else "fp16", "gpus": int(gpus),
             "instances": {"tiny": "4 cpu", "bert": "1 per gpu", "bert_pipe": "1 per gpu, pipelined"}[model], "protocol": proto,
             "client": "async" if "-a" in extra.split() else "sync", "concurrency": int(conc),
             "infer_per_s": l["throughput_infer_per_s"], "p50_ms": l["p50_us"] / 1e3, "p99_ms": l["p99_us"] / 1e3,
             "server_overhead_us": l["server_overhead_us"], "server_cpu_us_per_request": (c1 - c0) / hz / max(tot, 1) * 1e6,
             "client_cpu_cores": l["client_cpu_cores"], "server_queue_us": l["server_queue_us"],
             "server_compute_us": l["server_compute_input_us"] + l["server_compute_infer_us"] + l["server_compute_output_us"],
             "batches": batches, "mean_batch": delta.get(("sum", ""), 0) / max(batches, 1), "batch_hist": hist,
             "date": datetime.date.today().isoformat(), "commit": commit, "source": "serve_scale.sh"})
json.dump(recs, open(rec, "w"), indent=1)
print(f"{name:24} {l['throughput_infer_per_s']:>9.0f}/s p50 {l['p50_us']:>7.0f} p99 {l['p99_us']:>7.0f} us  "
      f"server own {l['server_overhead_us']:>6.1f} us  queue {l['server_queue_us']:>6.1f}  client cores {l['client_cpu_cores']:.1f}  "
      f"server CPU/req {(c1 - c0) / hz / max(tot, 1) * 1e6:.1f} us  batches {batches} mean {recs[-1]['mean_batch']:.1f} {hist}")
PY
}
for c in ${TINY_CONC-64 256}; do  # TINY_CONC="" skips the tiny model
  one tiny_http_c$c tiny http $c
  one tiny_grpc_c$c tiny grpc $c
  one tiny_grpc_async_c$c tiny grpc $c -a
done
one bert_http_c256 bert http 256 --shape input_ids:128 --shape attention_mask:128
one bert_grpc_c256 bert grpc 256 --shape input_ids:128 --shape attention_mask:128
one bert_grpc_async_c256 bert grpc 256 -a --shape input_ids:128 --shape attention_mask:128
one bertpipe_http_c256 bert_pipe http 256 --shape input_ids:128 --shape attention_mask:128
one bertpipe_grpc_c256 bert_pipe grpc 256 --shape input_ids:128 --shape attention_mask:128
one bertpipe_grpc_async_c256 bert_pipe grpc 256 -a --shape input_ids:128 --shape attention_mask:128
kill $SPID; wait $SPID 2>/dev/null
