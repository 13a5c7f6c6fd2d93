#!/usr/bin/env bash
# Issue 18 on the GPU machine. Builds nothing: uses the binaries in build-h200/.
#  1. Pod labels with the real NVML: `gpuopt bench compute` holds GPU 0 while test_kube's
#     PodResources tests run (GPUOPT_POD_LABELS_REAL_GPU=1): a fake kubelet allocates GPU 0 (its
#     real UUID) to pod deploy/gpu-check, and the bench process's series must carry that pod.
#  2. The image's entrypoint (deploy/entrypoint.sh) outside a container, on the GPU: a repository
#     with a GPU instance group, the Dockerfile's HEALTHCHECK command, a curl inference checked
#     against numpy, GPU series on /metrics, then SIGTERM: drain time and exit code.
# Logs under $OUT/deploy (default ./deploy-out/deploy); a table last. About a minute.
set -uo pipefail
cd "$(dirname "$0")/../.."
G=build-h200/bin/gpuopt
[ -x "$G" ] || G=build-h200/gpuopt
T=build-h200/bin/test_kube
[ -x "$T" ] || T=build-h200/tests/test_kube
D=${OUT:-./deploy-out}/deploy
mkdir -p "$D"
PY=${PY:-python3}
declare -A res

# 1. Pod labels on a real GPU process.
if [ -x "$T" ]; then
  timeout 120 "$G" bench compute >"$D/bench-load.log" 2>&1 &
  LOAD=$!
  sleep 5
  GPUOPT_POD_LABELS_REAL_GPU=1 timeout 120 "$T" --gtest_filter='PodResources.RealGpu*' >"$D/test_kube_real_gpu.log" 2>&1
  res[pod_labels_real_gpu]=$?
  kill $LOAD 2>/dev/null; wait $LOAD 2>/dev/null
  GPUOPT_FAKE_NVML=$(ls build-h200/bin/libfake_nvml.so build-h200/tests/libfake_nvml.so 2>/dev/null | head -1) \
    timeout 120 "$T" >"$D/test_kube_all.log" 2>&1
  res[test_kube]=$?
else
  res[pod_labels_real_gpu]="no $T"
fi

# 2. The entrypoint serving on the GPU.
R=$(mktemp -d /tmp/gpuopt-deploy-XXXX)
$PY - "$R" <<'PYEOF'
import os, sys
sys.path.insert(0, "tests/server")
import server_harness as H
root = sys.argv[1]
H.add_sub_model(os.path.join(root, "tiny_gpu", "1", "model.onnx"))
with open(os.path.join(root, "tiny_gpu", "config.pbtxt"), "w") as f:
    f.write("max_batch_size: 64\ndynamic_batching { max_queue_delay_microseconds: 100 }\n"
            "instance_group { count: 2 kind: KIND_GPU }\n")
PYEOF
PORT=${PORT:-18100}
MPORT=${MPORT:-18102}
GPUOPT_BIN=$PWD/$G GPUOPT_MODEL_REPOSITORY=$R GPUOPT_HTTP_PORT=$PORT GPUOPT_METRICS_PORT=$MPORT GPUOPT_GRPC_PORT=18101 \
  GPUOPT_EXIT_TIMEOUT_SECS=10 sh deploy/entrypoint.sh >"$D/entrypoint.log" 2>&1 &
SRV=$!
for _ in $(seq 600); do curl -sf "http://127.0.0.1:$PORT/v2/health/ready" >/dev/null && break; sleep 0.2; done
HC=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' deploy/Dockerfile | sed -n 's/^HEALTHCHECK .*CMD //p')
GPUOPT_HTTP_PORT=$PORT sh -c "$HC" >"$D/healthcheck.log" 2>&1; res[healthcheck]=$?
$PY - "$PORT" >"$D/infer.log" 2>&1 <<'PYEOF'
import json, sys, urllib.request
import numpy as np
port = sys.argv[1]
a = np.arange(4 * 16, dtype=np.float32).reshape(4, 16) / 7
b = np.ones((4, 16), np.float32)
body = {"inputs": [{"name": n, "shape": [4, 16], "datatype": "FP32", "data": x.ravel().tolist()}
                   for n, x in (("INPUT0", a), ("INPUT1", b))]}
req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/tiny_gpu/infer", json.dumps(body).encode(),
                             {"Content-Type": "application/json"})
out = {o["name"]: np.array(o["data"], np.float32).reshape(o["shape"]) for o in json.load(urllib.request.urlopen(req))["outputs"]}
np.testing.assert_allclose(out["OUTPUT0"], a + b, rtol=1e-6)
np.testing.assert_allclose(out["OUTPUT1"], a - b, rtol=1e-6)
print("infer ok: outputs equal numpy's a+b, a-b")
PYEOF
res[infer]=$?
curl -s "http://127.0.0.1:$MPORT/metrics" >"$D/metrics.txt"
grep -q '^nv_gpu_utilization{' "$D/metrics.txt"; res[gpu_metrics]=$?
t0=$(date +%s.%N)
kill -TERM $SRV
wait $SRV; res[sigterm_exit]=$?
awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "drain: %.2f s (exit timeout 10 s)\n", b - a }' | tee "$D/drain.txt"
GPUOPT_HTTP_PORT=$PORT sh -c "$HC" >/dev/null 2>&1 && res[healthcheck_after_stop]=1 || res[healthcheck_after_stop]=0
rm -rf "$R"

echo
printf '%-26s %s\n' check result
rc=0
for k in "${!res[@]}"; do
  printf '%-26s %s\n' "$k" "${res[$k]}"
  [ "${res[$k]}" = 0 ] || rc=1
done
exit $rc
