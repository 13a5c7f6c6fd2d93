"""`gpuopt monitor --once/--json` and `gpuopt exporter` endpoints and self-bench, over the fake
NVML; errors are one clear line with the documented exit codes."""
import json
import subprocess

from monitor_fixtures import MIB, Env, free_port, gpu, gpuopt_bin, http_get, start_exporter, stop


def run(env, *args, nvml=None, timeout=60):
    return subprocess.run([gpuopt_bin(), *args], env=env.environ(nvml), capture_output=True, text=True,
                          timeout=timeout)


def script():
    return {"driver_version": "580.65.06", "cuda_driver_version": 13000,
            "devices": [gpu(0, [20, 30, 40, 50], [1000, 2000, 3000, 4000], 300.0,
                            {"processes": [{"pid": 4242, "used_memory": 512 * MIB, "sm_util": 44}],
                             "xid_events": [{"xid": 79, "after_waits": 1}]})]}


def test_once_table():
    env = Env(script())
    env.add_process(4242, ["/usr/bin/python3", "serve.py"])
    try:
        r = run(env, "monitor", "--once", "--interval", "100ms")
        assert r.returncode == 0, r.stderr
        out = r.stdout
        assert "NVIDIA H200" in out
        assert "30%" in out                       # second sample of the scripted utilisation
        assert "2.0 / 140.4 GiB" in out           # 2000 MiB used of 143771 MiB
        assert "300 / 700 W" in out
        assert "python3 serve.py" in out and "512.00 MiB" in out
        assert "Diagnosis:" in out
        assert "XID 79: GPU has fallen off the bus" in out
    finally:
        env.cleanup()


def test_json_snapshot_and_stream():
    env = Env(script())
    try:
        r = run(env, "monitor", "--json")  # one snapshot: two samples 1 s apart
        assert r.returncode == 0, r.stderr
        j = json.loads(r.stdout)
        g = j["gpus"][0]
        assert g["gpu_util_pct"] == 30 and g["memory_used_bytes"] == 2000 * MIB
        assert g["power_w"] == 300.0 and g["temperature_gpu_c"] == 40
        assert g["gpm"]["sm_active"] == 0.6
        assert g["xid_count"] == 1 and g["last_xid"] == 79
        assert g["processes"][0]["pid"] == 4242 and g["processes"][0]["sm_util_pct"] == 44
        assert g["temperature_memory_c"] == 50
        assert any(d["rule"] == "xid_errors" and d["severity"] == "critical" for d in j["diagnosis"])

        r = run(env, "monitor", "--json", "--count", "4", "--interval", "50ms")
        assert r.returncode == 0, r.stderr
        lines = r.stdout.strip().split("\n")
        assert len(lines) == 4
        objs = [json.loads(l) for l in lines]
        assert [o["sequence"] for o in objs] == [1, 2, 3, 4]
        assert [o["gpus"][0]["gpu_util_pct"] for o in objs] == [20, 30, 40, 50]
        assert [o["gpus"][0]["memory_used_bytes"] // MIB for o in objs] == [1000, 2000, 3000, 4000]
        assert objs[0]["gpus"][0]["gpm"]["sm_active"] is None  # GPM needs two samples
        assert objs[1]["gpus"][0]["gpm"]["sm_active"] == 0.6
    finally:
        env.cleanup()


def test_errors_are_one_line():
    env = Env(script())
    try:
        r = run(env, "monitor", "--once", nvml="/nonexistent/libnvidia-ml.so.1")
        assert r.returncode == 1
        assert r.stderr.strip().count("\n") == 0 and "NVML not found" in r.stderr
        r = run(env, "monitor", "--once", "--interval", "soon")
        assert r.returncode == 2 and "interval 'soon'" in r.stderr
        r = run(env, "monitor", "--once", "--sort", "name")
        assert r.returncode == 2 and "--sort 'name'" in r.stderr
        r = run(env, "exporter", "--listen", "nohost")
        assert r.returncode == 2 and "--listen 'nohost'" in r.stderr
        # Not a terminal (stdout is a pipe here): the TUI refuses with a hint.
        r = run(env, "monitor")
        assert r.returncode == 2 and "--once or --json" in r.stderr
    finally:
        env.cleanup()


def test_exporter_endpoints():
    env = Env(script())
    port = free_port()
    p = start_exporter(env, port, "--interval", "100ms")
    try:
        status, ctype, body = http_get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
        assert "# TYPE DCGM_FI_DEV_GPU_UTIL gauge" in body
        assert 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-00000000-aaaa-bbbb-cccc-dddddddddddd"' in body
        assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter" in body
        assert 'gpuopt_build_info{version="' in body
        status, _, body = http_get(f"http://127.0.0.1:{port}/health")
        assert status == 200 and body == "ok\n"
        try:
            http_get(f"http://127.0.0.1:{port}/nope")
            assert False, "expected 404"
        except Exception as e:  # noqa: BLE001
            assert "404" in str(e)
    finally:
        stop(p)
    assert p.returncode == 0, p.stderr.read()


def test_exporter_without_gpu_serves_reason():
    env = Env(script())
    port = free_port()
    p = start_exporter(env, port, nvml="/nonexistent/libnvidia-ml.so.1")
    try:
        _, _, body = http_get(f"http://127.0.0.1:{port}/metrics")
        assert "# no GPU series: NVML not found" in body
        assert 'gpuopt_exporter_no_gpu{Hostname="' in body
        assert "DCGM_FI_DEV" not in body
    finally:
        stop(p)


def test_self_bench_reports_cpu_and_latency():
    env = Env(script())
    try:
        r = run(env, "exporter", "--self-bench", "--bench-seconds", "2", "--bench-scrapes", "100", "--interval", "1s",
                "--json")
        assert r.returncode == 0, r.stderr
        j = json.loads(r.stdout)
        assert j["gpus"] == 1 and j["samples"] >= 1
        assert 0 <= j["cpu_percent_of_one_core"] < 100
        assert 0 < j["scrape_latency_us"]["p50"] <= j["scrape_latency_us"]["p99"] <= j["scrape_latency_us"]["max"]
        assert j["metrics_bytes"] > 1000
    finally:
        env.cleanup()


def test_self_bench_names_a_slow_query_and_moves_it():
    """A fake NVML function made slow (3 ms busy-wait per call) comes first in the self-bench's
    per-query table, moves to the slow cadence, and the exporter says so once on stderr."""
    env = Env(script())
    e = env.environ()
    e["GPUOPT_FAKE_NVML_DELAY_US"] = "nvmlDeviceGetTemperature=3000"
    try:
        args = ["exporter", "--self-bench", "--bench-seconds", "1.5", "--bench-warmup", "0.2", "--bench-scrapes", "20",
                "--interval", "100ms", "--slow-interval", "1s"]
        r = subprocess.run([gpuopt_bin(), *args, "--json"], env=e, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        j = json.loads(r.stdout)
        q = j["queries"]
        assert q[0]["query"] == "temperature", q[:3]
        assert q[0]["cadence"] == "slow" and q[0]["moved"] is True
        assert 3000 <= q[0]["mean_us"] < 100000
        # The delay burns CPU, as the driver's ioctls do (less than its wall time when the loaded
        # test machine preempts the spinning thread).
        assert 300 <= q[0]["cpu_mean_us"] <= q[0]["mean_us"] * 1.05 + 1000
        assert j["slow_every"] == 10 and j["slow_interval_s"] == 1.0
        # Read 5 times at 100 ms, then every 10th sample; the cheap fast groups every sample.
        util = next(x for x in q if x["query"] == "utilization")
        n = j["samples_total"]
        assert util["cadence"] == "fast" and not util["moved"] and util["calls"] == n
        assert n >= 8 and q[0]["calls"] <= 5 + (n - 5) // 10 + 1
        assert sum(x["share"] for x in q) <= 1.0 + 1e-9
        assert any(t["name"] == "gpuopt-sampler" for t in j["threads"])
        assert r.stderr.count("NVML query group 'temperature'") == 1, r.stderr
        assert "read every 10 samples (1 s)" in r.stderr

        # The text form prints the same table, costliest first.
        r = subprocess.run([gpuopt_bin(), *args], env=e, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        head = next(i for i, l in enumerate(lines) if l.startswith("NVML queries, costliest first"))
        assert lines[head + 1].split()[:2] == ["query", "cadence"]
        assert lines[head + 3].split()[:3] == ["temperature", "slow", "(moved)"], lines[head:head + 5]
        assert any(l.startswith("CPU by thread") for l in lines)
    finally:
        env.cleanup()


def test_slow_cadence_flags_and_errors():
    env = Env(script())
    try:
        r = run(env, "exporter", "--slow-interval", "often")
        assert r.returncode == 2 and "--slow-interval" in r.stderr and "'often'" in r.stderr
        assert r.stderr.strip().count("\n") == 0
        r = run(env, "exporter", "--slow-budget", "cheap")
        assert r.returncode == 2 and "--slow-budget" in r.stderr
        # Budget off: the slow temperature stays on the fast cadence.
        e = env.environ()
        e["GPUOPT_FAKE_NVML_DELAY_US"] = "nvmlDeviceGetTemperature=3000"
        r = subprocess.run([gpuopt_bin(), "exporter", "--self-bench", "--bench-seconds", "1", "--bench-warmup", "0",
                            "--bench-scrapes", "10", "--interval", "100ms", "--slow-budget", "0", "--json"],
                           env=e, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        t = next(x for x in json.loads(r.stdout)["queries"] if x["query"] == "temperature")
        assert t["cadence"] == "fast" and not t["moved"] and t["calls"] >= 8
        assert "NVML query group" not in r.stderr
    finally:
        env.cleanup()
