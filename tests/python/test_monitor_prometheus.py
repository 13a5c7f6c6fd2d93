"""A real Prometheus scrapes two gpuopt exporters on loopback (one over a scripted fake NVML with
two GPUs and processes in a fake container, one with no NVML at all); the values are read back
through Prometheus' HTTP API and compared with what the script says."""
import json
import os
import socket
import time

import pytest

from monitor_fixtures import (DOCKER_ID, MIB, Env, free_port, gpu, http_get, prom_query, prometheus_or_skip,
                              start_exporter, start_prometheus, stop, stop_prometheus)


def wait_series(base, q, n, deadline_s=90):
    end = time.time() + deadline_s
    res = []
    while time.time() < end:
        res = prom_query(base, q)
        if len(res) >= n:
            return res
        time.sleep(0.5)
    raise AssertionError(f"Prometheus has {len(res)} series for {q} after {deadline_s}s, expected {n}")


def by_gpu(results):
    return {r["metric"]["gpu"]: float(r["value"][1]) for r in results}


@pytest.fixture(scope="module")
def stack():
    prom_bin = prometheus_or_skip()
    script = {"driver_version": "580.65.06", "cuda_driver_version": 13000,
              "devices": [gpu(0, 87, 2000, 250.5,
                              {"processes": [{"pid": 4242, "used_memory": 1536 * MIB, "sm_util": 80},
                                             {"pid": 4343, "used_memory": 256 * MIB, "sm_util": 3}]}),
                          gpu(1, 12, 137000, 699.0)]}
    env = Env(script)
    env.add_process(4242, ["/usr/bin/python3", "train.py"], uid=0,
                    cgroup=f"0::/system.slice/docker-{DOCKER_ID}.scope\n")
    env.add_process(4343, ["/opt/bin/infer-server", "--port", "8000"], uid=0)
    port = free_port()
    port_nogpu = free_port()
    exp = start_exporter(env, port, "--interval", "250ms")
    exp_nogpu = start_exporter(env, port_nogpu, "--interval", "250ms", nvml="/nonexistent/libnvidia-ml.so.1")
    prom = None
    try:
        prom, base, data = start_prometheus(prom_bin, env.dir, f"""  - job_name: gpuopt
    static_configs:
      - targets: ['127.0.0.1:{port}']
  - job_name: gpuopt_nogpu
    static_configs:
      - targets: ['127.0.0.1:{port_nogpu}']
""")
        yield base, port
    finally:
        if prom:
            stop_prometheus(prom, data)
        stop(exp)
        stop(exp_nogpu)
        env.cleanup()


def test_targets_up(stack):
    base, _ = stack
    res = wait_series(base, "up == 1", 2)
    assert {r["metric"]["job"] for r in res} == {"gpuopt", "gpuopt_nogpu"}


def test_dcgm_gauges_match_the_script(stack):
    base, _ = stack
    util = wait_series(base, "DCGM_FI_DEV_GPU_UTIL", 2)
    assert by_gpu(util) == {"0": 87.0, "1": 12.0}
    assert by_gpu(wait_series(base, "DCGM_FI_DEV_MEM_COPY_UTIL", 2)) == {"0": 30.0, "1": 31.0}
    assert by_gpu(wait_series(base, "DCGM_FI_DEV_FB_USED", 2)) == {"0": 2000.0, "1": 137000.0}
    assert by_gpu(wait_series(base, "DCGM_FI_DEV_FB_RESERVED", 2)) == {"0": 771.0, "1": 771.0}
    assert by_gpu(wait_series(base, "DCGM_FI_DEV_FB_FREE", 2)) == {"0": 143771.0 - 2000 - 771, "1": 143771.0 - 137000 - 771}
    assert by_gpu(wait_series(base, "DCGM_FI_DEV_GPU_TEMP", 2)) == {"0": 40.0, "1": 41.0}
    assert by_gpu(wait_series(base, "DCGM_FI_DEV_MEMORY_TEMP", 2)) == {"0": 50.0, "1": 51.0}
    assert by_gpu(wait_series(base, "DCGM_FI_DEV_POWER_USAGE", 2)) == {"0": 250.5, "1": 699.0}
    assert by_gpu(wait_series(base, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 2)) == {"0": 1e6, "1": 2e6}
    assert by_gpu(wait_series(base, "DCGM_FI_DEV_SM_CLOCK", 2)) == {"0": 1980.0, "1": 1980.0}
    assert by_gpu(wait_series(base, "DCGM_FI_DEV_MEM_CLOCK", 2)) == {"0": 2619.0, "1": 2619.0}
    assert by_gpu(wait_series(base, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 2)) == {"0": 0.0, "1": 7.0}
    assert by_gpu(wait_series(base, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 2)) == {"0": 0.0, "1": 4.0}
    assert by_gpu(wait_series(base, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", 2)) == {"0": 3.0, "1": 3.0}
    # GPM: NVML percent -> DCGM ratio; MiB/s -> bytes/s.
    assert by_gpu(wait_series(base, "DCGM_FI_PROF_SM_ACTIVE", 2)) == {"0": 0.60, "1": 0.61}
    assert by_gpu(wait_series(base, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 2)) == {"0": 0.25, "1": 0.25}
    assert by_gpu(wait_series(base, "DCGM_FI_PROF_PCIE_TX_BYTES", 2)) == {"0": 100.0 * MIB, "1": 100.0 * MIB}


def test_dcgm_labels(stack):
    base, _ = stack
    res = wait_series(base, 'DCGM_FI_DEV_GPU_UTIL{gpu="1"}', 1)
    m = res[0]["metric"]
    assert m["UUID"] == "GPU-00000001-aaaa-bbbb-cccc-dddddddddddd"
    assert m["pci_bus_id"] == "00000000:1A:00.0"
    assert m["device"] == "nvidia1"
    assert m["modelName"] == "NVIDIA H200"
    assert m["Hostname"] == socket.gethostname()


def test_clock_event_reason_counters(stack):
    base, _ = stack
    res = wait_series(base, 'gpuopt_clock_event_reason_active{reason="sw_power_cap"}', 2)
    assert by_gpu(res) == {"0": 0.0, "1": 1.0}
    # Seconds under the power cap grow on GPU 1 only.
    end = time.time() + 30
    while time.time() < end:
        inc = by_gpu(prom_query(base, 'gpuopt_clock_event_reason_seconds_total{reason="sw_power_cap"}'))
        if inc.get("1", 0) > 1.0:
            break
        time.sleep(0.5)
    assert inc["1"] > 1.0 and inc["0"] == 0.0


def test_process_memory_with_container_id(stack):
    base, _ = stack
    res = wait_series(base, "gpuopt_process_gpu_memory_bytes", 2)
    procs = {r["metric"]["pid"]: r for r in res}
    assert float(procs["4242"]["value"][1]) == 1536 * MIB
    assert procs["4242"]["metric"]["container_id"] == DOCKER_ID
    assert procs["4242"]["metric"]["process_name"] == "python3"
    assert procs["4242"]["metric"]["user"] == "root"
    assert procs["4343"]["metric"].get("container_id", "") == ""
    assert procs["4343"]["metric"]["process_name"] == "infer-server"
    sm = {r["metric"]["pid"]: float(r["value"][1]) for r in wait_series(base, "gpuopt_process_sm_util", 2)}
    assert sm == {"4242": 80.0, "4343": 3.0}


def test_diagnosis_metric(stack):
    base, _ = stack
    # GPU 1: 137000 + 771 of 143771 MiB = 95.8% -> memory_pressure warning (2); GPU 0 fine (0).
    res = wait_series(base, 'gpuopt_diagnosis{rule="memory_pressure"}', 2)
    assert by_gpu(res) == {"0": 0.0, "1": 2.0}
    pw = by_gpu(wait_series(base, 'gpuopt_diagnosis{rule="power_throttling"}', 2))
    assert pw == {"0": 0.0, "1": 2.0}
    # GPU 1 at 12% with processes absent: low utilisation needs activity -> util > idle threshold -> fires.
    end = time.time() + 30
    while time.time() < end:
        low = by_gpu(prom_query(base, 'gpuopt_diagnosis{rule="low_utilization"}'))
        if low.get("1") == 2.0:
            break
        time.sleep(0.5)
    assert low == {"0": 0.0, "1": 2.0}
    rules = {r["metric"]["rule"] for r in prom_query(base, 'gpuopt_diagnosis{gpu="0"}')}
    assert {"memory_pressure", "thermal_throttling", "pcie_bound", "xid_errors", "ecc_errors", "idle_gaps",
            "memory_bound", "compute_bound", "gpu_lost"} <= rules


def test_no_gpu_exporter_says_why(stack):
    base, _ = stack
    res = wait_series(base, 'gpuopt_exporter_no_gpu{job="gpuopt_nogpu"}', 1)
    assert "NVML not found" in res[0]["metric"]["reason"]
    assert float(wait_series(base, 'gpuopt_exporter_gpus{job="gpuopt_nogpu"}', 1)[0]["value"][1]) == 0
    assert prom_query(base, 'DCGM_FI_DEV_GPU_UTIL{job="gpuopt_nogpu"}') == []
    assert wait_series(base, 'gpuopt_build_info{job="gpuopt_nogpu"}', 1)[0]["metric"]["version"]


def test_samples_keep_coming(stack):
    base, port = stack
    a = float(wait_series(base, 'gpuopt_exporter_samples_total{job="gpuopt"}', 1)[0]["value"][1])
    time.sleep(2.5)
    b = float(wait_series(base, 'gpuopt_exporter_samples_total{job="gpuopt"}', 1)[0]["value"][1])
    assert b > a


def _dashboard_exprs():
    src = os.environ.get("GPUOPT_TEST_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    with open(os.path.join(src, "deploy", "grafana", "gpuopt-dashboard.json")) as f:
        dash = json.load(f)
    exprs = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            exprs.append(t["expr"])
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            exprs.append(v["definition"])
    return src, exprs


def test_grafana_dashboard_queries_run_and_use_documented_metrics(stack):
    import re
    base, _ = stack
    src, exprs = _dashboard_exprs()
    with open(os.path.join(src, "docs", "monitoring.md")) as f:
        doc = f.read()
    with_data = 0
    exprs = [e for e in exprs if not re.search(r"\b(nv_inference|gpuopt_inference)_", e)]
    for e in exprs:  # the serving panels' queries run in tests/python/test_deploy_grafana.py
        names = set(re.findall(r"\b((?:DCGM_FI|gpuopt)_[A-Za-z0-9_]+)", e))
        for n in names:
            assert f"`{n}`" in doc, f"{n} (dashboard) is not in docs/monitoring.md"
        if e.startswith("label_values("):
            continue
        q = e.replace("$Hostname", ".*").replace("$gpu", ".*")
        res = prom_query(base, q)  # asserts Prometheus accepted the expression
        with_data += bool(res)
    assert with_data >= len(exprs) // 2, "most dashboard queries should return data from the fake GPUs"


def test_every_exported_metric_is_documented(stack):
    _, port = stack
    src, _ = _dashboard_exprs()
    with open(os.path.join(src, "docs", "monitoring.md")) as f:
        doc = f.read()
    _, _, body = http_get(f"http://127.0.0.1:{port}/metrics")
    families = [l.split()[2] for l in body.splitlines() if l.startswith("# TYPE ")]
    assert len(families) > 30
    missing = [n for n in families if f"`{n}`" not in doc]
    assert not missing, f"metrics missing from docs/monitoring.md: {missing}"
