"""Shared helpers for the monitor/exporter tests: fake NVML scripts, a fake /proc, free ports,
and starting the gpuopt binary against them."""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

MIB = 1 << 20
DOCKER_ID = "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa00112233445566778899"


def gpuopt_bin():
    b = os.environ.get("GPUOPT_BIN")
    if not b or not os.path.exists(b):
        pytest.skip("GPUOPT_BIN not set (run through ctest)")
    return b


def fake_nvml():
    lib = os.environ.get("GPUOPT_FAKE_NVML")
    if not lib or not os.path.exists(lib):
        pytest.skip("GPUOPT_FAKE_NVML not set (run through ctest)")
    return lib


def gpu(index, util, mem_used_mib, power_w, extra=None):
    d = {
        "name": "NVIDIA H200",
        "uuid": f"GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd",
        "pci": {"bus_id": f"00000000:{0x19 + index:02X}:00.0"},
        "compute_capability": "9.0",
        "utilization": {"gpu": util, "memory": 30 + index},
        "memory": {"total": 143771 * MIB, "reserved": 771 * MIB,
                   "used": [m * MIB for m in mem_used_mib] if isinstance(mem_used_mib, list) else mem_used_mib * MIB},
        "temperature": 40 + index,
        "memory_temperature": 50 + index,
        "power_usage_mw": int(power_w * 1000),
        "enforced_power_limit_mw": 700000,
        "total_energy_mj": 1000000 * (index + 1),
        "clocks": {"sm": 1980, "mem": 2619},
        "max_clocks": {"sm": 1980, "mem": 2619},
        "pcie": {"tx_kbps": 1000, "rx_kbps": 2000, "replay_counter": 7 * index},
        "clocks_event_reasons": "sw_power_cap" if index == 1 else 0,
        "ecc": {"enabled": 1, "corrected_volatile": 0, "uncorrected_volatile": 0,
                "corrected_aggregate": 3, "uncorrected_aggregate": 0},
        "mig": {"current": 0},
        "gpm": {"supported": 1, "metrics": {"sm_util": 60 + index, "any_tensor_util": 25, "dram_bw_util": 40,
                                            "fp16_util": 10, "pcie_tx_per_sec": 100, "pcie_rx_per_sec": 50}},
        "processes": [],
    }
    if extra:
        d.update(extra)
    return d


class Env:
    """A temp dir holding a fake NVML script and a fake /proc tree."""

    def __init__(self, script):
        self.dir = tempfile.mkdtemp(prefix="gpuopt_mon_")
        self.script = os.path.join(self.dir, "nvml.json")
        with open(self.script, "w") as f:
            json.dump(script, f)
        self.proc = os.path.join(self.dir, "proc")
        os.makedirs(self.proc)
        self.procs = []

    def add_process(self, pid, cmdline, uid=0, cgroup="0::/user.slice\n"):
        p = os.path.join(self.proc, str(pid))
        os.makedirs(p)
        with open(os.path.join(p, "cmdline"), "wb") as f:
            f.write(b"\0".join(a.encode() for a in cmdline) + b"\0")
        with open(os.path.join(p, "status"), "w") as f:
            f.write(f"Name:\t{os.path.basename(cmdline[0])}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
        with open(os.path.join(p, "cgroup"), "w") as f:
            f.write(cgroup)

    def environ(self, nvml=None):
        e = dict(os.environ)
        e["GPUOPT_NVML_LIBRARY"] = nvml or fake_nvml()
        e["GPUOPT_FAKE_NVML_SCRIPT"] = self.script
        e["GPUOPT_PROC_ROOT"] = self.proc
        return e

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()


def wait_http(url, deadline_s=30, proc=None):
    end = time.time() + deadline_s
    last = None
    while time.time() < end:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        try:
            return http_get(url)
        except Exception as e:  # noqa: BLE001 - not up yet
            last = e
            time.sleep(0.1)
    raise AssertionError(f"{url} did not answer within {deadline_s}s: {last}")


def start_exporter(env, port, *args, nvml=None):
    p = subprocess.Popen([gpuopt_bin(), "exporter", "--listen", f"127.0.0.1:{port}", *args],
                         env=env.environ(nvml), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_http(f"http://127.0.0.1:{port}/health", proc=p)
    return p


def stop(p):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


# ---- a real Prometheus (Debian package prometheus) --------------------------------------------

def prometheus_or_skip():
    """The prometheus binary; skips the test where it is not installed."""
    prom_bin = shutil.which("prometheus")
    if not prom_bin:
        pytest.skip("prometheus binary not installed (Debian package prometheus)")
    return prom_bin


def start_prometheus(prom_bin, config_dir, scrape_configs):
    """Prometheus on a free loopback port, scraping and evaluating every second with
    `scrape_configs` (the YAML of that list), once it answers ready. Returns (process, base URL,
    data dir); stop_prometheus ends it."""
    port = free_port()
    cfg = os.path.join(config_dir, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n" + scrape_configs)
    data = tempfile.mkdtemp(prefix="gpuopt_prom_")
    prom = subprocess.Popen([prom_bin, f"--config.file={cfg}", f"--storage.tsdb.path={data}",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/-/ready", deadline_s=60, proc=prom)
    except BaseException:
        stop_prometheus(prom, data)
        raise
    return prom, base, data


def stop_prometheus(prom, data):
    stop(prom)
    shutil.rmtree(data, ignore_errors=True)


def prom_query(base, q, t=None):
    """The result list of an instant PromQL query (at time t, default now)."""
    at = f"&time={t}" if t is not None else ""
    status, _, body = http_get(f"{base}/api/v1/query?query={urllib.parse.quote(q)}{at}")
    assert status == 200
    j = json.loads(body)
    assert j["status"] == "success", (q, j)
    return j["data"]["result"]
