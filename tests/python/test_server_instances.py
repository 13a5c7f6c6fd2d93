"""Two CPU instances of one model behind the batcher, under concurrent load from Triton's own
clients (HTTP and gRPC, JSON and binary tensors): every request is answered exactly once with
ONNX Runtime's result for its own input, both instances run (per-instance metrics), their
counts add up to the model's, and SIGTERM drains what is in flight. The same with the batches
overlapped on each instance (parameters gpuopt.pipeline on: the staged next batch is begun before
the current one is finished; on the CPU each batch runs inside its begin)."""
import os
import sys
import threading
import urllib.request

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as H  # noqa: E402

httpclient = pytest.importorskip("tritonclient.http")
grpcclient = pytest.importorskip("tritonclient.grpc")
ort = pytest.importorskip("onnxruntime")

THREADS = 8
PER_THREAD = 25


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def samples(text, name):
    """{labels text: value} of one metric family's samples."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, value = line[len(name):].rsplit(" ", 1)
            out[labels] = float(value)
    return out


def x_for(i):
    rows = 1 + i % 3  # 1..3 rows per request: batches mix request sizes
    return np.random.default_rng(1000 + i).standard_normal((rows, 32)).astype(np.float32)


def two_instance_mlp(root, pipeline=False):
    """A repository in `root` with the mlp on two CPU instances (2 ms queue delay, batches up to 8);
    returns ONNX Runtime's session of the same model, the oracle."""
    H.mlp_model(str(root / "mlp" / "1" / "model.onnx"))
    with open(root / "mlp" / "config.pbtxt", "w") as f:
        f.write('max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 2000 }\n'
                'instance_group [ { count: 2 kind: KIND_CPU } ]\n')
        if pipeline:
            f.write('parameters { key: "gpuopt.pipeline" value: { string_value: "on" } }\n')
    return ort.InferenceSession(str(root / "mlp" / "1" / "model.onnx"), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("pipeline", [False, True], ids=["plain", "pipeline"])
def test_two_instances_share_the_load(tmp_path, pipeline):
    sess = two_instance_mlp(tmp_path, pipeline)
    with H.Server(["--model-repository", str(tmp_path)]) as s:
        results, errors = {}, []
        lock = threading.Lock()

        def worker(t):
            try:
                use_grpc = t % 2 == 1
                mod = grpcclient if use_grpc else httpclient
                c = mod.InferenceServerClient(s.grpc_url if use_grpc else s.url)
                for k in range(PER_THREAD):
                    i = t * PER_THREAD + k
                    x = x_for(i)
                    inp = mod.InferInput("X", list(x.shape), "FP32")
                    if use_grpc:
                        inp.set_data_from_numpy(x)
                    else:
                        inp.set_data_from_numpy(x, binary_data=k % 2 == 0)
                    r = c.infer("mlp", [inp], request_id=f"r{i}")
                    rid = r.get_response().id if use_grpc else r.get_response()["id"]
                    assert rid == f"r{i}", (rid, i)
                    with lock:
                        assert i not in results, f"request {i} answered twice"
                        results[i] = r.as_numpy("Y")
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        ts = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        assert not errors, errors[:3]
        n = THREADS * PER_THREAD
        assert sorted(results) == list(range(n))  # none lost, none twice
        for i, y in results.items():
            x = x_for(i)
            np.testing.assert_allclose(y, sess.run(None, {"X": x})[0], rtol=1e-4, atol=1e-5)

        c = httpclient.InferenceServerClient(s.url)
        st = c.get_inference_statistics("mlp")["model_stats"][0]
        text = metrics(s.metrics_port)
        execs = samples(text, "gpuopt_instance_execution_count")
        rows = samples(text, "gpuopt_instance_inference_count")
        assert len(execs) == 2, execs  # one sample per instance
        assert all(v >= 1 for v in execs.values()), execs  # both instances ran
        assert sum(execs.values()) == st["execution_count"]
        assert sum(rows.values()) == st["inference_count"] == sum(len(x_for(i)) for i in range(n))
        conc = samples(text, "gpuopt_instance_concurrency_max")
        assert list(conc.values())[0] in (1, 2), conc
        assert s.stop()[0] == 0


def test_sigterm_drains_both_instances(tmp_path):
    sess = two_instance_mlp(tmp_path)
    with H.Server(["--model-repository", str(tmp_path)]) as s:
        answered, refused, other = [], [], []
        started = threading.Event()

        def worker(t):
            c = httpclient.InferenceServerClient(s.url)
            for k in range(200):
                i = t * 200 + k
                x = x_for(i)
                inp = httpclient.InferInput("X", list(x.shape), "FP32")
                inp.set_data_from_numpy(x, binary_data=True)
                try:
                    y = c.infer("mlp", [inp]).as_numpy("Y")
                    np.testing.assert_allclose(y, sess.run(None, {"X": x})[0], rtol=1e-4, atol=1e-5)
                    answered.append(i)
                    started.set()
                except Exception as e:  # noqa: BLE001  refused (503) or connection closed: the server is stopping
                    msg = str(e)
                    (refused if ("503" in msg or "shutting down" in msg or "onnect" in msg
                                 or "closed" in msg or "reset" in msg) else other).append(msg)
                    return

        ts = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
        for t in ts:
            t.start()
        assert started.wait(60)
        code, secs, tail = s.stop()
        for t in ts:
            t.join(60)
        assert code == 0, tail[-3000:]
        assert not other, other[:3]  # every request was answered right, or refused cleanly
        assert answered
