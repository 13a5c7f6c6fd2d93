"""Hostile clients against a real `gpuopt serve` on 127.0.0.1 (issue 17): deeply nested JSON,
large JSON and binary bodies (peak RSS read from /proc), values out of range, the memory
budgets, per-client connection slots and the first-request timeout. Every loop is bounded."""
import json
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as H  # noqa: E402

MB = 1 << 20


def sum_model(path, width):
    """Y[b, 0] = sum(X[b, :]): a large input, a tiny output (the response adds no memory)."""
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", width])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 1])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    g = helper.make_graph([helper.make_node("ReduceSum", ["X", "axes"], ["Y"], keepdims=1)], "sum", [x], [y], [axes])
    H._save(helper.make_model(g), path)


def post(port, path, body, headers=None, timeout=120):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method="POST", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def alive(server):
    st, _ = post(server.http_port, "/v2/models/simple/infer", json.dumps(simple_request([1.0] * 16)).encode())
    return st == 200


def simple_request(values0, name0="INPUT0"):
    return {"inputs": [{"name": name0, "datatype": "FP32", "shape": [1, 16], "data": values0},
                       {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": [0.0] * 16}]}


def vm_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/{pid}/status")


def reset_peak(pid):
    """Linux: writing 5 to clear_refs resets VmHWM to the current RSS."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    H.make_repository(str(root))
    sum_model(str(root / "big" / "1" / "model.onnx"), 1 << 22)
    # A fixed mmap threshold: large blocks go back to the kernel when freed, so each request's
    # peak RSS is its own and not hidden by memory the allocator kept from the one before.
    os.environ["MALLOC_MMAP_THRESHOLD_"] = str(128 * 1024)
    try:
        s = H.Server(["--model-repository", str(root), "--http-max-input-size", str(64 * MB)])
    finally:
        del os.environ["MALLOC_MMAP_THRESHOLD_"]
    yield s
    code, _, out = s.stop()
    assert code == 0, out


def test_deeply_nested_data_is_a_400_not_a_crash(server):
    depth = 100_000  # once a SIGSEGV: flatten() recursed once per level
    body = ('{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,16],"data":' + "[" * depth + "1" + "]" * depth
            + '},{"name":"INPUT1","datatype":"FP32","shape":[1,16],"data":[' + ",".join(["0"] * 16) + "]}]}")
    assert len(body) > 190_000
    st, out = post(server.http_port, "/v2/models/simple/infer", body.encode())
    assert st == 400, out
    assert "more than 64 levels deep" in json.loads(out)["error"]
    # Also outside `data`, and the server is still serving.
    deep_param = '{"parameters":{"x":' + "[" * depth + "]" * depth + "}," + json.dumps(simple_request([1.0] * 16))[1:]
    st, out = post(server.http_port, "/v2/models/simple/infer", deep_param.encode())
    assert st == 400 and "levels deep" in json.loads(out)["error"], out
    assert server.proc.poll() is None
    assert alive(server)


def test_control_endpoints_refuse_large_bodies(server):
    # A DOM of this would cost ~20x; the index endpoint needs a few keys.
    big = b'{"ready":true,"pad":[' + b"0," * (512 * 1024) + b"0]}"
    st, out = post(server.http_port, "/v2/repository/index", big)
    assert st == 400, out
    assert json.loads(out)["error"] == f"request body of {len(big)} bytes is larger than the 65536 this endpoint accepts"
    st, out = post(server.http_port, "/v2/repository/index", b'{"ready":true}')
    assert st == 200 and {m["name"] for m in json.loads(out)} >= {"simple", "big"}


def test_values_out_of_range_name_input_and_element(server):
    vals = [1.0] * 16
    body = json.dumps(simple_request(vals)).replace("[1.0, 1.0, 1.0, 1.0", "[1.0, 1.0, 1.0, 1e300", 1)
    st, out = post(server.http_port, "/v2/models/simple/infer", body.encode())
    assert st == 400, out
    assert json.loads(out)["error"] == "input 'INPUT0': element 3 (1e+300) is out of range for FP32"
    # The element count error counts elements, not bytes.
    st, out = post(server.http_port, "/v2/models/simple/infer", json.dumps(simple_request([1.0, 2.0, 3.0])).encode())
    assert st == 400
    assert json.loads(out)["error"] == "input 'INPUT0': shape [1,16] needs 16 elements but 'data' has 3"
    assert alive(server)


def measure_peak_growth(server, body, headers):
    """Peak RSS growth (bytes) of the server while it answers one request, and the answer."""
    pid = server.proc.pid
    reset_peak(pid)
    time.sleep(0.2)
    base = vm_kib(pid, "VmHWM")
    st, out = post(server.http_port, "/v2/models/big/infer", body, headers)
    peak = vm_kib(pid, "VmHWM")
    return (peak - base) * 1024, st, out


def test_large_bodies_do_not_amplify_memory(server):
    n = 1 << 22  # 4 Mi FP32 elements = 16 MiB of tensor
    x = (np.random.default_rng(5).integers(-4000, 4000, (1, n)) / 8).astype(np.float32)
    want = float(x.astype(np.float64).sum())
    # Warm up both paths once so first-use allocations (pools, model buffers) are not counted.
    jbody = json.dumps({"inputs": [{"name": "X", "datatype": "FP32", "shape": [1, n], "data": x.ravel().tolist()}]},
                       separators=(",", ":")).encode()
    hdr = json.dumps({"inputs": [{"name": "X", "datatype": "FP32", "shape": [1, n],
                                  "parameters": {"binary_data_size": x.nbytes}}]}).encode()
    bbody = hdr + x.tobytes()
    bheaders = {"Inference-Header-Content-Length": str(len(hdr)), "Content-Type": "application/octet-stream"}
    # The worst case for JSON: one-digit integers, 2 bytes of body per 4-byte element.
    digits = np.random.default_rng(6).integers(0, 10, (1, n))
    dbody = json.dumps({"inputs": [{"name": "X", "datatype": "FP32", "shape": [1, n], "data": digits.ravel().tolist()}]},
                       separators=(",", ":")).encode()
    results = {}
    for kind, body, headers in (("json", jbody, None), ("binary", bbody, bheaders), ("json-digits", dbody, None)) * 2:
        if kind == "json-digits":
            x_sum = float(digits.sum())
        else:
            x_sum = want
        growth, st, out = measure_peak_growth(server, body, headers)
        assert st == 200, out[:300]
        got = json.loads(out)["outputs"][0]["data"][0]
        assert abs(got - x_sum) <= 1e-3 * abs(x_sum) + 1.0
        results[kind] = (growth, len(body))  # the second (warm) round is kept
    for kind, (growth, size) in results.items():
        print(f"peak RSS growth for a {size / MB:.1f} MB {kind} body: {growth / MB:.1f} MB "
              f"({growth / size:.2f} MB per MB of body)")
    jg, js = results["json"]
    bg, bs = results["binary"]
    assert jg <= 4 * js, f"JSON: {jg / MB:.0f} MB peak growth for a {js / MB:.0f} MB body"
    assert bg <= 4 * bs, f"binary: {bg / MB:.0f} MB peak growth for a {bs / MB:.0f} MB body"
    assert alive(server)


def test_memory_budgets(tmp_path):
    H.make_repository(str(tmp_path))
    sum_model(str(tmp_path / "big" / "1" / "model.onnx"), 1 << 18)
    n = 1 << 18  # 1 MiB of FP32
    x = np.ones((1, n), np.float32)
    hdr = json.dumps({"inputs": [{"name": "X", "datatype": "FP32", "shape": [1, n],
                                  "parameters": {"binary_data_size": x.nbytes}}]}).encode()
    body = hdr + x.tobytes()
    headers = {"Inference-Header-Content-Length": str(len(hdr)), "Content-Type": "application/octet-stream"}
    with H.Server(["--model-repository", str(tmp_path), "--max-request-memory", str(512 * 1024)]) as s:
        st, out = post(s.http_port, "/v2/models/big/infer", body, headers)
        assert st == 413, out
        assert "--max-request-memory" in json.loads(out)["error"]
        assert alive(s)
    # Server-wide: each request holds its body (1 MiB) and its tensor (1 MiB step) while in flight.
    with H.Server(["--model-repository", str(tmp_path), "--max-inflight-bytes", str(5 * MB)]) as s:
        st, out = post(s.http_port, "/v2/models/big/infer", b"x" * (6 * MB))
        assert st == 503, out
        assert "--max-inflight-bytes" in json.loads(out)["error"]
        statuses, lock = [], threading.Lock()

        def client():
            for _ in range(5):
                st, out = post(s.http_port, "/v2/models/big/infer", body, headers)
                with lock:
                    statuses.append((st, out[:200]))

        threads = [threading.Thread(target=client) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert len(statuses) == 40
        assert {st for st, _ in statuses} <= {200, 503}, statuses
        assert any(st == 200 for st, _ in statuses)
        for st, out in statuses:
            if st == 503:
                assert b"--max-inflight-bytes" in out, out
        # Everything was given back: a lone request passes again.
        st, out = post(s.http_port, "/v2/models/big/infer", body, headers)
        assert st == 200, out
        assert s.stop()[0] == 0


def connect(port, source="127.0.0.1"):
    c = socket.socket()
    c.settimeout(10)
    c.bind((source, 0))
    c.connect(("127.0.0.1", port))
    return c


def read_all(c):
    """Everything until the server closes; None when it did not close within the timeout."""
    out = b""
    try:
        while True:
            d = c.recv(65536)
            if not d:
                return out
            out += d
    except ConnectionResetError:
        return out
    except socket.timeout:
        return None


def test_connection_slots(tmp_path):
    H.make_repository(str(tmp_path))
    with H.Server(["--model-repository", str(tmp_path), "--http-max-connections-per-client", "4",
                   "--http-idle-timeout", "1"]) as s:
        held = [connect(s.http_port) for _ in range(4)]
        time.sleep(0.2)
        extra = connect(s.http_port)
        extra.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = read_all(extra)
        assert answer is not None and answer.startswith(b"HTTP/1.1 503"), answer
        assert b"--http-max-connections-per-client" in answer
        # Another client is served while the first holds its four slots.
        other = connect(s.http_port, "127.0.0.2")
        other.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert (read_all(other) or b"").startswith(b"HTTP/1.1 200")
        # Silent connections are closed after --http-idle-timeout, freeing the slots.
        t0 = time.time()
        for c in held:
            assert read_all(c) == b""
        assert time.time() - t0 < 5
        assert alive(s)
        # A connection that completed a request is kept alive past the short timeout.
        kept = connect(s.http_port)
        kept.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert kept.recv(4096).startswith(b"HTTP/1.1 200")
        time.sleep(2)
        kept.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert (read_all(kept) or b"").startswith(b"HTTP/1.1 200")
        assert s.stop()[0] == 0


def test_help_lists_the_limits():
    import subprocess
    out = subprocess.run([H.gpuopt_bin(), "serve", "--help"], capture_output=True, text=True, timeout=60).stdout
    for flag in ("--http-max-connections-per-client", "--http-idle-timeout", "--max-request-memory",
                 "--max-inflight-bytes", "--http-max-input-size"):
        assert flag in out, flag
