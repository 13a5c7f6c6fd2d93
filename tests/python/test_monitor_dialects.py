"""`gpuopt exporter` with dcgm-exporter's flags (-a, -c, -f counters CSV, -k; the rest refused by
name) and `gpuopt monitor -i/--id` as nvidia-smi, over the fake NVML with two GPUs."""
import json
import re
import subprocess
import time

from monitor_fixtures import Env, free_port, gpu, gpuopt_bin, http_get, stop, wait_http


def script():
    return {"driver_version": "580.65.06", "cuda_driver_version": 13000,
            "devices": [gpu(0, 20, 1000, 300.0), gpu(1, 70, 5000, 500.0)]}


def run(env, *args, timeout=60):
    return subprocess.run([gpuopt_bin(), *args], env=env.environ(), capture_output=True, text=True, timeout=timeout)


def families(body):
    return {m.group(1) for m in re.finditer(r"^(DCGM_FI_[A-Z0-9_]+)[{ ]", body, re.M)}


def test_dcgm_exporter_flags(tmp_path):
    env = Env(script())
    counters = tmp_path / "counters.csv"
    counters.write_text("# Format\n# DCGM FIELD, Prometheus metric type, help message\n\n"
                        "DCGM_FI_DEV_GPU_UTIL,      gauge, GPU utilization (in %).\n"
                        "DCGM_FI_DEV_FB_USED ,      gauge, Framebuffer memory used (in MiB).\n"
                        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, counter, NVLink bandwidth.\n"
                        "DCGM_FI_DEV_VGPU_LICENSE_STATUS, gauge, vGPU License status\n")
    port = free_port()
    p = subprocess.Popen([gpuopt_bin(), "exporter", "-a", f":{port}", "-c", "200", "-f", str(counters)],
                         env=env.environ(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", proc=p)
        _, _, body = http_get(f"http://127.0.0.1:{port}/metrics")
        assert families(body) == {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"}, families(body)
        assert "# TYPE DCGM_FI_DEV_GPU_UTIL gauge" in body and "# HELP DCGM_FI_DEV_POWER_USAGE" not in body
        assert re.search(r'^DCGM_FI_DEV_GPU_UTIL\{gpu="1".*\} 70$', body, re.M), body
        assert "gpuopt_exporter_samples_total" in body  # gpuopt's own series stay
        # -c 200: samples every 200 ms
        a = int(re.search(r"^gpuopt_exporter_samples_total\S* (\d+)", body, re.M).group(1))
        time.sleep(1.2)
        _, _, body = http_get(f"http://127.0.0.1:{port}/metrics")
        b = int(re.search(r"^gpuopt_exporter_samples_total\S* (\d+)", body, re.M).group(1))
        assert 3 <= b - a <= 9, (a, b)  # 1 s would give 1 or 2
    finally:
        stop(p)
        env.cleanup()
    err = p.stderr.read()
    warn = [l for l in err.splitlines() if "not exported by gpuopt" in l]
    assert len(warn) == 1, err
    assert "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL" in warn[0] and "DCGM_FI_DEV_VGPU_LICENSE_STATUS" in warn[0]
    assert "DCGM_FI_DEV_GPU_UTIL" not in warn[0]


def test_dcgm_exporter_refused_and_bad_values(tmp_path):
    env = Env(script())
    bad = tmp_path / "bad.csv"
    bad.write_text("gpu_util, gauge, not a DCGM name\n")
    try:
        for argv, wants in [
            (["-r", "localhost:5555"], ["--remote-hostengine-info", "not supported"]),
            (["--use-old-namespace"], ["--use-old-namespace", "not supported"]),
            (["-c", "0"], ["--collect-interval", "1..3600000"]),
            (["-a", ":1", "--listen", ":2"], ["--address", "--listen"]),
            (["-f", str(bad)], ["line 1", "'gpu_util'", "DCGM_FI_"]),
        ]:
            r = run(env, "exporter", *argv)
            assert r.returncode == 2, (argv, r.returncode, r.stderr)
            lines = [l for l in r.stderr.splitlines() if l.strip()]
            assert len(lines) == 1, r.stderr
            for w in wants:
                assert w in lines[0], (w, lines[0])
        r = run(env, "exporter", "-f", str(tmp_path / "missing.csv"))
        assert r.returncode == 1 and "missing.csv" in r.stderr
    finally:
        env.cleanup()


def test_monitor_id_selects_gpus():
    env = Env(script())
    try:
        r = run(env, "monitor", "--json", "--interval", "50ms", "--count", "1", "-i", "1")
        assert r.returncode == 0, r.stderr
        g = json.loads(r.stdout)["gpus"]
        assert [x["index"] for x in g] == [1] and g[0]["gpu_util_pct"] == 70
        r = run(env, "monitor", "--json", "--interval", "50ms", "--count", "1",
                "--id", "GPU-00000000-aaaa-bbbb-cccc-dddddddddddd,1")
        assert r.returncode == 0, r.stderr
        assert [x["index"] for x in json.loads(r.stdout)["gpus"]] == [0, 1]
        r = run(env, "monitor", "--once", "--interval", "50ms", "--id", "0")
        assert r.returncode == 0 and "GPU 1" not in r.stdout, r.stdout
        r = run(env, "monitor", "--once", "--id", "7")
        assert r.returncode == 1 and "no GPU '7'" in r.stderr and "2 GPU(s)" in r.stderr, r.stderr
        r = run(env, "monitor", "--once", "--id", "0,,1")
        assert r.returncode == 2 and "empty entry" in r.stderr, r.stderr
    finally:
        env.cleanup()
