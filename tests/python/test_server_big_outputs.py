"""Many concurrent batch-1 requests whose answer is large (a [1, 128, 768] f32 hidden state, 393 KB,
as BERT-base's last_hidden_state) against a dynamically batched model: each answer is that request's
own rows, equal to numpy's result for its input, over HTTP with binary outputs, HTTP with JSON
outputs and gRPC (raw_output_contents), with Triton's clients; and the requests were batched (the
answers are slices of a batch's output, sent while other batches run)."""
import os
import sys
import threading

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as H  # noqa: E402

grpcclient = pytest.importorskip("tritonclient.grpc")
httpclient = pytest.importorskip("tritonclient.http")

SEQ, HIDDEN, MAX_BATCH = 128, 768, 32


def make_repo(root):
    """hidden: Y[b, 128, 768] = X[b, 128, 1] * W[1, 1, 768] + C[1, 128, 768], and P[b, 768] = Y[:, 0, :]
    (a pooler-sized second output); every request's answer depends on its own input."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((1, 1, HIDDEN)).astype(np.float32)
    c = rng.standard_normal((1, SEQ, HIDDEN)).astype(np.float32)
    v = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)  # noqa: E731
    nodes = [helper.make_node("Mul", ["X", "W"], ["XW"]), helper.make_node("Add", ["XW", "C"], ["Y"]),
             helper.make_node("Gather", ["Y", "zero"], ["P"], axis=1)]
    g = helper.make_graph(nodes, "hidden", [v("X", ["b", SEQ, 1])], [v("Y", ["b", SEQ, HIDDEN]), v("P", ["b", HIDDEN])],
                          [numpy_helper.from_array(w, "W"), numpy_helper.from_array(c, "C"),
                           numpy_helper.from_array(np.array(0, np.int64), "zero")])
    os.makedirs(os.path.join(root, "hidden", "1"))
    H._save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
            os.path.join(root, "hidden", "1", "model.onnx"))
    with open(os.path.join(root, "hidden", "config.pbtxt"), "w") as f:
        f.write(f"max_batch_size: {MAX_BATCH}\ndynamic_batching {{ max_queue_delay_microseconds: 2000 }}\n"
                "instance_group [ { count: 1 kind: KIND_CPU } ]\n")
    return w, c


def request_input(i):
    return np.random.default_rng(1000 + i).standard_normal((1, SEQ, 1)).astype(np.float32)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("big"))
    w, c = make_repo(root)
    s = H.Server(["--model-repository", root])
    s.w, s.c = w, c
    yield s
    code, _, out = s.stop()
    assert code == 0, out


def reference(server, x):
    y = x * server.w + server.c
    return y, y[:, 0, :]


def stats(server):
    c = httpclient.InferenceServerClient(server.url)
    return c.get_inference_statistics("hidden")["model_stats"][0]


def run_concurrently(n, fn):
    results, errors = {}, []

    def worker(i):
        try:
            results[i] = fn(i)
        except Exception as e:  # noqa: BLE001 - reported below with the request's index
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    assert len(results) == n
    return results


@pytest.mark.parametrize("mode", ["http_binary", "http_json", "grpc"])
def test_concurrent_batch1_answers_are_each_requests_own(server, mode):
    n = 16 if mode == "http_json" else 48  # JSON answers are ~1.5 MB of text each
    before = stats(server)
    local = threading.local()

    def one(i):
        x = request_input(i)
        if mode == "grpc":
            if not hasattr(local, "c"):
                local.c = grpcclient.InferenceServerClient(server.grpc_url)
            inp = grpcclient.InferInput("X", list(x.shape), "FP32")
            inp.set_data_from_numpy(x)
            r = local.c.infer("hidden", [inp], outputs=[grpcclient.InferRequestedOutput("Y"),
                                                      grpcclient.InferRequestedOutput("P")])
        else:
            if not hasattr(local, "c"):
                local.c = httpclient.InferenceServerClient(server.url, network_timeout=120)
            binary = mode == "http_binary"
            inp = httpclient.InferInput("X", list(x.shape), "FP32")
            inp.set_data_from_numpy(x, binary_data=True)
            r = local.c.infer("hidden", [inp], outputs=[httpclient.InferRequestedOutput("Y", binary_data=binary),
                                                      httpclient.InferRequestedOutput("P", binary_data=binary)])
        return x, r.as_numpy("Y"), r.as_numpy("P")

    results = run_concurrently(n, one)
    for i, (x, y, p) in results.items():
        want_y, want_p = reference(server, x)
        assert y.shape == (1, SEQ, HIDDEN) and p.shape == (1, HIDDEN), (i, y.shape, p.shape)
        # One Mul and one Add per element, as numpy does them: equal up to the last bit or so
        # (a fused multiply-add rounds once); a neighbour's rows would be off by O(1).
        np.testing.assert_allclose(y, want_y, rtol=1e-6, atol=1e-6, err_msg=f"request {i}")
        np.testing.assert_allclose(p, want_p, rtol=1e-6, atol=1e-6, err_msg=f"request {i}")
    after = stats(server)
    runs = int(after["execution_count"]) - int(before["execution_count"])
    done = int(after["inference_count"]) - int(before["inference_count"])
    assert done == n
    assert 0 < runs < n, f"{n} concurrent requests ran in {runs} executions: not batched"
