#!/usr/bin/env bash
# `gpuopt monitor` / `gpuopt exporter` on the GPU machine (issue 5): a snapshot table, JSON, the
# exporter's /metrics next to nvidia-smi's readings, a stream of samples while `gpuopt bench
# compute` loads the GPU (utilisation, GPM activity, diagnosis), the TUI at 80x24 when tmux is
# there, and the exporter's self-bench (CPU share at 1 s, scrape latency, the cost of each NVML
# query group, CPU by thread) three ways. Builds nothing: uses ./build-h200
# (scripts/build_h200.sh). Writes under "$OUT/monitor" (else ./monitor-out). About two minutes;
# changes no clocks, limits or modes.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build-h200}
BIN=$BUILD/gpuopt
DIR=${OUT:-./monitor-out}/monitor
mkdir -p "$DIR"
[ -x "$BIN" ] || { echo "monitor.sh: $BIN not found (run scripts/build_h200.sh here first)"; exit 1; }
PY=$(command -v python3 || true)
declare -A res

# 1. Snapshot table and JSON.
timeout 30 "$BIN" monitor --once >"$DIR/once.txt" 2>"$DIR/once.err"; res[once]=$?
timeout 30 "$BIN" monitor --json >"$DIR/snapshot.json" 2>"$DIR/json.err"; res[json]=$?
nvidia-smi --query-gpu=index,name,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw,clocks.sm,clocks_event_reasons.active \
  --format=csv >"$DIR/nvidia-smi.csv" 2>&1 || true

# 2. Exporter: /metrics, /health, and the values against nvidia-smi taken at the same time.
PORT=${MONITOR_PORT:-19400}
"$BIN" exporter --listen 127.0.0.1:$PORT --interval 1s >"$DIR/exporter.log" 2>&1 &
EXP=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.2; done
sleep 2
curl -s -o "$DIR/metrics.txt" -w '%{http_code} %{time_total}\n' "http://127.0.0.1:$PORT/metrics" >"$DIR/curl.txt"; res[metrics]=$?
nvidia-smi --query-gpu=index,utilization.gpu,memory.used,temperature.gpu,power.draw,clocks.sm --format=csv,noheader,nounits \
  >"$DIR/nvidia-smi-at-scrape.csv" 2>&1 || true
curl -s "http://127.0.0.1:$PORT/health" >"$DIR/health.txt"
kill $EXP; wait $EXP 2>/dev/null

# 3. Under load: a JSON line per second while the compute benchmark runs.
timeout 60 "$BIN" bench compute >"$DIR/load-bench.txt" 2>&1 &
LOAD=$!
sleep 3
timeout 40 "$BIN" monitor --json --interval 1s --count 12 >"$DIR/under-load.jsonl" 2>"$DIR/under-load.err"; res[stream]=$?
wait $LOAD 2>/dev/null

# 4. The TUI in a pseudo-terminal (80x24), when tmux is installed.
if command -v tmux >/dev/null; then
  tmux -L gpuopt-mon -f /dev/null new-session -d -s m -x 80 -y 24 "$BIN monitor --interval 500ms; echo EXITED:\$?; sleep 5"
  sleep 4
  tmux -L gpuopt-mon capture-pane -p -t m >"$DIR/tui-80x24.txt"
  tmux -L gpuopt-mon send-keys -t m q; sleep 1
  tmux -L gpuopt-mon capture-pane -p -t m | grep -q "EXITED:0"; res[tui]=$?
  tmux -L gpuopt-mon kill-server 2>/dev/null
else
  res[tui]=skipped
fi

# 5. Cost of the exporter at 1 s, three ways (about 45 s):
#    a. every query every sample, measured from start-up as before (--bench-warmup 0): the 6.0 %
#       of the first H200 run, with CPU by thread (library threads spinning at start-up?);
#    b. every query every sample after a 2 s warm-up: what each NVML query costs (the 18.6 ms);
#    c. the defaults (slow groups every 10 s, 2 ms budget): the exporter's cost now.
SB=(exporter --self-bench --interval 1s --bench-seconds 12 --bench-scrapes 300)
timeout 90 "$BIN" "${SB[@]}" --slow-interval 1s --slow-budget 0 --bench-warmup 0 >"$DIR/self-bench-a-startup.txt" 2>&1; res[selfbench_a]=$?
timeout 90 "$BIN" "${SB[@]}" --slow-interval 1s --slow-budget 0 >"$DIR/self-bench-b-every-sample.txt" 2>&1; res[selfbench_b]=$?
timeout 90 "$BIN" "${SB[@]}" >"$DIR/self-bench.txt" 2>&1; res[selfbench]=$?
timeout 90 "$BIN" "${SB[@]}" --json >"$DIR/self-bench.json" 2>"$DIR/self-bench-json.err"

# 6. The sampler/diagnosis unit tests (fake NVML) when the test binary is here.
if [ -x "$BUILD/tests/test_monitor" ]; then
  GPUOPT_FAKE_NVML=$PWD/$BUILD/tests/libfake_nvml.so timeout 120 "$BUILD/tests/test_monitor" --gtest_brief=1 >"$DIR/test_monitor.log" 2>&1
  res[unit]=$?
else
  res[unit]=skipped
fi

# Short report last.
echo "== gpuopt monitor --once =="; cat "$DIR/once.txt"
echo "== nvidia-smi at the same time =="; cat "$DIR/nvidia-smi.csv"
echo "== /metrics excerpt ($(cat "$DIR/curl.txt")) =="
grep -E '^(DCGM_FI_DEV_(GPU_UTIL|FB_USED|FB_FREE|GPU_TEMP|MEMORY_TEMP|POWER_USAGE|TOTAL_ENERGY_CONSUMPTION|SM_CLOCK|MEM_CLOCK|PCIE_REPLAY_COUNTER|XID_ERRORS|CLOCKS_EVENT_REASONS)|DCGM_FI_PROF_(SM_ACTIVE|PIPE_TENSOR_ACTIVE|DRAM_ACTIVE)|gpuopt_exporter_(gpus|sample_duration_seconds|no_gpu))' \
  "$DIR/metrics.txt" | head -40
echo "nvidia-smi at scrape (index, util %, MiB used, C, W, SM MHz):"; cat "$DIR/nvidia-smi-at-scrape.csv"
if [ -n "$PY" ] && [ -s "$DIR/under-load.jsonl" ]; then
  echo "== under load (gpuopt bench compute), per sample: util% SM-active tensor DRAM power clocks-reasons | findings =="
  "$PY" - "$DIR/under-load.jsonl" <<'PYEOF'
import json, sys
for line in open(sys.argv[1]):
    j = json.loads(line)
    g = j["gpus"][0]
    pct = lambda v: "n/a" if v is None else f"{100 * v:.0f}%"
    rules = ",".join(sorted({f"{d['rule']}({d['severity']})" for d in j["diagnosis"]}))
    print(f"  #{j['sequence']:>2} util {g['gpu_util_pct']}% SM {pct(g['gpm']['sm_active'])} TC {pct(g['gpm']['tensor_active'])}"
          f" DRAM {pct(g['gpm']['dram_active'])} {g['power_w']} W {g['clock_event_reasons']} | {rules or '-'}")
PYEOF
fi
[ -s "$DIR/tui-80x24.txt" ] && { echo "== TUI at 80x24 =="; cat "$DIR/tui-80x24.txt"; }
echo "== exporter self-bench b: every NVML query every sample (what each query costs) =="
sed -n '/^NVML queries/,/^$/p' "$DIR/self-bench-b-every-sample.txt"
echo "== exporter self-bench a: as b, measured from start-up (CPU by thread) =="
sed -n '/^CPU by thread/,$p' "$DIR/self-bench-a-startup.txt" | head -12
echo "== exporter self-bench c: defaults (slow groups every 10 s, 2 ms budget) =="; cat "$DIR/self-bench.txt"
echo
cpu() { grep -m1 'CPU, % of one core' "$1" | awk '{print $(NF-3)}'; }
ms() { grep -m1 '^NVML queries' "$1" | sed -E 's/.*samples, ([0-9.]+) ms of sampling per sample.*/\1/'; }
printf '%-44s %10s %14s\n' "exporter at 1 s, nobody scraping" "CPU %" "ms per sample"
printf '%-44s %10s %14s\n' "a. every query, from start-up (old method)" "$(cpu "$DIR/self-bench-a-startup.txt")" "$(ms "$DIR/self-bench-a-startup.txt")"
printf '%-44s %10s %14s\n' "b. every query, after 2 s warm-up" "$(cpu "$DIR/self-bench-b-every-sample.txt")" "$(ms "$DIR/self-bench-b-every-sample.txt")"
printf '%-44s %10s %14s\n' "c. defaults (slow cadence + budget)" "$(cpu "$DIR/self-bench.txt")" "$(ms "$DIR/self-bench.txt")"
grep -h "NVML query group" "$DIR"/self-bench*.txt | sort -u | sed 's/^/moved: /'
echo
printf '%-12s %s\n' step result
for k in once json metrics stream tui selfbench_a selfbench_b selfbench unit; do printf '%-12s %s\n' "$k" "${res[$k]}"; done
for k in once json metrics stream selfbench; do [ "${res[$k]}" = 0 ] || exit 1; done
exit 0
