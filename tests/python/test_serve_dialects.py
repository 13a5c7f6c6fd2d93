"""`gpuopt serve` and `gpuopt perf` taking tritonserver's and perf_analyzer's command lines: the
flags that apply do what Triton's do (--exit-on-error, --strict-model-config, several
--model-repository, --model-control-mode poll, --allow-http, --log-file, --grpc-address), the
others are accepted with one warning line or refused by name, and bad values exit 2 naming the
valid ones. Real servers on 127.0.0.1 with ephemeral ports; answers checked against numpy."""
import csv
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as H  # noqa: E402

httpclient = pytest.importorskip("tritonclient.http")


def gpuopt(*argv, timeout=120):
    return subprocess.run([H.gpuopt_bin(), *argv], capture_output=True, text=True, timeout=timeout)


def raw(url, method, path, body=None):
    req = urllib.request.Request(f"http://{url}{path}", data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def index(url):
    code, body = raw(url, "POST", "/v2/repository/index", b"{}")
    assert code == 200, body
    return {m["name"]: m for m in json.loads(body)}


def infer_add_sub(url, model="simple"):
    """OUTPUT0 = a + b, OUTPUT1 = a - b against numpy."""
    c = httpclient.InferenceServerClient(url)
    a = np.arange(32, dtype=np.float32).reshape(2, 16)
    b = np.full((2, 16), 3, dtype=np.float32)
    ins = [httpclient.InferInput("INPUT0", [2, 16], "FP32"), httpclient.InferInput("INPUT1", [2, 16], "FP32")]
    ins[0].set_data_from_numpy(a)
    ins[1].set_data_from_numpy(b)
    r = c.infer(model, ins)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)


def unsupported_op_model(path):
    """A valid ONNX model whose only op (GlobalLpPool) gpuopt does not implement."""
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 2, 4, 4])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 2, 1, 1])
    g = helper.make_graph([helper.make_node("GlobalLpPool", ["X"], ["Y"])], "lp", [x], [y])
    H._save(helper.make_model(g), path)


def broken_repository(root):
    """simple (works), mlp (works), corrupt (model.onnx is not ONNX), lppool (an unsupported op)."""
    H.make_repository(str(root))
    os.makedirs(root / "corrupt" / "1")
    (root / "corrupt" / "1" / "model.onnx").write_bytes(b"this is not an onnx model" * 10)
    unsupported_op_model(str(root / "lppool" / "1" / "model.onnx"))


def one_error_line(r):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    errors = [l for l in lines if "error" in l]
    assert len(errors) == 1, r.stderr
    return errors[0]


def wait_until(pred, secs=15):
    end = time.time() + secs
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.2)
    return False


# ---- flags accepted ------------------------------------------------------------------------------

def test_tritonserver_command_line_is_accepted(tmp_path):
    root = tmp_path / "repo"
    H.make_repository(str(root))
    log = tmp_path / "server.log"
    log.write_text("earlier line\n")
    with H.Server(["--model-repository=" + str(root), "--strict-model-config=false", "--exit-on-error", "true",
                   "--log-file", str(log), "--log-verbose=1", "--grpc-address", "127.0.0.1", "--allow-http=1",
                   "--model-control-mode=none", "--backend-directory", "/opt/tritonserver/backends",
                   "--log-info=true", "--backend-config=onnxruntime,default-max-batch-size=4",
                   "--backend-config=python,shm-default-byte-size=1", "--strict-readiness", "TRUE"]) as s:
        infer_add_sub(s.url)
        out = "".join(s.log)
        warn = [l for l in out.splitlines() if "accepted but ignored" in l]
        assert len(warn) == 1, out
        for f in ("--backend-directory", "--log-info", "--backend-config"):
            assert f in warn[0]
        assert "--log-file" not in warn[0] and "--strict-model-config" not in warn[0]
        assert f"Started GRPCInferenceService at 127.0.0.1:{s.grpc_port}" in out
        code, _, _ = s.stop()
        assert code == 0
    text = log.read_text()
    assert text.startswith("earlier line\n")  # appended, not truncated
    assert "model 'simple' version 1 ready" in text and "model 'mlp' version 1 ready" in text
    assert "ready in" not in out  # the log went to the file, not the terminal


def test_allow_http_false_serves_grpc_and_metrics_only(tmp_path):
    grpcclient = pytest.importorskip("tritonclient.grpc")
    root = tmp_path / "repo"
    H.make_repository(str(root))
    p = subprocess.Popen([H.gpuopt_bin(), "serve", "--model-repository", str(root), "--allow-http", "false",
                          "--http-address", "127.0.0.1", "--grpc-port", "0", "--metrics-port", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in p.stdout:
            lines.append(line)
            if "Started Metrics Service" in line:
                break
        out = "".join(lines)
        assert "Started HTTPService" not in out, out
        grpc_port = int(out.split("Started GRPCInferenceService at 127.0.0.1:")[1].split()[0])
        metrics_port = int(out.split("Started Metrics Service at 127.0.0.1:")[1].split()[0])
        c = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
        assert c.is_server_ready() and c.is_model_ready("simple")
        code, body = raw(f"127.0.0.1:{metrics_port}", "GET", "/metrics")
        assert code == 200 and b"nv_inference_request_success" in body
    finally:
        p.terminate()
        assert p.wait(30) == 0


# ---- --exit-on-error, --strict-model-config ----------------------------------------------------

def test_broken_model_stops_the_start_by_default(tmp_path):
    broken_repository(tmp_path)
    r = gpuopt("serve", "--model-repository", str(tmp_path), "--http-port", "0", "--metrics-port", "0",
               "--grpc-port", "0", timeout=120)
    assert r.returncode == 1, (r.stdout, r.stderr)
    line = one_error_line(r)
    assert "corrupt" in line or "lppool" in line, line


def test_exit_on_error_false_serves_the_rest(tmp_path):
    broken_repository(tmp_path)
    with H.Server(["--model-repository", str(tmp_path), "--exit-on-error=false"]) as s:
        infer_add_sub(s.url)
        idx = index(s.url)
        assert idx["simple"]["state"] == "READY" and idx["mlp"]["state"] == "READY"
        for bad in ("corrupt", "lppool"):
            assert idx[bad]["state"] == "UNAVAILABLE", idx[bad]
            assert idx[bad]["reason"], idx[bad]
            code, _ = raw(s.url, "GET", f"/v2/models/{bad}/ready")
            assert code == 400
        assert "GlobalLpPool" in idx["lppool"]["reason"], idx["lppool"]
        assert "UNAVAILABLE" in "".join(s.log)
        # Triton's strict readiness: not every model is ready, so neither is the server.
        assert raw(s.url, "GET", "/v2/health/ready")[0] != 200
        assert raw(s.url, "GET", "/v2/models/simple/ready")[0] == 200
    with H.Server(["--model-repository", str(tmp_path), "--exit-on-error=0", "--strict-readiness=false"]) as s:
        assert raw(s.url, "GET", "/v2/health/ready")[0] == 200


def test_strict_model_config(tmp_path):
    H.make_repository(str(tmp_path))  # mlp has no config.pbtxt
    r = gpuopt("serve", "--model-repository", str(tmp_path), "--strict-model-config=true", "--http-port", "0",
               "--metrics-port", "0", "--grpc-port", "0")
    assert r.returncode == 1, r.stderr
    line = one_error_line(r)
    assert "mlp" in line and "config.pbtxt" in line, line
    with H.Server(["--model-repository", str(tmp_path), "--strict-model-config", "true",
                   "--exit-on-error", "false"]) as s:
        idx = index(s.url)
        assert idx["simple"]["state"] == "READY"
        assert idx["mlp"]["state"] == "UNAVAILABLE" and "config.pbtxt" in idx["mlp"]["reason"]


# ---- several repositories ----------------------------------------------------------------------

def test_two_repositories(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    H.add_sub_model(str(a / "simple" / "1" / "model.onnx"))
    w = H.mlp_model(str(b / "mlp" / "1" / "model.onnx"))
    with H.Server(["--model-repository", str(a), "--model-repository", str(b)]) as s:
        infer_add_sub(s.url)
        c = httpclient.InferenceServerClient(s.url)
        x = np.random.default_rng(1).standard_normal((3, 32)).astype(np.float32)
        i = httpclient.InferInput("X", [3, 32], "FP32")
        i.set_data_from_numpy(x)
        np.testing.assert_allclose(c.infer("mlp", [i]).as_numpy("Y"), H.mlp_reference(x, w), rtol=1e-4, atol=1e-5)
        assert set(index(s.url)) == {"simple", "mlp"}


def test_same_model_in_two_repositories_is_an_error(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    H.add_sub_model(str(a / "simple" / "1" / "model.onnx"))
    H.add_sub_model(str(b / "simple" / "1" / "model.onnx"))
    r = gpuopt("serve", "--model-repository", str(a), "--model-repository", str(b), "--http-port", "0",
               "--metrics-port", "0", "--grpc-port", "0")
    assert r.returncode == 1, r.stderr
    line = one_error_line(r)
    assert str(a / "simple") in line and str(b / "simple") in line, line


# ---- --model-control-mode poll -----------------------------------------------------------------

def test_poll_mode_loads_unloads_and_reloads(tmp_path):
    root, staging = tmp_path / "repo", tmp_path / "staging"
    H.add_sub_model(str(root / "simple" / "1" / "model.onnx"))
    with H.Server(["--model-repository", str(root), "--model-control-mode=poll", "--repository-poll-secs=1"]) as s:
        infer_add_sub(s.url)
        assert set(index(s.url)) == {"simple"}
        # A new model, moved in whole (as a deployment would).
        w = H.mlp_model(str(staging / "mlp" / "1" / "model.onnx"))
        os.rename(staging / "mlp", root / "mlp")
        assert wait_until(lambda: raw(s.url, "GET", "/v2/models/mlp/ready")[0] == 200), "".join(s.log)
        c = httpclient.InferenceServerClient(s.url)
        x = np.ones((1, 32), dtype=np.float32)
        i = httpclient.InferInput("X", [1, 32], "FP32")
        i.set_data_from_numpy(x)
        np.testing.assert_allclose(c.infer("mlp", [i]).as_numpy("Y"), H.mlp_reference(x, w), rtol=1e-4, atol=1e-5)
        # A removed model is unloaded.
        shutil.rmtree(root / "simple")
        assert wait_until(lambda: raw(s.url, "GET", "/v2/models/simple/ready")[0] != 200), "".join(s.log)
        # A new version folder: reloaded, version 2 served (a different model: Y = X @ W' with seed 5).
        w2 = H.mlp_model(str(staging / "v2" / "model.onnx"), seed=5)
        os.rename(staging / "v2", root / "mlp" / "2")
        assert wait_until(lambda: raw(s.url, "GET", "/v2/models/mlp/versions/2/ready")[0] == 200), "".join(s.log)
        np.testing.assert_allclose(c.infer("mlp", [i]).as_numpy("Y"), H.mlp_reference(x, w2), rtol=1e-4, atol=1e-5)
        # A change that fails to load keeps the old version serving.
        (root / "mlp" / "config.pbtxt").write_text("this is { not a config")
        assert wait_until(lambda: "failed to reload" in "".join(s.log)), "".join(s.log)
        assert raw(s.url, "GET", "/v2/models/mlp/ready")[0] == 200
        np.testing.assert_allclose(c.infer("mlp", [i]).as_numpy("Y"), H.mlp_reference(x, w2), rtol=1e-4, atol=1e-5)
        code, _, out = s.stop()
        assert code == 0, out


def test_explicit_load_is_refused_in_poll_mode(tmp_path):
    H.add_sub_model(str(tmp_path / "simple" / "1" / "model.onnx"))
    with H.Server(["--model-repository", str(tmp_path), "--model-control-mode", "poll"]) as s:
        code, body = raw(s.url, "POST", "/v2/repository/models/simple/unload")
        assert code == 400 and b"explicit" in body


# ---- refused and bad values --------------------------------------------------------------------

@pytest.mark.parametrize("argv, wants", [
    (["--exit-on-error", "maybe"], ["--exit-on-error", "'maybe'", "true, false"]),
    (["--strict-model-config=yes please"], ["'yes please'", "true, false"]),
    (["--allow-http", "2"], ["--allow-http", "'2'"]),
    (["--model-control-mode", "pull"], ["'pull'", "none, explicit, poll"]),
    (["--repository-poll-secs", "0"], ["--repository-poll-secs", "1..86400"]),
    (["--allow-sagemaker=true"], ["--allow-sagemaker=true", "not supported"]),
    (["--grpc-use-ssl", "1"], ["--grpc-use-ssl=true", "not supported"]),
    (["--allow-http=false", "--allow-grpc=false"], ["no endpoint"]),
])
def test_bad_values_exit_2(tmp_path, argv, wants):
    H.add_sub_model(str(tmp_path / "simple" / "1" / "model.onnx"))
    r = gpuopt("serve", "--model-repository", str(tmp_path), "--http-port", "0", "--metrics-port", "0", *argv)
    assert r.returncode == 2, (argv, r.returncode, r.stderr)
    line = one_error_line(r)
    for w in wants:
        assert w in line, (w, line)


def test_poll_needs_a_repository(tmp_path):
    m = tmp_path / "m.onnx"
    H.add_sub_model(str(m))
    r = gpuopt("serve", str(m), "--model-control-mode", "poll")
    assert r.returncode == 2 and "--model-repository" in one_error_line(r)


# ---- perf: perf_analyzer's flags ----------------------------------------------------------------

PERF_HEADER = ["Concurrency", "Inferences/Second", "Client Send", "Network+Server Send/Recv", "Server Queue",
               "Server Compute Input", "Server Compute Infer", "Server Compute Output", "Client Recv",
               "p50 latency", "p90 latency", "p95 latency", "p99 latency"]


@pytest.fixture(scope="module")
def perf_server(tmp_path_factory):
    yield from H.module_server(tmp_path_factory)


def test_perf_analyzer_flags_and_csv(perf_server, tmp_path):
    out = tmp_path / "pa.csv"
    r = gpuopt("perf", "-m", "simple", "-u", perf_server.url, "--concurrency-range", "1:2", "--async",
               "--percentile=95", "--measurement-mode", "count_windows", "--measurement-request-count", "30",
               "--input-data", "zero", "-f", str(out), "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)["results"]
    assert [l["concurrency"] for l in res] == [1, 2]
    for l in res:
        assert l["percentile"] == 95
        assert l["p50_us"] <= l["percentile_us"] <= l["p99_us"]
        # count windows: at least 30 requests in each window that was kept
        assert l["requests"] >= 30 * min(3, l["windows"])
    rows = list(csv.reader(out.open()))
    assert rows[0] == PERF_HEADER
    assert len(rows) == 3
    for row, l in zip(rows[1:], res):
        assert int(row[0]) == l["concurrency"]
        assert float(row[1]) == pytest.approx(l["throughput_infer_per_s"], rel=1e-3)
        assert int(row[12]) == round(l["p99_us"])  # p99 latency, microseconds
        assert int(row[9]) <= int(row[10]) <= int(row[11]) <= int(row[12])
    out2 = tmp_path / "verbose.csv"
    r = gpuopt("perf", "-m", "simple", "-u", perf_server.url, "-p", "200", "--input-data", "random",
               "--verbose-csv", "-f", str(out2))
    assert r.returncode == 0, r.stderr
    assert next(csv.reader(out2.open())) == PERF_HEADER + ["Avg latency", "request/response", "response wait"]
    assert "p99" in r.stderr


def test_perf_percentile_is_the_headline(perf_server):
    r = gpuopt("perf", "-m", "simple", "-u", perf_server.url, "-p", "200", "--percentile", "90")
    assert r.returncode == 0, r.stderr
    assert "p90 " in r.stderr and "p99 " not in r.stderr


@pytest.mark.parametrize("argv, wants", [
    (["--percentile", "100"], ["--percentile", "1..99"]),
    (["--measurement-mode", "windows"], ["'windows'", "time_windows, count_windows"]),
    (["--measurement-request-count", "0"], ["--measurement-request-count", "1.."]),
])
def test_perf_bad_values_exit_2(argv, wants):
    r = gpuopt("perf", "-m", "m", *argv)
    assert r.returncode == 2, (argv, r.returncode, r.stderr)
    line = one_error_line(r)
    for w in wants:
        assert w in line, (w, line)
