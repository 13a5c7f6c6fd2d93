"""`gpuopt perf` against a real server for a few seconds: --input-data in perf_analyzer's format
(every response checked against validation_data computed by numpy), its figures against the
server's statistics endpoint, the Poisson open loop, and bad data files refused with one line."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from gpuopt_cli import gpuopt_bin
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as H  # noqa: E402

pytest.importorskip("onnx")


def stats(url, model):
    import urllib.request
    with urllib.request.urlopen(f"http://{url}/v2/models/{model}/stats", timeout=10) as r:
        return json.loads(r.read())["model_stats"][0]


def regions(url):
    import urllib.request
    with urllib.request.urlopen(f"http://{url}/v2/systemsharedmemory/status", timeout=10) as r:
        return json.loads(r.read())


def perf(url, args):
    cmd = [gpuopt_bin(), "perf", "-m", "simple", "-u", url, "--json"] + args
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=300)
    r = subprocess.CompletedProcess(cmd, p.returncode, out, err)
    r.pid = p.pid  # its shared-memory regions are named gpuopt_perf_<pid>_...
    return r


def leftover_regions(*runs):
    """/dev/shm objects of these perf runs still there (other tests' perf runs may be under way)."""
    return [f for f in os.listdir("/dev/shm") for r in runs if f.startswith(f"gpuopt_perf_{r.pid}_")]


def data_file(path, rows, wrong=False):
    rng = np.random.default_rng(5)
    data, valid = [], []
    for _ in range(rows):
        a = rng.standard_normal(16).astype(np.float32)
        b = rng.standard_normal(16).astype(np.float32)
        data.append({"INPUT0": a.tolist(), "INPUT1": {"content": b.tolist(), "shape": [16]}})
        valid.append({"OUTPUT0": (a + b + (1.0 if wrong else 0.0)).tolist(), "OUTPUT1": (a - b).tolist()})
    path.write_text(json.dumps({"data": data, "validation_data": valid}))
    return path


def test_input_data_validated_and_stats_agree(tmp_path):
    H.make_repository(str(tmp_path / "repo"), delay_us=1000)
    good = data_file(tmp_path / "good.json", 3)
    with H.Server(["--model-repository", str(tmp_path / "repo")]) as s:
        before = stats(s.url, "simple")
        r = perf(s.url, ["--input-data", str(good), "-b", "2", "--concurrency-range", "2", "-p", "400", "-r", "3"])
        assert r.returncode == 0, r.stdout + r.stderr
        lv = json.loads(r.stdout)["results"][0]
        after = stats(s.url, "simple")
        assert lv["errors"] == 0 and lv["sent"] > 0
        # Every request perf counted is one the server counted, and each carried 2 samples.
        inf_b, inf_a = before["inference_stats"], after["inference_stats"]
        assert inf_a["success"]["count"] - inf_b["success"]["count"] == lv["sent"]
        assert after["inference_count"] - before["inference_count"] == 2 * lv["sent"]
        assert 0 < after["execution_count"] - before["execution_count"] <= lv["sent"]
        assert lv["requests"] <= lv["sent"]  # the windows perf kept are part of what it sent
        assert lv["p50_us"] <= lv["p99_us"] and lv["throughput_infer_per_s"] > 0
        # perf's own CPU use over the windows (getrusage): some, and no more than the host has.
        assert 0 < lv["client_cpu_cores"] <= (os.cpu_count() or 1) + 0.5, lv["client_cpu_cores"]
        # The server-side breakdown comes from the same endpoint: the parts fit in the whole.
        assert 0 < lv["server_compute_infer_us"] <= lv["server_request_us"]
        parts = lv["server_queue_us"] + lv["server_compute_input_us"] + lv["server_compute_infer_us"] + \
            lv["server_compute_output_us"]
        assert parts <= lv["server_request_us"] * 1.0001

        # Wrong expected outputs: every response fails validation, perf says which element.
        bad = data_file(tmp_path / "bad.json", 2, wrong=True)
        r = perf(s.url, ["--input-data", str(bad), "-p", "200", "-r", "1"])
        assert r.returncode == 1
        assert "validation: output 'OUTPUT0' element 0" in r.stderr, r.stderr

        # Poisson arrivals in the open loop: runs, and the server saw what perf sent.
        before = stats(s.url, "simple")
        r = perf(s.url, ["--input-data", str(good), "--request-rate-range", "100", "--request-distribution", "poisson",
                         "-p", "400", "-r", "3"])
        assert r.returncode == 0, r.stderr
        lv = json.loads(r.stdout)["results"][0]
        after = stats(s.url, "simple")
        assert lv["errors"] == 0 and lv["request_rate"] == 100
        assert after["inference_stats"]["success"]["count"] - before["inference_stats"]["success"]["count"] == lv["sent"]


@pytest.mark.parametrize("proto,shm,mode", [("grpc", "none", []), ("grpc", "none", ["-a"]), ("grpc", "system", []),
                                           ("http", "system", [])])
def test_input_data_over_grpc_and_shared_memory(tmp_path, proto, shm, mode):
    """--input-data through the other transports: every entry's inputs from the worker's shared
    memory region or gRPC's raw contents, every answer (read back from the output region when
    outputs go there) checked against validation_data, `sent` equal to the server's count; with
    -a the calls of a level go through completion queues (several in flight per thread)."""
    H.make_repository(str(tmp_path / "repo"), delay_us=500)
    good = data_file(tmp_path / "good.json", 3)
    bad = data_file(tmp_path / "bad.json", 2, wrong=True)
    with H.Server(["--model-repository", str(tmp_path / "repo")]) as s:
        url = s.grpc_url if proto == "grpc" else s.url
        transport = ["-i", proto, "--shared-memory", shm] + mode
        before = stats(s.url, "simple")
        r = good_run = perf(url, transport + ["--input-data", str(good), "-b", "2", "--concurrency-range",
                                              "6" if mode else "2", "-p", "300", "-r", "2"])
        assert r.returncode == 0, r.stdout + r.stderr
        out = json.loads(r.stdout)
        assert out["protocol"] == proto and out["shared_memory"] == shm
        lv = out["results"][0]
        after = stats(s.url, "simple")
        assert lv["errors"] == 0 and lv["sent"] > 0, (lv, r.stderr)
        assert lv["first_error"] == "" and "requests failed" not in r.stderr
        assert after["inference_stats"]["success"]["count"] - before["inference_stats"]["success"]["count"] == lv["sent"]
        assert after["inference_count"] - before["inference_count"] == 2 * lv["sent"]
        # The server's breakdown comes with the figures (its stats over the measured windows).
        assert lv["server_compute_infer_us"] > 0 and lv["server_request_us"] >= lv["server_compute_infer_us"]

        r = perf(url, transport + ["--input-data", str(bad), "-p", "200", "-r", "1"])
        assert r.returncode == 1
        assert "validation: output 'OUTPUT0' element 0" in r.stderr, r.stderr
        # Every worker unregistered its regions from the server, the failed run's too.
        assert regions(s.url) == []
    assert not leftover_regions(good_run, r)


@pytest.mark.parametrize("content,message", [
    ("[1, 2]", "expected {\"data\""),
    ("{\"data\": [{\"INPUT0\": [1, 2]}]}", "'INPUT0' has 2 values, its shape [16] needs 16"),
    (json.dumps({"data": [{"INPUT0": [0] * 16, "INPUT1": [0] * 16, "NOPE": [1]}]}), "the model has no input 'NOPE'"),
    ("{\"data\": [{\"INPUT0\": [\"x\"]}]}", "entry 0"),
    ("{\"data\": [{}], \"validation_data\": []}", "one entry per data entry"),
    ("not json", "not JSON"),
])
def test_bad_input_data(tmp_path, content, message):
    H.make_repository(str(tmp_path / "repo"))
    f = tmp_path / "d.json"
    f.write_text(content)
    with H.Server(["--model-repository", str(tmp_path / "repo")]) as s:
        r = perf(s.url, ["--input-data", str(f), "-p", "100", "-r", "1"])
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and str(f) in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
