"""`gpuopt serve`'s KServe v2 gRPC endpoint against Triton's own client (tritonclient.grpc) and
the raw stub: every RPC, typed and raw contents, the bidirectional stream, errors and their gRPC
codes, explicit model control, and HTTP and gRPC answering identically. A real server process
on 127.0.0.1 with ephemeral ports; numpy computes the expected results."""
import os
import sys
import threading
import time

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as H  # noqa: E402

grpcclient = pytest.importorskip("tritonclient.grpc")
httpclient = pytest.importorskip("tritonclient.http")
import grpc  # noqa: E402
from tritonclient.grpc import service_pb2, service_pb2_grpc  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from H.module_server(tmp_path_factory, "--http-max-input-size", str(1 << 20))


def client(server):
    return grpcclient.InferenceServerClient(server.grpc_url)


def stub(server):
    return service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_url))


def add_sub_inputs(a, b, mod=grpcclient):
    ins = [mod.InferInput("INPUT0", list(a.shape), "FP32"), mod.InferInput("INPUT1", list(b.shape), "FP32")]
    ins[0].set_data_from_numpy(a)
    ins[1].set_data_from_numpy(b)
    return ins


def code_of(fn):
    with pytest.raises(InferenceServerException) as e:
        fn()
    return e.value.status(), e.value.message()



def collector(n):
    """Async-infer callbacks gathering n answers: got[i] = (OUTPUT0, OUTPUT1) or an error text;
    all_done is set once all n have come back."""
    got, errors = {}, []
    lock = threading.Lock()
    all_done = threading.Event()

    def cb(i):
        def f(result, error):
            with lock:
                if error is not None:
                    errors.append(str(error))
                else:
                    got[i] = (result.as_numpy("OUTPUT0"), result.as_numpy("OUTPUT1"))
                if len(got) + len(errors) == n:
                    all_done.set()
        return f
    return got, errors, all_done, cb

def test_health_metadata_config(server):
    c = client(server)
    assert c.is_server_live() and c.is_server_ready()
    meta = c.get_server_metadata(as_json=True)
    assert meta["name"] == "gpuopt"
    assert {"binary_tensor_data", "system_shared_memory", "cuda_shared_memory"} <= set(meta["extensions"])
    assert c.is_model_ready("simple") and c.is_model_ready("mlp", "1")
    assert not c.is_model_ready("no_such_model")
    m = c.get_model_metadata("simple", as_json=True)
    assert m["versions"] == ["1"]
    assert [i["name"] for i in m["inputs"]] == ["INPUT0", "INPUT1"]
    assert m["inputs"][0]["shape"] == ["-1", "16"]  # int64 is a string in protobuf's JSON
    assert m["outputs"][1]["datatype"] == "FP32"
    cfg = c.get_model_config("simple", as_json=True)["config"]
    assert cfg["max_batch_size"] == 16
    assert cfg["dynamic_batching"]["max_queue_delay_microseconds"] == "5000"
    assert cfg["instance_group"][0]["count"] == 2
    assert cfg["input"][0]["data_type"] == "TYPE_FP32"
    derived = c.get_model_config("mlp", as_json=True)["config"]
    assert derived["max_batch_size"] == 4 and derived["input"][0]["dims"] == ["32"]
    # The same config as HTTP's JSON (numbers aside, which protobuf's JSON writes as strings).
    hcfg = httpclient.InferenceServerClient(server.url).get_model_config("simple")
    assert hcfg["name"] == cfg["name"] and hcfg["max_batch_size"] == cfg["max_batch_size"]
    idx = c.get_model_repository_index(as_json=True)["models"]
    assert {(x["name"], x.get("state")) for x in idx} == {("simple", "READY"), ("mlp", "READY")}


def test_infer_raw_and_statistics(server):
    c = client(server)
    before = c.get_inference_statistics("simple", as_json=True)["model_stats"][0]
    before_ok = int(before["inference_stats"]["success"].get("count", 0))
    rng = np.random.default_rng(3)
    for rows in (1, 3, 16):
        a = rng.standard_normal((rows, 16)).astype(np.float32)
        b = rng.standard_normal((rows, 16)).astype(np.float32)
        r = c.infer("simple", add_sub_inputs(a, b), request_id=f"r{rows}")
        assert r.get_response().id == f"r{rows}"
        assert r.get_response().model_name == "simple" and r.get_response().model_version == "1"
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)
    # One requested output only.
    r = c.infer("simple", add_sub_inputs(a, b), outputs=[grpcclient.InferRequestedOutput("OUTPUT1")])
    assert [o.name for o in r.get_response().outputs] == ["OUTPUT1"]
    np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)
    after = c.get_inference_statistics("simple", as_json=True)["model_stats"][0]
    assert int(after["inference_stats"]["success"]["count"]) == before_ok + 4
    assert int(after["inference_count"]) >= 1 + 3 + 16 + 16
    allstats = c.get_inference_statistics(as_json=True)["model_stats"]
    assert {s["name"] for s in allstats} == {"simple", "mlp"}


def test_typed_contents(server):
    """InferTensorContents (fp32_contents) instead of raw_input_contents, through the raw stub."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 16)).astype(np.float32)
    b = rng.standard_normal((2, 16)).astype(np.float32)
    req = service_pb2.ModelInferRequest(model_name="simple", id="typed")
    for name, x in (("INPUT0", a), ("INPUT1", b)):
        t = req.inputs.add(name=name, datatype="FP32", shape=list(x.shape))
        t.contents.fp32_contents.extend(x.ravel().tolist())
    resp = stub(server).ModelInfer(req, timeout=30)
    assert resp.id == "typed"
    out = {o.name: i for i, o in enumerate(resp.outputs)}
    got0 = np.frombuffer(resp.raw_output_contents[out["OUTPUT0"]], np.float32).reshape(2, 16)
    np.testing.assert_array_equal(got0, a + b)
    # A count that does not match the shape is INVALID_ARGUMENT naming the input.
    del req.inputs[1].contents.fp32_contents[-1]
    with pytest.raises(grpc.RpcError) as e:
        stub(server).ModelInfer(req, timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "INPUT1" in e.value.details() and "31" in e.value.details()


def test_http_and_grpc_answer_identically(server):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 32)).astype(np.float32)
    gi = grpcclient.InferInput("X", list(x.shape), "FP32")
    gi.set_data_from_numpy(x)
    hi = httpclient.InferInput("X", list(x.shape), "FP32")
    hi.set_data_from_numpy(x, binary_data=True)
    g = client(server).infer("mlp", [gi]).as_numpy("Y")
    h = httpclient.InferenceServerClient(server.url).infer("mlp", [hi]).as_numpy("Y")
    assert g.dtype == h.dtype and g.shape == h.shape == (4, 8)
    np.testing.assert_array_equal(g, h)  # bit for bit: the same engine behind both
    np.testing.assert_allclose(g, H.mlp_reference(x, server.weights), rtol=1e-4, atol=1e-5)


def test_errors_and_codes(server):
    c = client(server)
    a = np.zeros((2, 16), np.float32)
    assert code_of(lambda: c.infer("nope", add_sub_inputs(a, a)))[0] == "StatusCode.NOT_FOUND"
    st, msg = code_of(lambda: c.get_model_metadata("nope"))
    assert st == "StatusCode.NOT_FOUND" and "nope" in msg
    st, msg = code_of(lambda: c.infer("simple", add_sub_inputs(np.zeros((2, 8), np.float32), np.zeros((2, 8), np.float32))))
    assert st == "StatusCode.INVALID_ARGUMENT" and "INPUT0" in msg and "[-1,16]" in msg
    st, msg = code_of(lambda: c.infer("simple", add_sub_inputs(np.zeros((17, 16), np.float32), np.zeros((17, 16), np.float32))))
    assert st == "StatusCode.INVALID_ARGUMENT" and "max_batch_size" in msg
    bad = [grpcclient.InferInput("INPUT0", [2, 16], "INT32"), grpcclient.InferInput("INPUT1", [2, 16], "FP32")]
    bad[0].set_data_from_numpy(np.zeros((2, 16), np.int32))
    bad[1].set_data_from_numpy(a)
    st, msg = code_of(lambda: c.infer("simple", bad))
    assert st == "StatusCode.INVALID_ARGUMENT" and "datatype INT32" in msg
    st, msg = code_of(lambda: c.infer("simple", add_sub_inputs(a, a)[:1]))
    assert st == "StatusCode.INVALID_ARGUMENT" and "INPUT1" in msg and "missing" in msg
    st, msg = code_of(lambda: c.infer("simple", add_sub_inputs(a, a), outputs=[grpcclient.InferRequestedOutput("ZZ")]))
    assert st == "StatusCode.INVALID_ARGUMENT" and "ZZ" in msg
    st, msg = code_of(lambda: c.load_model("simple"))
    assert st == "StatusCode.INVALID_ARGUMENT" and "explicit" in msg
    # Over --http-max-input-size (1 MiB here): the transport refuses the message.
    big = np.zeros((16, 16), np.float32)
    huge = [grpcclient.InferInput("INPUT0", [16, 16 * 1100], "FP32"), grpcclient.InferInput("INPUT1", [16, 16], "FP32")]
    huge[0].set_data_from_numpy(np.zeros((16, 16 * 1100), np.float32))
    huge[1].set_data_from_numpy(big)
    assert code_of(lambda: c.infer("simple", huge))[0] == "StatusCode.RESOURCE_EXHAUSTED"
    # A raw content whose size does not match the shape.
    req = service_pb2.ModelInferRequest(model_name="simple")
    req.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 16])
    req.inputs.add(name="INPUT1", datatype="FP32", shape=[1, 16])
    req.raw_input_contents.extend([b"\0" * 64, b"\0" * 60])
    with pytest.raises(grpc.RpcError) as e:
        stub(server).ModelInfer(req, timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "needs 64 bytes" in e.value.details()
    # The server still answers after all of that.
    np.testing.assert_array_equal(c.infer("simple", add_sub_inputs(a + 1, a)).as_numpy("OUTPUT0"), a + 1)
    st = c.get_inference_statistics("simple", as_json=True)["model_stats"][0]["inference_stats"]
    assert int(st["fail"]["count"]) >= 6


def test_stream_infer(server):
    c = client(server)
    results, done = {}, threading.Event()
    lock = threading.Lock()
    n = 40

    def cb(result, error):
        with lock:
            if error is not None:
                results[f"err{len(results)}"] = error
            else:
                results[result.get_response().id] = result
            if len(results) == n + 1:
                done.set()

    c.start_stream(callback=cb)
    rng = np.random.default_rng(6)
    sent = {}
    for i in range(n):
        a = rng.standard_normal((1 + i % 3, 16)).astype(np.float32)
        sent[f"s{i}"] = a
        c.async_stream_infer("simple", add_sub_inputs(a, a * 2), request_id=f"s{i}")
        if i == n // 2:  # an error in the middle answers with error_message; the stream goes on
            c.async_stream_infer("nope", add_sub_inputs(a, a), request_id="bad")
    assert done.wait(60), f"{len(results)} of {n + 1} answers"
    c.stop_stream()
    errs = [v for k, v in results.items() if k.startswith("err")]
    assert len(errs) == 1 and "nope" in str(errs[0])
    for rid, a in sent.items():
        np.testing.assert_array_equal(results[rid].as_numpy("OUTPUT0"), a * 3)
        np.testing.assert_array_equal(results[rid].as_numpy("OUTPUT1"), -a)


def test_explicit_model_control(tmp_path):
    H.make_repository(str(tmp_path))
    with H.Server(["--model-repository", str(tmp_path), "--model-control-mode", "explicit",
                   "--load-model", "mlp"]) as s:
        c = client(s)
        assert c.is_model_ready("mlp") and not c.is_model_ready("simple")
        idx = {m["name"]: m.get("state") for m in c.get_model_repository_index(as_json=True)["models"]}
        assert idx == {"mlp": "READY", "simple": "UNAVAILABLE"}
        c.load_model("simple")
        assert c.is_model_ready("simple")
        a = np.ones((1, 16), np.float32)
        np.testing.assert_array_equal(c.infer("simple", add_sub_inputs(a, a)).as_numpy("OUTPUT0"), a * 2)
        c.unload_model("simple")
        assert not c.is_model_ready("simple")
        assert code_of(lambda: c.infer("simple", add_sub_inputs(a, a)))[0] in ("StatusCode.NOT_FOUND",
                                                                              "StatusCode.UNAVAILABLE")
        st, msg = code_of(lambda: c.load_model("no_such_model"))
        assert st == "StatusCode.INVALID_ARGUMENT" and "no_such_model" in msg
        code, _, out = s.stop()
        assert code == 0, out


def test_grpc_port_in_use_is_one_clear_line(server, tmp_path):
    import subprocess
    H.make_repository(str(tmp_path))
    r = subprocess.run([H.gpuopt_bin(), "serve", "--model-repository", str(tmp_path), "--http-address", "127.0.0.1",
                        "--http-port", "0", "--metrics-port", "0", "--grpc-port", str(server.grpc_port)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and f"cannot listen on 127.0.0.1:{server.grpc_port}" in err[0], r.stderr


def test_many_concurrent_calls_and_streams_answer_correctly(server):
    """400 unary calls in flight at once on one channel, 4 streams of 50 requests each, and HTTP
    calls at the same time: every answer equals numpy's (the batcher forms batches of up to 16,
    whose answers several threads deliver); the gRPC and HTTP answers to one request are equal."""
    rng = np.random.default_rng(11)
    n_unary, n_streams, per_stream = 400, 4, 50
    data = [rng.standard_normal((1 + i % 4, 16)).astype(np.float32) for i in range(n_unary)]
    c = client(server)
    got, errors, all_done, cb = collector(n_unary)

    stream_results = [dict() for _ in range(n_streams)]
    stream_sent = [dict() for _ in range(n_streams)]

    def run_stream(k):
        sc = client(server)
        done = threading.Event()

        def scb(result, error):
            if error is not None:
                stream_results[k]["error"] = str(error)
            else:
                stream_results[k][result.get_response().id] = result.as_numpy("OUTPUT0")
            if len(stream_results[k]) == per_stream:
                done.set()
        sc.start_stream(callback=scb)
        srng = np.random.default_rng(100 + k)
        for j in range(per_stream):
            a = srng.standard_normal((1 + j % 3, 16)).astype(np.float32)
            stream_sent[k][f"k{k}-{j}"] = a
            sc.async_stream_infer("simple", add_sub_inputs(a, a), request_id=f"k{k}-{j}")
        assert done.wait(60), f"stream {k}: {len(stream_results[k])} of {per_stream}"
        sc.stop_stream()

    streams = [threading.Thread(target=run_stream, args=(k,)) for k in range(n_streams)]
    for t in streams:
        t.start()
    for i, a in enumerate(data):
        c.async_infer("simple", add_sub_inputs(a, a * 0.5), cb(i), request_id=str(i))
    h = httpclient.InferenceServerClient(server.url, concurrency=8)
    http = [h.async_infer("simple", add_sub_inputs(data[i], data[i] * 0.5, httpclient)) for i in range(0, n_unary, 10)]
    assert all_done.wait(60), f"{len(got)} answers and {len(errors)} errors of {n_unary}"
    for t in streams:
        t.join(60)
    assert not errors, errors[:3]
    for i, a in enumerate(data):
        np.testing.assert_array_equal(got[i][0], a + a * 0.5)
        np.testing.assert_array_equal(got[i][1], a - a * 0.5)
    for j, r in zip(range(0, n_unary, 10), http):
        np.testing.assert_array_equal(r.get_result().as_numpy("OUTPUT0"), got[j][0])
    for k in range(n_streams):
        assert "error" not in stream_results[k], stream_results[k]["error"]
        for rid, a in stream_sent[k].items():
            np.testing.assert_array_equal(stream_results[k][rid], a * 2)
    h.close()


def test_stream_whose_client_does_not_read_is_held_back(tmp_path):
    """A stream client sends 500 requests whose answers are 128 KB each and reads nothing for two
    seconds: once 256 answers wait, the server stops reading the stream (it says so at debug level)
    instead of buffering every answer; another call is served meanwhile; once the client reads,
    every answer arrives, correct and under its request's id."""
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["b", 1])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["b", 32768])
    g = helper.make_graph([helper.make_node("Expand", ["X", "shape"], ["Y"])], "wide", [x], [y],
                          [numpy_helper.from_array(np.array([1, 32768], np.int64), "shape")])
    H._save(helper.make_model(g), str(tmp_path / "wide" / "1" / "model.onnx"))
    n = 500

    def requests():
        for i in range(n):
            req = service_pb2.ModelInferRequest(model_name="wide", id=str(i))
            req.inputs.add(name="X", datatype="FP32", shape=[1, 1])
            req.raw_input_contents.append(np.array([[i]], np.float32).tobytes())
            yield req

    with H.Server(["--model-repository", str(tmp_path), "--log-verbose", "2"]) as s:
        ch = grpc.insecure_channel(s.grpc_url)
        answers = service_pb2_grpc.GRPCInferenceServiceStub(ch).ModelStreamInfer(requests(), timeout=120)
        time.sleep(1)
        one = grpcclient.InferInput("X", [1, 1], "FP32")
        one.set_data_from_numpy(np.array([[-2]], np.float32))
        assert (client(s).infer("wide", [one]).as_numpy("Y") == -2).all()
        time.sleep(1)
        got = set()
        for r in answers:
            assert not r.error_message, r.error_message
            i = int(r.infer_response.id)
            v = np.frombuffer(r.infer_response.raw_output_contents[0], np.float32)
            assert v.shape == (32768,) and (v == i).all(), i
            got.add(i)
        assert got == set(range(n))
        ch.close()
        code, _, out = s.stop()
        assert code == 0, out
        assert any("answers wait; reads paused" in line for line in s.log), "the stream was read without bound"


def test_calls_cancelled_mid_call_leave_the_server_whole(server):
    """200 ModelInfer calls whose deadline passes while they wait in the batcher (5 ms queue delay)
    and 50 streams cancelled with requests in flight: the unary calls end OK or DEADLINE_EXCEEDED,
    and the server, whose answers to them find their calls gone, answers the next calls correctly."""
    c = client(server)
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    st = stub(server)
    req = service_pb2.ModelInferRequest(model_name="simple")
    for name in ("INPUT0", "INPUT1"):
        req.inputs.add(name=name, datatype="FP32", shape=[1, 16])
    req.raw_input_contents.extend([a.tobytes(), a.tobytes()])
    futures = [st.ModelInfer.future(req, timeout=0.002) for _ in range(200)]
    codes = set()
    for f in futures:
        try:
            f.result()
            codes.add("OK")
        except grpc.RpcError as e:
            codes.add(e.code())
    assert codes <= {"OK", grpc.StatusCode.DEADLINE_EXCEEDED}, codes
    for _ in range(50):
        call = st.ModelStreamInfer(iter([req] * 8), timeout=30)
        call.cancel()
    for k in range(5):
        np.testing.assert_array_equal(c.infer("simple", add_sub_inputs(a + k, a)).as_numpy("OUTPUT0"), 2 * a + k)
    assert c.is_server_live()


def test_thousand_async_calls_and_many_threads_answer_correctly(server):
    """1,000 calls in flight at once through tritonclient.grpc's async API over four connections,
    while 8 threads make blocking calls on clients of their own: every answer equals numpy's."""
    rng = np.random.default_rng(5)
    n, n_threads, per_thread = 1000, 8, 40
    data = [rng.standard_normal((1, 16)).astype(np.float32) for _ in range(n)]
    clients = [client(server) for _ in range(4)]
    got, errors, all_done, cb = collector(n)

    thread_errors = []

    def blocking(k):
        c = client(server)
        trng = np.random.default_rng(1000 + k)
        try:
            for _ in range(per_thread):
                a = trng.standard_normal((2, 16)).astype(np.float32)
                r = c.infer("simple", add_sub_inputs(a, a * 3))
                np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + a * 3)
                np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - a * 3)
        except Exception as e:  # noqa: BLE001 -- reported below
            thread_errors.append(repr(e))

    threads = [threading.Thread(target=blocking, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for i, a in enumerate(data):
        clients[i % 4].async_infer("simple", add_sub_inputs(a, -2 * a), cb(i))
    assert all_done.wait(60), f"{len(got)} answers and {len(errors)} errors of {n}"
    for t in threads:
        t.join(60)
    assert not errors, errors[:3]
    assert not thread_errors, thread_errors[:3]
    for i, a in enumerate(data):
        np.testing.assert_array_equal(got[i][0], a + -2 * a)
        np.testing.assert_array_equal(got[i][1], a - -2 * a)


def test_shutdown_with_calls_in_flight_answers_them_and_exits(tmp_path):
    """SIGTERM while 150 async calls wait in the batcher (a batch waits up to 0.5 s for more rows)
    and 150 more are being sent: the server exits 0 within seconds and every call ends, answered
    correctly (the ones it had accepted: the drain) or refused with UNAVAILABLE (they arrived once
    the drain had begun); none is left hanging."""
    H.make_repository(str(tmp_path), delay_us=500000, max_batch=1024)
    s = H.Server(["--model-repository", str(tmp_path), "--grpc-thread-count", "2"])
    try:
        c = client(s)
        n = 300
        rng = np.random.default_rng(8)
        data = [rng.standard_normal((1, 16)).astype(np.float32) for _ in range(n)]
        results = {}
        lock = threading.Lock()
        all_done = threading.Event()

        def cb(i):
            def f(result, error):
                with lock:
                    results[i] = (result, error)
                    if len(results) == n:
                        all_done.set()
            return f

        for i in range(n // 2):
            c.async_infer("simple", add_sub_inputs(data[i], data[i]), cb(i))
        time.sleep(0.3)  # in the server by now, waiting in the batcher
        code_holder = []
        stopper = threading.Thread(target=lambda: code_holder.append(s.stop(timeout=30)))
        stopper.start()
        for i in range(n // 2, n):
            try:
                c.async_infer("simple", add_sub_inputs(data[i], data[i]), cb(i))
            except InferenceServerException as e:
                with lock:
                    results[i] = (None, e)
                    if len(results) == n:
                        all_done.set()
        assert all_done.wait(30), f"{len(results)} of {n} calls ended"
        stopper.join(40)
        code, secs, out = code_holder[0]
        assert code == 0 and secs < 20, (code, secs, out)
        answered = 0
        for i, (result, error) in results.items():
            if error is None:
                np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), 2 * data[i])
                answered += 1
            else:
                assert error.status() == "StatusCode.UNAVAILABLE", (i, error.status(), error.message())
        assert answered >= 1, answered
        assert "Server stopped cleanly" in out, out
    finally:
        s.__exit__()
