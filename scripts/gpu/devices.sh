#!/usr/bin/env bash
# Devices by index (issue 14) on a one-GPU machine:
#  1. `run --device cuda:0` gives the same outputs as `--device cuda` (within fp16 noise: FusedConv
#     picks fused or separate calls by timing, per process);
#  2. `run --device cuda:1` is refused with exit 1 and "cuda:1 does not exist: this host has 1 CUDA
#     device"; `--device cuda:x` is a usage error (exit 2);
#  3. `serve` with an instance group on gpus [1] refuses the model at load naming cuda:1, while
#     gpus [0] serves and answers a request.
# Prints PASS/FAIL per check; exits 1 when any check failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
G=build-h200/bin/gpuopt
[ -x "$G" ] || G=build-h200/gpuopt
[ -x "$G" ] || G=build/gpuopt
D=${OUT:-./devices-out}/devices
mkdir -p "$D"
PY=${PY:-python3}
W=$(mktemp -d /tmp/gpuopt-devices-XXXX)
PORT=${PORT:-18100}
fail=0
check() { if [ "$1" = 0 ]; then echo "PASS $2"; else echo "FAIL $2"; fail=1; fi; }

$PY tools/models/make_models.py --out "$W/m" --inputs 1 resnet18 >"$D/make_models.log" 2>&1
M=$W/m/resnet18.onnx
args=()
for f in "$W"/m/resnet18_inputs/*.npy; do args+=(--input "$(basename "$f" .npy)=$f"); done
echo "== 1. cuda:0 explicit vs cuda =="
"$G" run "$M" "${args[@]}" --device cuda --precision fp16 --iterations 2 --output-dir "$W/o_cuda" >"$D/run_cuda.log" 2>&1
r1=$?
"$G" run "$M" "${args[@]}" --device cuda:0 --precision fp16 --iterations 2 --output-dir "$W/o_cuda0" --json \
  >"$D/run_cuda0.json" 2>"$D/run_cuda0.err"
r2=$?
check $((r1 | r2)) "run --device cuda and --device cuda:0 both exit 0 ($r1, $r2)"
$PY - "$W/o_cuda" "$W/o_cuda0" "$D/run_cuda0.json" <<'PY'
import json, os, sys
import numpy as np
a, b, j = sys.argv[1:4]
names = sorted(os.listdir(a))
def rel_l2(x, y):
    x, y = x.astype(np.float64).ravel(), y.astype(np.float64).ravel()
    return float(np.linalg.norm(x - y) / max(np.linalg.norm(x), 1e-30))
errs = {n: rel_l2(np.load(os.path.join(a, n)), np.load(os.path.join(b, n))) for n in names}
same = bool(names) and names == sorted(os.listdir(b)) and all(e <= 1e-3 for e in errs.values())
dev = json.load(open(j)).get("device")
print(("PASS" if same else "FAIL"), "cuda:0 outputs equal cuda's (rel L2 <= 1e-3):", errs)
print(("PASS" if dev == "cuda:0" else "FAIL"), "run --json names the device:", dev)
sys.exit(0 if same and dev == "cuda:0" else 1)
PY
check $? "outputs and --json"

echo "== 2. a missing GPU =="
n=$(nvidia-smi -L 2>/dev/null | wc -l)
"$G" run "$M" --random-inputs --device "cuda:$n" --iterations 1 >"$D/missing.out" 2>"$D/missing.err"
rc=$?
cat "$D/missing.err"
grep -q "cuda:$n does not exist: this host has $n CUDA device" "$D/missing.err"
check $(( (rc != 1) | $? )) "run --device cuda:$n exits 1 naming the device (exit $rc)"
"$G" run "$M" --random-inputs --device cuda:x --iterations 1 >/dev/null 2>"$D/malformed.err"
rc=$?
cat "$D/malformed.err"
check $((rc != 2)) "run --device cuda:x is a usage error (exit $rc)"

echo "== 3. instance groups on gpus [$n] and [0] =="
for g in "$n" 0; do
  mkdir -p "$W/repo_$g/r18/1" && cp "$M" "$W/repo_$g/r18/1/model.onnx"
  printf 'max_batch_size: 8\ninstance_group { count: 2 kind: KIND_GPU gpus: [ %s ] }\n' "$g" >"$W/repo_$g/r18/config.pbtxt"
done
timeout 120 "$G" serve --model-repository "$W/repo_$n" --http-address 127.0.0.1 --http-port $PORT \
  --metrics-port $((PORT + 2)) >"$D/serve_missing.log" 2>&1
rc=$?
tail -3 "$D/serve_missing.log"
grep -q "cuda:$n does not exist: this host has $n CUDA device" "$D/serve_missing.log"
check $(( (rc != 1) | $? )) "serve with gpus [$n] refuses the model naming cuda:$n (exit $rc)"

"$G" serve --model-repository "$W/repo_0" --http-address 127.0.0.1 --http-port $PORT --metrics-port $((PORT + 2)) \
  >"$D/serve_0.log" 2>&1 &
SPID=$!
for _ in $(seq 1 240); do
  curl -sf "127.0.0.1:$PORT/v2/health/ready" >/dev/null && break
  kill -0 $SPID 2>/dev/null || break
  sleep 0.5
done
$PY - "$PORT" "$W/m/resnet18_inputs" <<'PY'
import glob, json, sys, urllib.request
import numpy as np
port, d = sys.argv[1], sys.argv[2]
x = np.load(sorted(glob.glob(d + "/*.npy"))[0]).astype(np.float32)
name = sorted(glob.glob(d + "/*.npy"))[0].split("/")[-1][:-4]
body = {"inputs": [{"name": name, "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}]}
r = urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/r18/infer",
                                                  data=json.dumps(body).encode()), timeout=60)
out = json.loads(r.read())["outputs"][0]
print("PASS" if r.status == 200 and out["shape"][0] == x.shape[0] else "FAIL", "gpus [0] answers:", out["name"], out["shape"])
PY
check $? "serve with gpus [0] answers"
kill -TERM $SPID; wait $SPID
grep -E "instance|ready" "$D/serve_0.log" | head -5
rm -rf "$W"
exit $fail
