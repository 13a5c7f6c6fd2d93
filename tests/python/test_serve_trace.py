"""`gpuopt serve --trace-file --trace-rate`: sampled requests' stages (network in, decode, queue,
compute input/infer/output, encode, network out) as Chrome trace events, one track per stage
(lanes when requests overlap). The traced stage times add up to the server's own statistics, the
network stages of an HTTP request bracket the rest and sit inside the client's own clock around
the request, one request in N is traced, and slices on a track never overlap."""
import json
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest

from gpuopt_cli import gpuopt_bin
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as H  # noqa: E402

httpclient = pytest.importorskip("tritonclient.http")

SERVER_STAGES = ["decode", "queue", "compute input", "compute infer", "compute output", "encode"]
STAGES = ["network in"] + SERVER_STAGES + ["network out"]  # HTTP
GRPC_STAGES = SERVER_STAGES + ["network out"]  # grpc++ hands the handler a parsed message: no network in


def send(url, n):
    c = httpclient.InferenceServerClient(url)
    for i in range(n):
        a = np.full((1, 16), i, np.float32)
        b = np.ones((1, 16), np.float32)
        ins = [httpclient.InferInput("INPUT0", a.shape, "FP32"), httpclient.InferInput("INPUT1", b.shape, "FP32")]
        ins[0].set_data_from_numpy(a)
        ins[1].set_data_from_numpy(b)
        np.testing.assert_array_equal(c.infer("simple", ins).as_numpy("OUTPUT0"), a + b)
    return c


def load(path):
    events = json.loads(path.read_text())
    assert isinstance(events, list)
    tracks = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    slices = [e for e in events if e["ph"] == "X"]
    for e in slices:
        assert e["tid"] in tracks and e["dur"] >= 0 and e["cat"] in STAGES and e["name"] == "simple"
        assert tracks[e["tid"]].split(" ")[0] == e["cat"].split(" ")[0]
    return tracks, slices


def by_request(slices):
    req = {}
    for e in slices:
        req.setdefault(e["args"]["request"], {})[e["cat"]] = e
    return req


def test_trace_matches_server_stats(tmp_path):
    H.make_repository(str(tmp_path / "repo"), delay_us=0)
    trace = tmp_path / "serve.json"
    s = H.Server(["--model-repository", str(tmp_path / "repo"), "--trace-file", str(trace), "--trace-rate", "1"])
    with s:
        c = send(s.url, 12)
        st = c.get_inference_statistics("simple")["model_stats"][0]["inference_stats"]
        code, _, _ = s.stop(signal.SIGTERM)
        assert code == 0
    tracks, slices = load(trace)
    req = by_request(slices)
    assert len(req) == 12
    for r in req.values():
        assert sorted(r) == sorted(STAGES)
        order = [r[k] for k in STAGES[:6]]
        for a, b in zip(order, order[1:]):  # laid end to end: each stage starts where the last ended
            assert abs(a["ts"] + a["dur"] - b["ts"]) < 0.01
        assert r["encode"]["ts"] >= r["decode"]["ts"]
        # The answer leaves when it is encoded: network out starts where encode ends.
        assert abs(r["encode"]["ts"] + r["encode"]["dur"] - r["network out"]["ts"]) < 0.01
    # Every request traced: the stage durations add up to the server's cumulative statistics.
    for stage, key in [("queue", "queue"), ("compute input", "compute_input"), ("compute infer", "compute_infer"),
                       ("compute output", "compute_output")]:
        traced_us = sum(r[stage]["dur"] for r in req.values())
        assert abs(traced_us - int(st[key]["ns"]) / 1e3) <= 0.01 * 12, (stage, traced_us, st[key])


def test_trace_rate_and_lanes(tmp_path):
    H.make_repository(str(tmp_path / "repo"), delay_us=2000)
    trace = tmp_path / "serve.json"
    with H.Server(["--model-repository", str(tmp_path / "repo"), "--trace-file", str(trace), "--trace-rate", "3"]) as s:
        send(s.url, 10)  # requests 1, 4, 7 and 10 are traced
        r = subprocess.run([gpuopt_bin(), "perf", "-m", "simple", "-u", s.url, "--concurrency-range", "8", "-p", "300",
                            "-r", "2", "--json"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        sent = json.loads(r.stdout)["results"][0]["sent"]
        s.stop(signal.SIGTERM)
    tracks, slices = load(trace)
    req = by_request(slices)
    assert len(req) == (10 + sent + 2) // 3
    # Overlapping requests go to further lanes; on one lane slices never overlap.
    lanes = {}
    for e in slices:
        lanes.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    for tid, iv in lanes.items():
        iv.sort()
        for (a0, a1), (b0, b1) in zip(iv, iv[1:]):
            assert b0 >= a1 - 1e-6, (tracks[tid], (a0, a1), (b0, b1))
    assert any(name.startswith("queue ") for name in tracks.values()), tracks  # 8 in flight: several queue lanes


def test_bad_trace_file(tmp_path):
    H.make_repository(str(tmp_path / "repo"))
    r = subprocess.run([gpuopt_bin(), "serve", "--model-repository", str(tmp_path / "repo"), "--http-port", "0",
                        "--metrics-port", "0", "--trace-file", str(tmp_path / "no" / "dir" / "t.json")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--trace-file" in r.stderr, r.stderr


def test_grpc_requests_traced(tmp_path):
    """gRPC requests go through the same path as HTTP ones: traced with every stage but network
    in (grpc++ reads the message before the handler sees it), and the stage sums still equal the
    server's statistics."""
    grpcclient = pytest.importorskip("tritonclient.grpc")
    H.make_repository(str(tmp_path / "repo"), delay_us=0)
    trace = tmp_path / "serve.json"
    s = H.Server(["--model-repository", str(tmp_path / "repo"), "--trace-file", str(trace), "--trace-rate", "1"])
    with s:
        g = grpcclient.InferenceServerClient(s.grpc_url)
        for i in range(4):
            a = np.full((1, 16), i, np.float32)
            b = np.ones((1, 16), np.float32)
            ins = [grpcclient.InferInput("INPUT0", a.shape, "FP32"), grpcclient.InferInput("INPUT1", b.shape, "FP32")]
            ins[0].set_data_from_numpy(a)
            ins[1].set_data_from_numpy(b)
            np.testing.assert_array_equal(g.infer("simple", ins).as_numpy("OUTPUT1"), a - b)
        c = send(s.url, 2)
        st = c.get_inference_statistics("simple")["model_stats"][0]["inference_stats"]
        assert int(st["success"]["count"]) == 6
        code, _, _ = s.stop(signal.SIGTERM)
        assert code == 0
    tracks, slices = load(trace)
    req = by_request(slices)
    assert len(req) == 6
    # The first four requests came over gRPC. The ids follow the order the traces were recorded in,
    # which is when each answer was out: a gRPC call's end is reported by grpc++ after the client
    # has its answer, possibly after the next HTTP request's, so the order is the decode starts'.
    grpc_ids = sorted(req, key=lambda i: req[i]["decode"]["ts"])[:4]
    for i, r in req.items():
        assert sorted(r) == sorted(GRPC_STAGES if i in grpc_ids else STAGES), (i, sorted(r))
        assert r["encode"]["ts"] >= r["decode"]["ts"] + r["decode"]["dur"] - 0.01
        # The answer goes out after it was encoded: network out starts where encode ends.
        assert abs(r["encode"]["ts"] + r["encode"]["dur"] - r["network out"]["ts"]) < 0.01
        assert r["network out"]["dur"] >= 0
    for stage, key in [("queue", "queue"), ("compute infer", "compute_infer")]:
        traced_us = sum(r[stage]["dur"] for r in req.values())
        assert abs(traced_us - int(st[key]["ns"]) / 1e3) <= 0.01 * 6, (stage, traced_us, st[key])


def test_network_stages_inside_the_client_request(tmp_path):
    """Two requests on one keep-alive connection, the first sent in two parts with a pause between.
    Its network-in stage covers the pause (the first byte was read before the rest was sent);
    every stage lies inside what the client's own clock allows (the server's trace clock is the
    machine's steady clock, which Python's time.monotonic reads too): after the client began
    sending, and, up to encode, before it had the answer. The answer's last byte is written
    before the server reads the next request on the connection, so network out ends before the
    second request's network in begins. Stages are ordered and none is negative."""
    import socket
    import time
    H.make_repository(str(tmp_path / "repo"), delay_us=0)
    trace = tmp_path / "serve.json"
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [1.0] * 16},
                                  {"name": "INPUT1", "shape": [1, 16], "datatype": "FP32", "data": [2.0] * 16}]})
    head = (f"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")

    def answer(c):
        got = b""
        while b"\r\n\r\n" not in got or len(got.split(b"\r\n\r\n", 1)[1]) < int(
                re.search(rb"(?i)content-length: *(\d+)", got).group(1)):
            chunk = c.recv(65536)
            assert chunk, got
            got += chunk
        assert got.startswith(b"HTTP/1.1 200"), got[:200]
        return time.monotonic()

    with H.Server(["--model-repository", str(tmp_path / "repo"), "--trace-file", str(trace), "--trace-rate", "1"]) as s:
        host, port = s.url.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as c:
            t0 = time.monotonic()
            c.sendall(head.encode())
            time.sleep(0.05)
            t_rest = time.monotonic()
            c.sendall(body.encode())
            t1 = answer(c)
            t_second = time.monotonic()
            c.sendall((head + body).encode())
            t2 = answer(c)
        s.stop(signal.SIGTERM)
    tracks, slices = load(trace)
    assert "network in" in tracks.values() and "network out" in tracks.values(), tracks
    req = by_request(slices)
    assert sorted(req) == [1, 2]
    first, second = req[1], req[2]
    us = lambda t: t * 1e6  # noqa: E731
    for r in (first, second):
        assert sorted(r) == sorted(STAGES)
        assert all(e["dur"] >= 0 for e in r.values()), r
        starts = [r[k]["ts"] for k in STAGES]
        assert starts == sorted(starts), list(zip(STAGES, starts))
    end = lambda e: e["ts"] + e["dur"]  # noqa: E731
    for k in STAGES[:-1]:  # everything up to handing the answer over happened before the client had it
        assert us(t0) - 1 <= first[k]["ts"] and end(first[k]) <= us(t1) + 1, (k, first[k], us(t0), us(t1))
        assert us(t_second) - 1 <= second[k]["ts"] and end(second[k]) <= us(t2) + 1, (k, second[k])
    assert end(first["network out"]) <= second["network in"]["ts"] + 0.01, (first["network out"], second["network in"])
    net_in = first["network in"]
    assert net_in["ts"] < us(t_rest) <= end(net_in) + 1, (net_in, us(t_rest))
    assert net_in["dur"] >= 0.04 * 1e6  # it spans the 50 ms pause between the two parts
