#!/usr/bin/env bash
# gRPC and shared memory on the H200 (issue 14). Builds nothing: uses the binaries in build-h200/.
#  1. CUDA shared memory against GPU instances: inputs and outputs in cudaMalloc'd regions of this
#     (client) process, registered over HTTP and over gRPC, results checked against numpy. With
#     tritonclient.utils.cuda_shared_memory when it imports (it needs cuda-python), else a ctypes
#     client over libcudart and plain HTTP (the same server path).
#  2. `gpuopt perf -i grpc --shared-memory cuda` (the C++ client's CUDA IPC), errors must be 0.
#  3. The tiny model over HTTP (binary), gRPC, and each with system shared memory: overhead per
#     request at concurrency 1 (client latency minus server queue + compute) and max QPS.
# Logs and JSON under $OUT/grpc; a table is printed last.
set -uo pipefail
cd "$(dirname "$0")/../.."
G=build-h200/bin/gpuopt
[ -x "$G" ] || G=build-h200/gpuopt
D=${OUT:-./server-out}/grpc
mkdir -p "$D"
PY=${PY:-python3}
R=$(mktemp -d /tmp/gpuopt-grpc-XXXX)
PORT=${PORT:-18100}
GPORT=${GPORT:-18101}
CORES=$(nproc)

$PY - "$R" "$CORES" <<'EOF'
import os, sys
sys.path.insert(0, "tests/server")
import server_harness as H
root, cores = sys.argv[1], int(sys.argv[2])
for name, kind, count, delay in [("tiny_cpu", "KIND_CPU", max(1, cores // 2), 50), ("tiny_cpu0", "KIND_CPU", 2, 0),
                                 ("tiny_gpu", "KIND_GPU", 2, 50)]:
    H.add_sub_model(os.path.join(root, name, "1", "model.onnx"))
    with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
        f.write(f'max_batch_size: 64\ndynamic_batching {{ max_queue_delay_microseconds: {delay} }}\n'
                f'instance_group {{ count: {count} kind: {kind} }}\n')
EOF

"$G" serve --model-repository "$R" --http-address 127.0.0.1 --http-port $PORT --grpc-port $GPORT --allow-metrics false \
  --exit-timeout-secs 30 >"$D/serve.log" 2>&1 &
SPID=$!
for _ in $(seq 1 300); do
  curl -sf "127.0.0.1:$PORT/v2/health/ready" >/dev/null && break
  kill -0 $SPID 2>/dev/null || break
  sleep 0.5
done
cat "$D/serve.log"
if ! curl -sf "127.0.0.1:$PORT/v2/health/ready" >/dev/null; then echo "server did not become ready"; kill $SPID; exit 1; fi

echo "== CUDA shared memory, results checked =="
$PY - "$PORT" "$GPORT" <<'EOF' 2>&1 | tee "$D/cuda_shm.log"
import base64, ctypes, glob, json, sys, urllib.request
import numpy as np
port, gport = sys.argv[1], sys.argv[2]
rows, n = 4, 4 * 16 * 4
rng = np.random.default_rng(0)
a = rng.standard_normal((rows, 16)).astype(np.float32)
b = rng.standard_normal((rows, 16)).astype(np.float32)
ok = True
try:
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    import tritonclient.utils.cuda_shared_memory as cudashm
    have_tc = True
except Exception as e:  # noqa: BLE001
    print("tritonclient.utils.cuda_shared_memory not available:", e)
    have_tc = False
if have_tc:
    for proto, c, mod in (("grpc", grpcclient.InferenceServerClient(f"127.0.0.1:{gport}"), grpcclient),
                          ("http", httpclient.InferenceServerClient(f"127.0.0.1:{port}"), httpclient)):
        hi = cudashm.create_shared_memory_region(f"in_{proto}", 2 * n, 0)
        ho = cudashm.create_shared_memory_region(f"out_{proto}", 2 * n, 0)
        cudashm.set_shared_memory_region(hi, [a, b])
        c.register_cuda_shared_memory(f"in_{proto}", cudashm.get_raw_handle(hi), 0, 2 * n)
        c.register_cuda_shared_memory(f"out_{proto}", cudashm.get_raw_handle(ho), 0, 2 * n)
        ins = [mod.InferInput("INPUT0", [rows, 16], "FP32"), mod.InferInput("INPUT1", [rows, 16], "FP32")]
        ins[0].set_shared_memory(f"in_{proto}", n)
        ins[1].set_shared_memory(f"in_{proto}", n, offset=n)
        outs = [mod.InferRequestedOutput("OUTPUT0"), mod.InferRequestedOutput("OUTPUT1")]
        outs[0].set_shared_memory(f"out_{proto}", n)
        outs[1].set_shared_memory(f"out_{proto}", n, offset=n)
        c.infer("tiny_gpu", ins, outputs=outs)
        o0 = cudashm.get_contents_as_numpy(ho, np.float32, [rows, 16])
        good = np.array_equal(o0, a + b)
        print(f"tritonclient {proto} cuda shm: OUTPUT0 {'OK' if good else 'WRONG'}")
        ok &= good
        c.unregister_cuda_shared_memory(f"in_{proto}")
        c.unregister_cuda_shared_memory(f"out_{proto}")
        cudashm.destroy_shared_memory_region(hi)
        cudashm.destroy_shared_memory_region(ho)
# ctypes client over libcudart, plain HTTP: the same server path without cuda-python.
libs = glob.glob("/usr/local/cuda/lib64/libcudart.so*") + glob.glob("/opt/torch/.venv/lib/python3*/site-packages/nvidia/cuda_runtime/lib/libcudart.so*")
rt = ctypes.CDLL(libs[0]) if libs else None
if rt is None:
    print("no libcudart found for the ctypes client"); sys.exit(0 if ok else 1)
def chk(e, what):
    if e != 0:
        raise RuntimeError(f"{what}: cuda error {e}")
def post(path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
regions = {}
for name in ("cin", "cout"):
    p = ctypes.c_void_p()
    chk(rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(2 * n)), "cudaMalloc")
    h = (ctypes.c_char * 64)()
    chk(rt.cudaIpcGetMemHandle(h, p), "cudaIpcGetMemHandle")
    regions[name] = p
    st, body = post(f"/v2/cudasharedmemory/region/{name}/register",
                    {"raw_handle": {"b64": base64.b64encode(bytes(h)).decode()}, "device_id": 0, "byte_size": 2 * n})
    print("register", name, st, body[:200])
    ok &= st == 200
host = np.concatenate([a.ravel(), b.ravel()])
chk(rt.cudaMemcpy(regions["cin"], host.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(2 * n), 1), "cudaMemcpy H2D")
shm = lambda r, off, size: {"shared_memory_region": r, "shared_memory_offset": off, "shared_memory_byte_size": size}
req = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [rows, 16], "parameters": shm("cin", 0, n)},
                  {"name": "INPUT1", "datatype": "FP32", "shape": [rows, 16], "parameters": shm("cin", n, n)}],
       "outputs": [{"name": "OUTPUT0", "parameters": shm("cout", 0, n)}, {"name": "OUTPUT1", "parameters": shm("cout", n, n)}]}
st, body = post("/v2/models/tiny_gpu/infer", req)
print("infer", st, body[:300])
out = np.zeros(2 * rows * 16, np.float32)
chk(rt.cudaMemcpy(out.ctypes.data_as(ctypes.c_void_p), regions["cout"], ctypes.c_size_t(2 * n), 2), "cudaMemcpy D2H")
good = st == 200 and np.array_equal(out[:rows * 16].reshape(rows, 16), a + b) and np.array_equal(out[rows * 16:].reshape(rows, 16), a - b)
print(f"ctypes http cuda shm: {'OK' if good else 'WRONG'}")
ok &= good
st, body = post("/v2/models/tiny_gpu/infer", {**req, "inputs": [dict(req["inputs"][0], parameters=shm("cin", n + 4, n)), req["inputs"][1]]})
print("out of bounds:", st, body[:200])
ok &= st == 400
for name in regions:
    post(f"/v2/cudasharedmemory/region/{name}/unregister", {})
    rt.cudaFree(regions[name])
print("CUDA shared memory:", "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
EOF
CUDA_SHM=${PIPESTATUS[0]}

perf() {  # out.json args...
  local out=$1; shift
  echo "== perf $* =="
  timeout 120 "$G" perf -p 1500 -r 5 --json "$@" >"$D/$out" 2>"$D/$out.err"
  echo "exit $?"; tail -2 "$D/$out.err"
}
perf gpu_grpc_cudashm.json -m tiny_gpu -i grpc -u 127.0.0.1:$GPORT --shared-memory cuda --concurrency-range 4
for proto in http grpc; do
  P=$PORT; [ $proto = grpc ] && P=$GPORT
  for shm in none system; do
    perf "c1_${proto}_${shm}.json" -m tiny_cpu0 -i $proto -u 127.0.0.1:$P --shared-memory $shm --concurrency-range 1
    perf "load_${proto}_${shm}.json" -m tiny_cpu -i $proto -u 127.0.0.1:$P --shared-memory $shm --concurrency-range 64:256:96
  done
done
kill -TERM $SPID; wait $SPID; echo "server exit $?"
rm -rf "$R"

echo "== summary =="
$PY - "$D" "$CUDA_SHM" <<'EOF'
import json, os, sys
d = sys.argv[1]
def load(n):
    try:
        return json.load(open(os.path.join(d, n)))
    except Exception:
        return None
print("CUDA shared memory check:", "PASS" if sys.argv[2] == "0" else "FAIL")
g = load("gpu_grpc_cudashm.json")
if g:
    r = g["results"][0]
    print(f'perf -i grpc --shared-memory cuda on tiny_gpu: {r["throughput_infer_per_s"]:.0f} infer/s, errors {r["errors"]}')
print(f'{"protocol":8} {"shm":7} {"c1 p50 us":>10} {"c1 overhead us":>15} {"server ovh us":>14} {"max infer/s":>12} {"at conc":>8}')
for proto in ("http", "grpc"):
    for shm in ("none", "system"):
        c1, ld = load(f"c1_{proto}_{shm}.json"), load(f"load_{proto}_{shm}.json")
        if not c1 or not ld:
            print(f"{proto:8} {shm:7} (missing)"); continue
        r = c1["results"][0]
        best = max(ld["results"], key=lambda x: x["throughput_infer_per_s"])
        print(f'{proto:8} {shm:7} {r["p50_us"]:>10.0f} {r["overhead_us"]:>15.1f} {r["server_overhead_us"]:>14.1f} '
              f'{best["throughput_infer_per_s"]:>12.0f} {best["concurrency"]:>8}')
EOF
exit $CUDA_SHM
