"""`gpuopt serve` under bounded, self-stopping load: dynamic batching visible in stats and the
batch-size histogram with results equal to unbatched runs, SIGTERM while loaded (every request
answered correctly or with 503, none hangs, exit in time), and a real Prometheus scraping
/metrics."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as H  # noqa: E402

httpclient = pytest.importorskip("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def metric_value(text, name, labels):
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def mlp_input(i):
    return np.random.default_rng(100 + i).standard_normal((1, 32)).astype(np.float32)


def test_batching_equals_unbatched(tmp_path):
    weights = H.make_repository(str(tmp_path), delay_us=20000)
    # The mlp has no config: give it batching with a delay through a config file.
    with open(tmp_path / "mlp" / "config.pbtxt", "w") as f:
        f.write('max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 20000 }\n')
    with H.Server(["--model-repository", str(tmp_path)]) as s:
        # Unbatched reference: one request at a time through the same server.
        c = httpclient.InferenceServerClient(s.url)
        ref = {}
        for i in range(16):
            x = mlp_input(i)
            inp = httpclient.InferInput("X", x.shape, "FP32")
            inp.set_data_from_numpy(x)
            ref[i] = c.infer("mlp", [inp]).as_numpy("Y")
            np.testing.assert_allclose(ref[i], H.mlp_reference(x, weights), rtol=1e-4, atol=1e-5)
        before = c.get_inference_statistics("mlp")["model_stats"][0]
        results, errors = {}, []

        def worker(i):
            try:
                cl = httpclient.InferenceServerClient(s.url)
                x = mlp_input(i)
                inp = httpclient.InferInput("X", x.shape, "FP32")
                inp.set_data_from_numpy(x, binary_data=i % 2 == 0)
                results[i] = cl.infer("mlp", [inp]).as_numpy("Y")
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        for _ in range(3):
            ts = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(60)
        assert not errors, errors
        for i in range(16):
            # Same rows in a batch give the same numbers as alone (row-independent kernels).
            np.testing.assert_allclose(results[i], ref[i], rtol=1e-5, atol=1e-6)
        after = c.get_inference_statistics("mlp")["model_stats"][0]
        execs = after["execution_count"] - before["execution_count"]
        infers = after["inference_count"] - before["inference_count"]
        assert infers == 48
        assert execs < infers, (execs, infers)
        big = [b for b in after["batch_stats"] if b["batch_size"] > 1]
        assert big, after["batch_stats"]
        text = metrics(s.metrics_port)
        lbl = {"model": "mlp", "version": "1"}
        assert metric_value(text, "nv_inference_count", lbl) == after["inference_count"]
        assert metric_value(text, "nv_inference_exec_count", lbl) == after["execution_count"]
        le1 = metric_value(text, "gpuopt_inference_batch_size_bucket", dict(lbl, le="1"))
        total = metric_value(text, "gpuopt_inference_batch_size_bucket", dict(lbl, le="+Inf"))
        assert total == after["execution_count"] and le1 < total  # some batches had more than one row
        assert metric_value(text, "nv_inference_request_success", lbl) == 64
        assert s.stop()[0] == 0


def test_sigterm_under_load(tmp_path):
    H.make_repository(str(tmp_path), delay_us=2000)
    s = H.Server(["--model-repository", str(tmp_path), "--exit-timeout-secs", "10"])
    stop = threading.Event()
    counts = {"ok": 0, "503": 0, "refused": 0, "wrong": 0, "other": []}
    lock = threading.Lock()

    def worker(wid):
        rng = np.random.default_rng(wid)
        try:
            cl = httpclient.InferenceServerClient(s.url, network_timeout=20, connection_timeout=5)
        except Exception as e:  # noqa: BLE001
            with lock:
                counts["other"].append(repr(e))
            return
        while not stop.is_set():
            a = rng.standard_normal((2, 16)).astype(np.float32)
            ins = [httpclient.InferInput("INPUT0", a.shape, "FP32"), httpclient.InferInput("INPUT1", a.shape, "FP32")]
            ins[0].set_data_from_numpy(a)
            ins[1].set_data_from_numpy(a)
            try:
                r = cl.infer("simple", ins)
                key = "ok" if np.array_equal(r.as_numpy("OUTPUT0"), a + a) else "wrong"
            except InferenceServerException as e:
                key = "503" if e.status() == "503" else None
                if key is None:
                    # The connection closed by the stopped server: refused, not hung.
                    key = "refused" if e.status() is None else None
                if key is None:
                    with lock:
                        counts["other"].append(f"{e.status()} {e.message()}")
                    continue
            except Exception:  # noqa: BLE001 (connection refused/reset after exit)
                key = "refused"
            with lock:
                counts[key] += 1
            if key == "refused":
                return

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    time.sleep(1.5)
    assert counts["ok"] > 0
    code, secs, out = s.stop(signal.SIGTERM, timeout=30)
    stop.set()
    for t in ts:
        t.join(30)
        assert not t.is_alive(), "a client hung"
    assert code == 0, out
    assert secs < 12, secs
    assert "Server stopped cleanly" in out
    assert counts["wrong"] == 0
    assert not counts["other"], counts["other"]
    print(counts)


def free_port():
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus is not installed")
def test_prometheus_scrapes_metrics(tmp_path):
    H.make_repository(str(tmp_path / "repo"))
    with H.Server(["--model-repository", str(tmp_path / "repo")]) as s:
        prom_port = free_port()
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: gpuopt
    static_configs:
      - targets: ['127.0.0.1:{s.metrics_port}']
""")
        prom = subprocess.Popen(["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'data'}",
                                 f"--web.listen-address=127.0.0.1:{prom_port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            c = httpclient.InferenceServerClient(s.url)
            a = np.ones((1, 16), np.float32)
            ins = [httpclient.InferInput("INPUT0", a.shape, "FP32"), httpclient.InferInput("INPUT1", a.shape, "FP32")]
            for i in ins:
                i.set_data_from_numpy(a)
            n = 25
            for _ in range(n):
                c.infer("simple", ins)
            q = urllib.parse.quote('nv_inference_request_success{model="simple",version="1"}')
            got, up = None, None
            deadline = time.time() + 60
            while time.time() < deadline:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/api/v1/query?query={q}", timeout=5) as r:
                        res = json.loads(r.read())["data"]["result"]
                    if res:
                        got = float(res[0]["value"][1])
                        if got == n:
                            break
                    with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/api/v1/query?query=up", timeout=5) as r:
                        up = json.loads(r.read())["data"]["result"]
                except (urllib.error.URLError, ConnectionError):
                    pass
                time.sleep(0.5)
            assert got == n, (got, up)
            # A histogram Prometheus can aggregate: count of executions of the batch-size histogram.
            q2 = urllib.parse.quote('sum(gpuopt_inference_batch_size_count{model="simple"})')
            with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/api/v1/query?query={q2}", timeout=5) as r:
                res = json.loads(r.read())["data"]["result"]
            assert float(res[0]["value"][1]) >= 1
        finally:
            prom.terminate()
            prom.wait(20)
        assert s.stop()[0] == 0
