"""`gpuopt serve` against Triton's own Python client (tritonclient[http]) and raw HTTP: every
endpoint, JSON and binary tensors, error codes, explicit model control. A real server process
on 127.0.0.1 with ephemeral ports."""
import json
import os
import sys
import urllib.error
import urllib.request

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as H  # noqa: E402

httpclient = pytest.importorskip("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from H.module_server(tmp_path_factory, "--http-max-input-size", str(1 << 20))


def raw(server, method, path, body=None, headers=None):
    req = urllib.request.Request(f"http://{server.url}{path}", data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_health_and_metadata(server):
    c = httpclient.InferenceServerClient(server.url)
    assert c.is_server_live()
    assert c.is_server_ready()
    meta = c.get_server_metadata()
    assert meta["name"] == "gpuopt"
    assert "binary_tensor_data" in meta["extensions"]
    assert c.is_model_ready("simple")
    assert c.is_model_ready("mlp", "1")
    m = c.get_model_metadata("simple")
    assert m["versions"] == ["1"]
    assert [i["name"] for i in m["inputs"]] == ["INPUT0", "INPUT1"]
    assert m["inputs"][0]["shape"] == [-1, 16]
    assert m["inputs"][0]["datatype"] == "FP32"
    cfg = c.get_model_config("simple")
    assert cfg["max_batch_size"] == 16
    assert cfg["dynamic_batching"]["max_queue_delay_microseconds"] == 5000
    assert cfg["instance_group"][0]["count"] == 2
    derived = c.get_model_config("mlp")  # no config.pbtxt: derived from the model
    assert derived["max_batch_size"] == 4
    assert derived["input"][0]["dims"] == [32]
    assert derived["output"][0]["name"] == "Y"


@pytest.mark.parametrize("binary_in,binary_out", [(False, False), (True, True), (True, False), (False, True)])
def test_infer_add_sub(server, binary_in, binary_out):
    c = httpclient.InferenceServerClient(server.url)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 16)).astype(np.float32)
    b = rng.standard_normal((3, 16)).astype(np.float32)
    inputs = [httpclient.InferInput("INPUT0", a.shape, "FP32"), httpclient.InferInput("INPUT1", b.shape, "FP32")]
    inputs[0].set_data_from_numpy(a, binary_data=binary_in)
    inputs[1].set_data_from_numpy(b, binary_data=binary_in)
    outputs = [httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary_out),
               httpclient.InferRequestedOutput("OUTPUT1", binary_data=binary_out)]
    r = c.infer("simple", inputs, outputs=outputs, request_id="req-7")
    assert r.get_response()["id"] == "req-7"
    assert r.get_response()["model_name"] == "simple"
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)


def test_mlp_matches_numpy(server):
    c = httpclient.InferenceServerClient(server.url)
    x = np.random.default_rng(2).standard_normal((4, 32)).astype(np.float32)
    inp = httpclient.InferInput("X", x.shape, "FP32")
    inp.set_data_from_numpy(x)
    r = c.infer("mlp", [inp])
    np.testing.assert_allclose(r.as_numpy("Y"), H.mlp_reference(x, server.weights), rtol=1e-4, atol=1e-5)


def test_errors_have_triton_codes(server):
    c = httpclient.InferenceServerClient(server.url)
    a = np.ones((1, 16), np.float32)
    good = [httpclient.InferInput("INPUT0", a.shape, "FP32"), httpclient.InferInput("INPUT1", a.shape, "FP32")]
    for i in good:
        i.set_data_from_numpy(a)
    with pytest.raises(InferenceServerException) as e:
        c.infer("nope", good)
    assert e.value.status() == "404"
    assert "unknown model 'nope'" in e.value.message()
    wrong = httpclient.InferInput("INPUT0", [1, 15], "FP32")
    wrong.set_data_from_numpy(np.ones((1, 15), np.float32))
    with pytest.raises(InferenceServerException) as e:
        c.infer("simple", [wrong, good[1]])
    assert e.value.status() == "400"
    assert "shape [1,15]" in e.value.message()
    # Raw HTTP: malformed JSON, wrong element count, unknown route, too large.
    st, _, body = raw(server, "POST", "/v2/models/simple/infer", b"{not json")
    assert st == 400 and "error" in json.loads(body)
    bad = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": [1, 2]},
                      {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": [0] * 16}]}
    st, _, body = raw(server, "POST", "/v2/models/simple/infer", json.dumps(bad).encode())
    assert st == 400 and "needs 16 elements" in json.loads(body)["error"]
    st, _, _ = raw(server, "GET", "/v2/nothing/here")
    assert st == 404
    st, _, body = raw(server, "POST", "/v2/models/simple/infer", b"x" * ((1 << 20) + 10))
    assert st == 413 and "limit" in json.loads(body)["error"]
    # The server is unharmed.
    assert c.infer("simple", good).as_numpy("OUTPUT0")[0, 0] == 2.0


def test_raw_binary_protocol_and_stats(server):
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    header = json.dumps({"inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "parameters": {"binary_data_size": 64}},
        {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "parameters": {"binary_data_size": 64}}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
    st, headers, body = raw(server, "POST", "/v2/models/simple/versions/1/infer", header + a.tobytes() + a.tobytes(),
                            {"Inference-Header-Content-Length": str(len(header)), "Content-Type": "application/octet-stream"})
    assert st == 200, body
    hl = int(headers["Inference-Header-Content-Length"])
    meta = json.loads(body[:hl])
    assert meta["outputs"][0]["parameters"]["binary_data_size"] == 64
    np.testing.assert_array_equal(np.frombuffer(body[hl:], np.float32), (a + a).ravel())
    c = httpclient.InferenceServerClient(server.url)
    stats = c.get_inference_statistics("simple")
    s = stats["model_stats"][0]
    assert s["name"] == "simple" and s["version"] == "1"
    assert s["inference_stats"]["success"]["count"] >= 6
    assert s["inference_stats"]["fail"]["count"] >= 3
    assert s["execution_count"] >= 1
    assert all(k in s["inference_stats"] for k in ("queue", "compute_input", "compute_infer", "compute_output"))
    allstats = c.get_inference_statistics()
    assert {m["name"] for m in allstats["model_stats"]} == {"simple", "mlp"}
    idx = c.get_model_repository_index()
    assert {m["name"] for m in idx} == {"simple", "mlp"}
    with pytest.raises(InferenceServerException) as e:
        c.load_model("simple")  # control mode none
    assert "explicit" in e.value.message()


def test_explicit_model_control(tmp_path):
    H.make_repository(str(tmp_path))
    with H.Server(["--model-repository", str(tmp_path), "--model-control-mode", "explicit",
                   "--load-model", "mlp"]) as s:
        c = httpclient.InferenceServerClient(s.url)
        assert c.is_model_ready("mlp")
        assert not c.is_model_ready("simple")
        idx = {m["name"]: m for m in c.get_model_repository_index()}
        assert idx["mlp"]["state"] == "READY" and idx["simple"]["state"] == "UNAVAILABLE"
        c.load_model("simple")
        assert c.is_model_ready("simple")
        a = np.ones((2, 16), np.float32)
        ins = [httpclient.InferInput("INPUT0", a.shape, "FP32"), httpclient.InferInput("INPUT1", a.shape, "FP32")]
        for i in ins:
            i.set_data_from_numpy(a)
        assert c.infer("simple", ins).as_numpy("OUTPUT1").sum() == 0
        c.unload_model("simple")
        assert not c.is_model_ready("simple")
        with pytest.raises(InferenceServerException) as e:
            c.load_model("does_not_exist")
        assert "does_not_exist" in e.value.message()
        code, secs, out = s.stop()
        assert code == 0, out


def test_single_model_file(tmp_path):
    path = tmp_path / "adder.onnx"
    H.add_sub_model(str(path))
    with H.Server([str(path)]) as s:
        c = httpclient.InferenceServerClient(s.url)
        assert c.is_model_ready("adder")
        a = np.full((2, 16), 3, np.float32)
        ins = [httpclient.InferInput("INPUT0", a.shape, "FP32"), httpclient.InferInput("INPUT1", a.shape, "FP32")]
        for i in ins:
            i.set_data_from_numpy(a)
        np.testing.assert_array_equal(c.infer("adder", ins).as_numpy("OUTPUT0"), a * 2)
        assert s.stop()[0] == 0
