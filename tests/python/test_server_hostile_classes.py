"""One request must never kill, hang or bloat the server: each class of hostile input (URLs that
are not UTF-8, shrunk shared memory, running out of file descriptors, operator files that are
FIFOs or endless, external data that escapes its folder, memory-amplifying bodies, malformed gRPC
messages, overflowing version folders) against a real `gpuopt serve`, each followed by a health
check and an inference checked against numpy."""
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.environ.get("GPUOPT_TEST_SOURCE_DIR", "."), "tests", "server"))
import server_harness as H  # noqa: E402

grpc = pytest.importorskip("grpc")
pb = pytest.importorskip("tritonclient.grpc.service_pb2")

MB = 1 << 20
SVC = "/inference.GRPCInferenceService/"


def request(method, port, path, body=None, timeout=60):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def raw_http(port, head, timeout=10):
    """Sends raw request bytes (any byte in the path); returns (status, body bytes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as c:
        c.sendall(head)
        out = b""
        while b"\r\n\r\n" not in out or len(out) < out.index(b"\r\n\r\n") + 4 + _length(out):
            d = c.recv(65536)
            if not d:
                break
            out += d
    status = int(out.split(b" ", 2)[1])
    return status, out[out.index(b"\r\n\r\n") + 4:]


def _length(out):
    for line in out.split(b"\r\n\r\n")[0].split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return int(v)
    return 0


def healthy(s):
    """Live, ready, and a correct inference on 'simple' over HTTP and gRPC."""
    assert s.proc.poll() is None, "".join(s.log[-20:])
    assert request("GET", s.http_port, "/v2/health/live")[0] == 200
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    b = np.full((1, 16), 0.5, np.float32)
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": a.ravel().tolist()},
                       {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": b.ravel().tolist()}]}
    st, out = request("POST", s.http_port, "/v2/models/simple/infer", json.dumps(body).encode())
    assert st == 200, out
    got = {o["name"]: np.array(o["data"], np.float32) for o in json.loads(out)["outputs"]}
    np.testing.assert_array_equal(got["OUTPUT0"], (a + b).ravel())
    np.testing.assert_array_equal(got["OUTPUT1"], (a - b).ravel())
    r = pb.ModelInferRequest(model_name="simple")
    for name, x in (("INPUT0", a), ("INPUT1", b)):
        r.inputs.add(name=name, datatype="FP32", shape=[1, 16])
        r.raw_input_contents.append(x.tobytes())
    with grpc.insecure_channel(s.grpc_url) as ch:
        resp = ch.unary_unary(SVC + "ModelInfer", request_serializer=pb.ModelInferRequest.SerializeToString,
                              response_deserializer=pb.ModelInferResponse.FromString)(r, timeout=20)
    names = [o.name for o in resp.outputs]
    out0 = np.frombuffer(resp.raw_output_contents[names.index("OUTPUT0")], np.float32)
    np.testing.assert_array_equal(out0, (a + b).ravel())


def logged(s, text, timeout=5):
    """Whether the server's output has a line with `text` (read by a thread: allow it time)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if any(text in line for line in list(s.log)):
            return True
        time.sleep(0.05)
    return False


def grpc_live(s, timeout):
    """ServerLive over a fresh connection within `timeout` seconds."""
    try:
        with grpc.insecure_channel(s.grpc_url, options=[("grpc.use_local_subchannel_pool", 1)]) as ch:
            r = ch.unary_unary(SVC + "ServerLive", request_serializer=pb.ServerLiveRequest.SerializeToString,
                               response_deserializer=pb.ServerLiveResponse.FromString)(pb.ServerLiveRequest(),
                                                                                       timeout=timeout)
        return r.live
    except grpc.RpcError:
        return False


def vm_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(key)


def reset_peak(pid):
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def rss_around(s, send):
    """(peak RSS rise, RSS left after) in bytes around one refused request, and its answer."""
    pid = s.proc.pid
    time.sleep(0.3)
    reset_peak(pid)
    base = vm_kib(pid, "VmRSS")
    answer = send()
    peak = vm_kib(pid, "VmHWM")
    time.sleep(0.5)
    after = vm_kib(pid, "VmRSS")
    return (peak - base) * 1024, (after - base) * 1024, answer


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    H.make_repository(str(root))
    s = H.Server(["--model-repository", str(root), "--model-control-mode", "explicit", "--load-model", "simple",
                  "--http-max-input-size", str(64 * MB)])
    s.root = root
    yield s
    code, _, out = s.stop()
    assert code == 0, out


# ---- 1. invalid UTF-8 in a URL: 400 with the bytes escaped, never an abort ----

def test_invalid_utf8_urls_are_400(server):
    s = server
    for head in (b"GET /%FF HTTP/1.1\r\nHost: x\r\n\r\n", b"PUT /%FF%FE/x HTTP/1.1\r\nHost: x\r\n\r\n",
                 b"POST /v2/models/%FF/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
                 b"GET /v2/models/%C0%AF/ready HTTP/1.1\r\nHost: x\r\n\r\n",
                 b"POST /v2/systemsharedmemory/region/%ED%A0%80/register HTTP/1.1\r\nHost: x\r\n"
                 b"Content-Length: 2\r\n\r\n{}",
                 b"GET /v2/models/\xff\xfe/config HTTP/1.1\r\nHost: x\r\n\r\n"):
        st, body = raw_http(s.http_port, head)
        assert st == 400, (head, body)
        msg = json.loads(body)["error"]
        assert "not valid UTF-8" in msg and "\\x" in msg, msg
    st, body = raw_http(s.metrics_port, b"GET /%FF HTTP/1.1\r\nHost: x\r\n\r\n")
    assert st == 400 and "\\xff" in json.loads(body)["error"]
    healthy(s)


def test_a_model_folder_that_is_not_utf8_is_skipped(server):
    bad = os.path.join(os.fsencode(str(server.root)), b"m\xff")
    H.add_sub_model(os.path.join(bad, b"1", b"model.onnx").decode("utf-8", "surrogateescape"))
    st, out = request("POST", server.http_port, "/v2/repository/index", b"{}")
    assert st == 200, out
    names = [m["name"] for m in json.loads(out)]
    assert "simple" in names and not any(n.startswith("m") and n != "mlp" for n in names), names
    assert logged(server, "is not valid UTF-8")
    healthy(server)


# ---- 2. a client shrinks its registered shared memory ----

def shm_object(key, size):
    fd = os.open("/dev/shm" + key, os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, size)
    return fd


def test_shrunk_shared_memory_is_400_and_the_server_lives(server):
    s = server
    key = f"/gpuopt_shrink_{os.getpid()}"
    fd = shm_object(key, 4096)
    try:
        body = json.dumps({"key": key, "offset": 0, "byte_size": 4096}).encode()
        assert request("POST", s.http_port, "/v2/systemsharedmemory/region/r/register", body)[0] == 200
        os.ftruncate(fd, 0)
        ins = [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16],
                "parameters": {"shared_memory_region": "r", "shared_memory_byte_size": 64}},
               {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": [0.0] * 16}]
        st, out = request("POST", s.http_port, "/v2/models/simple/infer", json.dumps({"inputs": ins}).encode())
        assert st == 400 and b"now has 0 bytes" in out, out
        outs = {"inputs": [dict(ins[1], name="INPUT0"), ins[1]],
                "outputs": [{"name": "OUTPUT0", "parameters": {"shared_memory_region": "r",
                                                               "shared_memory_byte_size": 64}}]}
        st, out = request("POST", s.http_port, "/v2/models/simple/infer", json.dumps(outs).encode())
        assert st == 400 and b"now has 0 bytes" in out, out
        # gRPC: the same region as an input.
        r = pb.ModelInferRequest(model_name="simple")
        i = r.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 16])
        i.parameters["shared_memory_region"].string_param = "r"
        i.parameters["shared_memory_byte_size"].int64_param = 64
        r.inputs.add(name="INPUT1", datatype="FP32", shape=[1, 16], contents=pb.InferTensorContents(
            fp32_contents=[0.0] * 16))
        with grpc.insecure_channel(s.grpc_url) as ch:
            with pytest.raises(grpc.RpcError) as e:
                ch.unary_unary(SVC + "ModelInfer", request_serializer=pb.ModelInferRequest.SerializeToString,
                               response_deserializer=pb.ModelInferResponse.FromString)(r, timeout=20)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
        # Shrinking and growing it back while requests read it: every answer is 200 or 400.
        os.ftruncate(fd, 4096)
        stop = threading.Event()

        def flap():
            while not stop.is_set():
                os.ftruncate(fd, 0)
                os.ftruncate(fd, 4096)

        t = threading.Thread(target=flap)
        t.start()
        statuses = set()
        t0 = time.time()
        while time.time() - t0 < 2:
            statuses.add(request("POST", s.http_port, "/v2/models/simple/infer",
                                 json.dumps({"inputs": ins}).encode())[0])
        stop.set()
        t.join()
        assert statuses <= {200, 400}, statuses
        request("POST", s.http_port, "/v2/systemsharedmemory/region/r/unregister", b"{}")
    finally:
        os.close(fd)
        os.unlink("/dev/shm" + key)
    healthy(s)


# ---- 3. out of file descriptors ----

def test_descriptor_exhaustion_spares_grpc(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2200:
        pytest.skip(f"the test needs 2200 descriptors of its own (hard limit {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2200), hard))
    H.make_repository(str(tmp_path))

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))

    cmd = [H.gpuopt_bin(), "serve", "--http-address", "127.0.0.1", "--http-port", "0", "--metrics-port", "0",
           "--grpc-port", "0", "--model-repository", str(tmp_path), "--grpc-idle-timeout", "1",
           "--http-idle-timeout", "30"]
    orig = subprocess.Popen
    subprocess.Popen = lambda *a, **k: orig(*a, preexec_fn=limit, **k)
    try:
        s = H.Server([], command=cmd)
    finally:
        subprocess.Popen = orig
    with s:
        held = []
        for _ in range(1010):
            try:
                held.append(socket.create_connection(("127.0.0.1", s.http_port), timeout=5))
            except OSError:
                break
        time.sleep(2)
        accept_lines = sum("accept failed" in line for line in s.log)
        assert accept_lines <= 5, accept_lines  # backs off, one line a second at most
        assert grpc_live(s, 10)  # gRPC still answers while HTTP holds its share of descriptors
        for c in held:
            c.close()
        time.sleep(0.5)
        healthy(s)  # and HTTP serves again once its connections are gone
        # Preface-only gRPC connections are closed once idle (--grpc-idle-timeout 1).
        idle = socket.create_connection(("127.0.0.1", s.grpc_port), timeout=10)
        idle.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        t0 = time.time()
        while idle.recv(65536):
            pass
        assert time.time() - t0 < 8
        idle.close()
        # gRPC connections past the process's limit: grpc's own listener gives up on EMFILE; the
        # server restarts it once descriptors are free again.
        flood = []
        for _ in range(1100):
            try:
                c = socket.create_connection(("127.0.0.1", s.grpc_port), timeout=5)
                c.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
                flood.append(c)
            except OSError:
                break
        time.sleep(1.5)
        for c in flood:
            c.close()
        t0 = time.time()
        while not grpc_live(s, 3):
            assert time.time() - t0 < 45, "gRPC did not accept again"
            time.sleep(0.5)
        print(f"gRPC accepts again {time.time() - t0:.1f} s after the flood ended")
        print("".join(line for line in s.log if "gRPC:" in line or "accept failed" in line))
        # This grpc's listener gives up on EMFILE: back only through the watchdog's restart.
        assert time.time() - t0 < 3 or logged(s, "stopped accepting (out of file descriptors?); restarting it")
        healthy(s)
        assert s.stop()[0] == 0


# ---- 4. operator files: FIFOs, endless and oversized configs ----

def test_config_files_that_are_not_regular_or_too_large(server):
    s = server
    root = s.root
    cases = {"fifo": "not a regular file", "zero": "not a regular file", "sparse": "over the limit"}
    for name in cases:
        H.add_sub_model(str(root / name / "1" / "model.onnx"))
    os.mkfifo(root / "fifo" / "config.pbtxt")
    os.symlink("/dev/zero", root / "zero" / "config.pbtxt")
    with open(root / "sparse" / "config.pbtxt", "wb") as f:
        f.truncate(2 << 30)
    for name, why in cases.items():
        peak, _, (st, out) = rss_around(
            s, lambda: request("POST", s.http_port, f"/v2/repository/models/{name}/load", b"{}", timeout=20))
        assert st == 400 and why.encode() in out and b"config.pbtxt" in out, (name, st, out)
        assert peak < 32 * MB, (name, peak)
    healthy(s)


def test_a_fifo_config_at_start_is_one_line_not_a_hang(tmp_path):
    H.make_repository(str(tmp_path))
    os.remove(tmp_path / "simple" / "config.pbtxt")
    os.mkfifo(tmp_path / "simple" / "config.pbtxt")
    r = subprocess.run([H.gpuopt_bin(), "serve", "--http-address", "127.0.0.1", "--http-port", "0",
                        "--metrics-port", "0", "--grpc-port", "0", "--model-repository", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r
    assert "config.pbtxt' is not a regular file" in r.stderr + r.stdout


# ---- 5. external data must stay inside the model folder ----

def external_model(folder, location):
    w = np.arange(16, dtype=np.float32)
    t = numpy_helper.from_array(w, "W")
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value=location)
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 16])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 16])
    g = helper.make_graph([helper.make_node("Add", ["X", "W"], ["Y"])], "ext", [x], [y], [t])
    m = helper.make_model(g)
    m.opset_import[0].version = 17
    m.ir_version = 8
    os.makedirs(folder / "1", exist_ok=True)
    with open(folder / "1" / "model.onnx", "wb") as f:
        f.write(m.SerializeToString())
    return w


def test_external_data_that_escapes_its_folder(server, tmp_path):
    s = server
    outside = tmp_path / "secret.bin"
    outside.write_bytes(b"S" * 64)  # the size the tensor needs: only the path check can refuse it
    external_model(s.root / "ext_escape", "w.bin")
    os.symlink(outside, s.root / "ext_escape" / "1" / "w.bin")
    external_model(s.root / "ext_fifo", "w.bin")
    os.mkfifo(s.root / "ext_fifo" / "1" / "w.bin")
    w = external_model(s.root / "ext_ok", "w.bin")
    os.makedirs(s.root / "ext_ok" / "1" / "data")
    (s.root / "ext_ok" / "1" / "data" / "real.bin").write_bytes(w.tobytes())
    os.symlink("data/real.bin", s.root / "ext_ok" / "1" / "w.bin")  # a link that stays inside is fine
    st, out = request("POST", s.http_port, "/v2/repository/models/ext_escape/load", b"{}", timeout=20)
    assert st == 400 and b"outside the model folder" in out, out
    st, out = request("POST", s.http_port, "/v2/repository/models/ext_fifo/load", b"{}", timeout=20)
    assert st == 400 and b"not a regular file" in out, out
    st, out = request("POST", s.http_port, "/v2/repository/models/ext_ok/load", b"{}", timeout=60)
    assert st == 200, out
    x = np.ones(16, np.float32)
    body = {"inputs": [{"name": "X", "datatype": "FP32", "shape": [1, 16], "data": x.tolist()}]}
    st, out = request("POST", s.http_port, "/v2/models/ext_ok/infer", json.dumps(body).encode())
    assert st == 200, out
    np.testing.assert_array_equal(json.loads(out)["outputs"][0]["data"], (x + w).tolist())
    healthy(s)


# ---- 6. memory amplification: refused before the memory is taken, and given back ----

def amplifying_bodies():
    ins = '"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,16],"data":[' + ",".join(["0"] * 16) + "]}]"
    n = 60 * MB
    yield "outputs", ("{" + ins + ',"outputs":[' + "{}," * (n // 3) + "{}]}").encode()
    yield "parameters", ('{"parameters":{"a":[' + "[]," * (n // 3) + "[]]}," + ins + "}").encode()
    shape = "[" + "0," * (n // 2) + "0]"
    yield "shape", ('{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":' + shape + ',"data":[]}]}').encode()


def test_amplifying_bodies_are_refused_within_bounds(server):
    s = server
    limit = 64 * MB  # --http-max-input-size: the limit these bodies come closest to
    for what, body in amplifying_bodies():
        peak, left, (st, out) = rss_around(
            s, lambda: request("POST", s.http_port, "/v2/models/simple/infer", body, timeout=60))
        print(f"{what}: {len(body) / MB:.0f} MB body -> {st}, peak RSS +{peak / MB:.0f} MB, "
              f"{left / MB:.0f} MB left after")
        assert st in (400, 413), (what, st, out[:300])
        assert peak <= 2 * limit, (what, peak)
        assert left <= 16 * MB, (what, left)
    healthy(s)


def test_grpc_gzip_bomb_is_refused_before_inflating(server):
    s = server
    r = pb.ModelInferRequest(model_name="simple")
    r.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 32 * MB])
    r.raw_input_contents.append(bytes(128 * MB))  # 128 MB of zeros: about 130 KB gzipped
    wire = r.SerializeToString()
    del r

    def send():
        with grpc.insecure_channel(s.grpc_url, compression=grpc.Compression.Gzip,
                                   options=[("grpc.max_send_message_length", -1)]) as ch:
            try:
                ch.unary_unary(SVC + "ModelInfer")(wire, timeout=60)
                return None
            except grpc.RpcError as e:
                return e.code()

    peak, left, code = rss_around(s, send)
    print(f"gzip bomb: {code}, peak RSS +{peak / MB:.0f} MB, {left / MB:.0f} MB left after")
    assert code in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.RESOURCE_EXHAUSTED), code
    assert peak <= 2 * 64 * MB, peak
    healthy(s)


# ---- 7. gRPC answers: malformed messages, long names, streams ----

def test_grpc_malformed_and_long_names(server):
    s = server
    with grpc.insecure_channel(s.grpc_url) as ch:
        for method in ("ModelInfer", "SystemSharedMemoryRegister", "ModelMetadata"):
            with pytest.raises(grpc.RpcError) as e:
                ch.unary_unary(SVC + method)(b"\x0a\xff\xff\xff\xff\x0f", timeout=20)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, e.value)
            assert method in e.value.details() and "protobuf" in e.value.details()
        long_name = "m" * MB
        meta = ch.unary_unary(SVC + "ModelMetadata", request_serializer=pb.ModelMetadataRequest.SerializeToString,
                              response_deserializer=pb.ModelMetadataResponse.FromString)
        with pytest.raises(grpc.RpcError) as e:
            meta(pb.ModelMetadataRequest(name=long_name), timeout=20)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND, e.value
        assert len(e.value.details()) < 4096 and f"({MB} bytes)" in e.value.details()
        reg = ch.unary_unary(SVC + "SystemSharedMemoryRegister",
                             request_serializer=pb.SystemSharedMemoryRegisterRequest.SerializeToString,
                             response_deserializer=pb.SystemSharedMemoryRegisterResponse.FromString)
        with pytest.raises(grpc.RpcError) as e:
            reg(pb.SystemSharedMemoryRegisterRequest(name="x", key="/" + "k" * MB, byte_size=64), timeout=20)
        assert e.value.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT), e.value
        assert len(e.value.details()) < 4096
    healthy(s)


def test_grpc_stream_goes_on_past_a_malformed_message(server):
    s = server
    good = pb.ModelInferRequest(model_name="simple", id="good")
    for name in ("INPUT0", "INPUT1"):
        good.inputs.add(name=name, datatype="FP32", shape=[1, 16])
        good.raw_input_contents.append(np.ones(16, np.float32).tobytes())
    msgs = [good.SerializeToString(), b"\x0a\xff\xff\xff\xff\x0f", good.SerializeToString()]
    with grpc.insecure_channel(s.grpc_url) as ch:
        call = ch.stream_stream(SVC + "ModelStreamInfer", response_deserializer=pb.ModelStreamInferResponse.FromString)
        answers = list(call(iter(msgs), timeout=30))
    assert len(answers) == 3, answers
    errors = [a.error_message for a in answers if a.error_message]
    assert len(errors) == 1 and "not a valid ModelInferRequest" in errors[0], errors
    for a in answers:
        if not a.error_message:
            np.testing.assert_array_equal(np.frombuffer(a.infer_response.raw_output_contents[0], np.float32),
                                          np.full(16, 2, np.float32))
    healthy(s)


# ---- 8. version folders whose numbers overflow ----

def test_overflowing_version_folders_are_logged(server):
    s = server
    H.add_sub_model(str(s.root / "vers" / "1" / "model.onnx"))
    for v in (str(2 ** 63), str(2 ** 70)):
        H.add_sub_model(str(s.root / "vers" / v / "model.onnx"))
    st, out = request("POST", s.http_port, "/v2/repository/models/vers/load", b"{}", timeout=60)
    assert st == 200, out
    for v in (str(2 ** 63), str(2 ** 70)):
        assert logged(s, f"version folder '{v}' is skipped"), v
    st, out = request("GET", s.http_port, "/v2/models/vers")
    assert st == 200 and json.loads(out)["versions"] == ["1"], out
    healthy(s)
