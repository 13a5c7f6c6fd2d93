#!/usr/bin/env bash
# GPU kernel names in `gpuopt profile` (CUPTI activity records, libcupti dlopen'ed; docs/profile.md):
#   1. test_tune's kernel tests (synthetic records) on this machine's build
#   2. profile resnet_small (fp32 and fp16) and bert (fp16) on the H200: the summary JSON lists
#      the top kernels, the trace has "GPU kernels (CUPTI)" tracks, a convolution kernel sits
#      under a Conv node and a GEMM kernel under a MatMul/Gemm node, each kernel inside the host
#      interval of the node it is given to, and most kernel time belongs to some node
#   3. `run --trace` carries the kernels too; `--no-kernels` turns them off
# Under a minute; exits non-zero when a check fails.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
B=${BIN:-build-h200/bin}
G=${GPUOPT_BIN:-$B/gpuopt}
D=${OUT:-./perf-out}/profile_kernels
M=/tmp/models
mkdir -p "$D" "$M"
PY=python3
fail=0
$PY tools/models/make_models.py --out $M resnet_small bert >/dev/null || exit 1
# Where this machine's libcupti is (gpuopt looks on the loader's path, then under $CUDA_HOME,
# $CUDA_PATH and /usr/local/cuda by itself); shown for the record.
echo "libcupti here: $(ls /usr/local/cuda/extras/CUPTI/lib64/libcupti.so* /usr/local/cuda/lib64/libcupti.so* \
  /usr/local/cuda/targets/*/lib/libcupti.so* 2>/dev/null | tr '\n' ' ')"

echo "== test_tune (kernel attribution, trace, summary on synthetic records) =="
"$B/test_tune" --gtest_filter='ProfileKernels.*:ProfileTrace.*' >"$D/test_tune.txt" 2>&1 || fail=1
grep -E "^\[  (PASSED|FAILED) " "$D/test_tune.txt"

check() {  # $1 label, $2 summary JSON, $3 trace, $4 op regex for a node that must hold a kernel matching $5
  $PY - "$@" <<'EOF'
import json, re, sys
label, summary, trace, op_re, kernel_re = sys.argv[1:6]
j = json.load(open(summary))
t = json.load(open(trace))
ok = True
def bad(msg):
    global ok
    ok = False
    print(f"  FAIL {label}: {msg}")
print(f"-- {label}: kernels_recorded={j.get('kernels_recorded')} note={j.get('kernels_note')} "
      f"kernel time/run {j.get('kernel_time_us', 0):.1f} us, node device time {j['node_time_us']:.1f} us")
for k in j.get("kernels", [])[:8]:
    print(f"  {k['time_us']:9.1f} us {100*k['share']:5.1f}% x{k['calls_per_run']:<4g} {k['kernel'][:90]}  <- {k['node']} ({k['op']})")
if not j.get("kernels_recorded") or not j.get("kernels"):
    bad("no kernels in the summary JSON")
tracks = {e["tid"]: e["args"]["name"] for e in t["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
ev = [e for e in t["traceEvents"] if e["ph"] == "X"]
kern = [e for e in ev if e["cat"] == "cuda kernel"]
launch = {(e["args"]["run"], e["name"]): (e["ts"], e["ts"] + e["dur"]) for e in ev if e["cat"] == "launch"}
node_names = {e["name"] for e in ev if e["cat"] == "launch"}
print(f"  trace: {len(kern)} kernel slices on {len({e['tid'] for e in kern})} track(s): "
      f"{sorted({tracks[e['tid']] for e in kern})}")
if not kern:
    bad("no kernel slices in the trace")
if any(not tracks[e["tid"]].startswith("GPU kernels (CUPTI)") for e in kern):
    bad("a kernel slice off the CUPTI tracks")
if kern and all(e["name"] in node_names for e in kern):
    bad("kernel slices carry node names, not kernel names")
total = sum(e["dur"] for e in kern) or 1
owned = sum(e["dur"] for e in kern if e["args"].get("node"))
print(f"  {100*owned/total:.1f}% of kernel time inside a node")
if owned / total < 0.8:
    bad("under 80% of kernel time given to a node")
outside = 0
for e in kern:
    n = e["args"].get("node")
    if not n:
        continue
    a, b = launch[(e["args"]["run"], n)]
    if e["ts"] < a - 2 or e["ts"] + e["dur"] > b + 2:
        outside += 1
print(f"  {outside} of {len(kern)} kernels outside their node's host interval (2 us slack)")
if outside > len(kern) // 20:
    bad("kernels outside the host interval of their node")
hits = [e for e in kern if re.search(op_re, e["args"].get("op") or "") and re.search(kernel_re, e["name"], re.I)]
print(f"  {len(hits)} kernel(s) matching /{kernel_re}/ under an op matching /{op_re}/, e.g. "
      f"{hits[0]['name'][:80] + ' <- ' + hits[0]['args']['node'] if hits else '-'}")
if not hits:
    bad(f"no kernel matching /{kernel_re}/ under a node whose op matches /{op_re}/")
sys.exit(0 if ok else 1)
EOF
}

for prec in fp32 fp16; do
  echo "== profile resnet_small $prec batch 8 =="
  "$G" profile $M/resnet_small.onnx --device cuda --precision $prec --batch 8 --runs 2 --json \
    --trace "$D/resnet_small_$prec.trace.json" >"$D/resnet_small_$prec.json" 2>"$D/resnet_small_$prec.err"
  echo "exit $?"; cat "$D/resnet_small_$prec.err"
  check "resnet_small $prec" "$D/resnet_small_$prec.json" "$D/resnet_small_$prec.trace.json" "Conv" \
    "conv|xmma|cudnn|implicit|fprop|gemm|sm90|nhwc" || fail=1
done

echo "== profile bert fp16 batch 8 (table) =="
"$G" profile $M/bert.onnx --device cuda --precision fp16 --batch 8 --dim sequence=64 --runs 2 --top 8 \
  --trace "$D/bert.trace.json" >"$D/bert.txt" 2>"$D/bert.err"
echo "exit $?"; cat "$D/bert.err"; cat "$D/bert.txt"
"$G" profile $M/bert.onnx --device cuda --precision fp16 --batch 8 --dim sequence=64 --runs 2 --json --no-trace \
  >"$D/bert.json" 2>/dev/null
check "bert fp16" "$D/bert.json" "$D/bert.trace.json" "MatMul|Gemm|Attention" "gemm|xmma|sm90|cutlass|nvjet|ampere|flash|sdpa|fmha" || fail=1

echo "== run --trace (kernels) and profile --no-kernels =="
"$G" run $M/resnet_small.onnx --device cuda --random-inputs --batch 4 --iterations 2 --trace "$D/run.trace.json" \
  >/dev/null 2>"$D/run.err"; echo "run exit $?"; cat "$D/run.err"
$PY -c "
import json, sys
t = json.load(open('$D/run.trace.json'))
n = sum(1 for e in t['traceEvents'] if e.get('cat') == 'cuda kernel')
print('run --trace kernel slices:', n); sys.exit(0 if n > 0 else 1)" || fail=1
"$G" profile $M/resnet_small.onnx --device cuda --precision fp16 --batch 8 --runs 2 --no-kernels --json --no-trace \
  >"$D/nokernels.json" 2>/dev/null
$PY -c "
import json, sys
j = json.load(open('$D/nokernels.json'))
k = json.load(open('$D/resnet_small_fp16.json'))
print('--no-kernels: kernels_recorded', j['kernels_recorded'], 'kernels', len(j['kernels']))
# What recording kernels costs (resnet_small fp16 batch 8, node by node, mean of 2 runs).
for name, x in (('with kernels', k), ('--no-kernels', j)):
    print(f'  {name:13s} run {x[\"run_us\"]:9.1f} us, node device time {x[\"node_time_us\"]:9.1f} us, host gaps {100*x[\"host_gap_share\"]:.1f}%')
sys.exit(0 if not j['kernels_recorded'] and not j['kernels'] else 1)" || fail=1

echo "profile_kernels: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
