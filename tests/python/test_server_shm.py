"""Triton's system shared-memory extension on `gpuopt serve`, over HTTP and gRPC, with
tritonclient.utils.shared_memory creating the POSIX regions: register / status / unregister,
inputs read from and outputs written to regions at offsets, bounds errors; and SIGTERM under
mixed HTTP and gRPC load losing no accepted request."""
import os
import signal
import sys
import threading
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as H  # noqa: E402

grpcclient = pytest.importorskip("tritonclient.grpc")
httpclient = pytest.importorskip("tritonclient.http")
shm = pytest.importorskip("tritonclient.utils.shared_memory")
from tritonclient.utils import InferenceServerException  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    H.make_repository(str(root))
    s = H.Server(["--model-repository", str(root)])
    yield s
    code, _, out = s.stop()
    assert code == 0, out


def clients(server):
    return [("http", httpclient, httpclient.InferenceServerClient(server.url)),
            ("grpc", grpcclient, grpcclient.InferenceServerClient(server.grpc_url))]


def status_names(c, proto):
    st = c.get_system_shared_memory_status() if proto == "http" else c.get_system_shared_memory_status(as_json=True)
    if proto == "http":
        return {r["name"]: r for r in st}
    return {k: v for k, v in st.get("regions", {}).items()}


def err(fn):
    with pytest.raises(InferenceServerException) as e:
        fn()
    return str(e.value.status()), e.value.message()


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_inputs_and_outputs_in_shared_memory(server, proto):
    _, mod, c = dict((p, (p, m, cl)) for p, m, cl in clients(server))[proto]
    rows = 3
    nbytes = rows * 16 * 4
    key_in, key_out = f"/gpuopt_test_in_{proto}_{os.getpid()}", f"/gpuopt_test_out_{proto}_{os.getpid()}"
    # Inputs at offsets 0 and 256 of one region; outputs at 128 and 128 + nbytes + 64 of another.
    h_in = shm.create_shared_memory_region("in", key_in, 256 + nbytes)
    h_out = shm.create_shared_memory_region("out", key_out, 128 + 2 * nbytes + 64)
    try:
        rng = np.random.default_rng(7)
        a = rng.standard_normal((rows, 16)).astype(np.float32)
        b = rng.standard_normal((rows, 16)).astype(np.float32)
        shm.set_shared_memory_region(h_in, [a])
        shm.set_shared_memory_region(h_in, [b], offset=256)
        c.register_system_shared_memory(f"in_{proto}", key_in, 256 + nbytes)
        c.register_system_shared_memory(f"out_{proto}", key_out, 128 + 2 * nbytes + 64)
        names = status_names(c, proto)
        assert {f"in_{proto}", f"out_{proto}"} <= set(names)
        assert int(names[f"in_{proto}"]["byte_size"]) == 256 + nbytes
        assert names[f"in_{proto}"]["key"] == key_in

        ins = [mod.InferInput("INPUT0", [rows, 16], "FP32"), mod.InferInput("INPUT1", [rows, 16], "FP32")]
        ins[0].set_shared_memory(f"in_{proto}", nbytes)
        ins[1].set_shared_memory(f"in_{proto}", nbytes, offset=256)
        outs = [mod.InferRequestedOutput("OUTPUT0"), mod.InferRequestedOutput("OUTPUT1")]
        outs[0].set_shared_memory(f"out_{proto}", nbytes, offset=128)
        outs[1].set_shared_memory(f"out_{proto}", nbytes + 64, offset=128 + nbytes)
        r = c.infer("simple", ins, outputs=outs)
        o0 = r.get_output("OUTPUT0")
        shape0 = o0["shape"] if proto == "http" else list(o0.shape)
        assert [int(x) for x in shape0] == [rows, 16]
        got0 = shm.get_contents_as_numpy(h_out, np.float32, [rows, 16], offset=128)
        got1 = shm.get_contents_as_numpy(h_out, np.float32, [rows, 16], offset=128 + nbytes)
        np.testing.assert_array_equal(got0, a + b)
        np.testing.assert_array_equal(got1, a - b)

        # Mixed: an input from shared memory, the other in the request; outputs in the response.
        ins2 = [mod.InferInput("INPUT0", [rows, 16], "FP32"), mod.InferInput("INPUT1", [rows, 16], "FP32")]
        ins2[0].set_shared_memory(f"in_{proto}", nbytes)
        ins2[1].set_data_from_numpy(b * 2)
        np.testing.assert_array_equal(c.infer("simple", ins2).as_numpy("OUTPUT0"), a + 2 * b)

        # Bounds: past the region's end, a size that does not match the shape, an output too small.
        bad = [mod.InferInput("INPUT0", [rows, 16], "FP32"), mod.InferInput("INPUT1", [rows, 16], "FP32")]
        bad[0].set_shared_memory(f"in_{proto}", nbytes, offset=257)
        bad[1].set_shared_memory(f"in_{proto}", nbytes)
        code, msg = err(lambda: c.infer("simple", bad))
        assert code in ("400", "StatusCode.INVALID_ARGUMENT"), (code, msg)
        assert "runs past the end" in msg and "INPUT0" in msg
        bad[0].set_shared_memory(f"in_{proto}", nbytes - 4)
        code, msg = err(lambda: c.infer("simple", bad))
        assert code in ("400", "StatusCode.INVALID_ARGUMENT") and "needs 192 bytes" in msg, msg
        small = [mod.InferRequestedOutput("OUTPUT0")]
        small[0].set_shared_memory(f"out_{proto}", nbytes - 1)
        code, msg = err(lambda: c.infer("simple", ins, outputs=small))
        assert code in ("400", "StatusCode.INVALID_ARGUMENT") and "OUTPUT0" in msg and "needs 192" in msg, msg
        unknown = [mod.InferInput("INPUT0", [rows, 16], "FP32"), mod.InferInput("INPUT1", [rows, 16], "FP32")]
        unknown[0].set_shared_memory("never_registered", nbytes)
        unknown[1].set_shared_memory(f"in_{proto}", nbytes)
        code, msg = err(lambda: c.infer("simple", unknown))
        assert code in ("400", "StatusCode.INVALID_ARGUMENT") and "never_registered" in msg

        # Registration errors: the same name twice, a key that does not exist, a size past the object.
        code, msg = err(lambda: c.register_system_shared_memory(f"in_{proto}", key_in, 16))
        assert "already registered" in msg
        code, msg = err(lambda: c.register_system_shared_memory("x", "/gpuopt_no_such_key", 16))
        assert code in ("404", "StatusCode.NOT_FOUND") and "does not exist" in msg
        code, msg = err(lambda: c.register_system_shared_memory("y", key_in, 256 + nbytes, offset=1))
        assert code in ("400", "StatusCode.INVALID_ARGUMENT") and "does not fit" in msg
    finally:
        c.unregister_system_shared_memory(f"in_{proto}")
        c.unregister_system_shared_memory(f"out_{proto}")
        assert f"in_{proto}" not in status_names(c, proto)
        shm.destroy_shared_memory_region(h_in)
        shm.destroy_shared_memory_region(h_out)
    # Status of a region that is not registered names it.
    code, msg = err(lambda: c.get_system_shared_memory_status(region_name=f"in_{proto}"))
    assert code in ("404", "StatusCode.NOT_FOUND") and f"in_{proto}" in msg


def test_cuda_shared_memory_without_a_gpu(server):
    """Registering a CUDA region where there is none is a clear error, not a crash."""
    c = grpcclient.InferenceServerClient(server.grpc_url)
    code, msg = err(lambda: c.register_cuda_shared_memory("g", b"\0" * 64, 0, 1024))
    assert code in ("StatusCode.UNAVAILABLE", "StatusCode.INVALID_ARGUMENT"), (code, msg)
    assert "CUDA" in msg or "cuda" in msg
    assert c.get_cuda_shared_memory_status(as_json=True).get("regions", {}) == {}


def test_sigterm_under_mixed_http_and_grpc_load(tmp_path):
    """Every request the server accepted is answered with the right result; the rest are refused
    cleanly (503 / UNAVAILABLE 'shutting down', or no connection once it is gone)."""
    H.make_repository(str(tmp_path), delay_us=20000)
    s = H.Server(["--model-repository", str(tmp_path), "--exit-timeout-secs", "10"])
    stop = threading.Event()
    counts = {"ok": 0, "refused": 0, "gone": 0, "wrong": 0, "lost": []}
    lock = threading.Lock()

    def worker(wid, proto):
        rng = np.random.default_rng(wid)
        mod = grpcclient if proto == "grpc" else httpclient
        cl = (grpcclient.InferenceServerClient(s.grpc_url) if proto == "grpc"
              else httpclient.InferenceServerClient(s.url, network_timeout=20, connection_timeout=5))
        while not stop.is_set():
            a = rng.standard_normal((1 + wid % 2, 16)).astype(np.float32)
            ins = [mod.InferInput("INPUT0", list(a.shape), "FP32"), mod.InferInput("INPUT1", list(a.shape), "FP32")]
            ins[0].set_data_from_numpy(a)
            ins[1].set_data_from_numpy(a)
            try:
                r = cl.infer("simple", ins, client_timeout=20) if proto == "grpc" else cl.infer("simple", ins)
                key = "ok" if np.array_equal(r.as_numpy("OUTPUT0"), a + a) else "wrong"
            except InferenceServerException as e:
                st, msg = str(e.status()), e.message() or ""
                # CANCELLED: a call gRPC had received but not yet handed to the server's handler
                # when the endpoint closed (every call the handler took was answered: the server
                # drained to zero pending requests, "stopped cleanly" below).
                if "shutting down" in msg or st in ("503", "StatusCode.CANCELLED"):
                    key = "refused"
                elif st == "None" or "failed to connect" in msg.lower() or "connection refused" in msg.lower():
                    key = "gone"  # never reached a server (it has exited)
                else:
                    with lock:
                        counts["lost"].append(f"{proto}: {st} {msg}")
                    return
            except Exception:  # noqa: BLE001 (HTTP: connection refused once the server exited)
                key = "gone"
            with lock:
                counts[key] += 1
            if key == "gone":
                return

    ts = [threading.Thread(target=worker, args=(i, "grpc" if i % 2 else "http")) for i in range(8)]
    for t in ts:
        t.start()
    deadline = time.time() + 30
    while counts["ok"] < 40 and time.time() < deadline:
        time.sleep(0.05)
    assert counts["ok"] >= 40, counts
    code, secs, out = s.stop(signal.SIGTERM, timeout=30)
    stop.set()
    for t in ts:
        t.join(30)
        assert not t.is_alive(), "a client hung"
    assert code == 0, out
    assert "Server stopped cleanly" in out
    assert counts["wrong"] == 0
    assert not counts["lost"], counts["lost"]
    print(counts)


@pytest.mark.parametrize("proto,shm_kind", [("grpc", "none"), ("grpc", "system"), ("http", "system")])
def test_perf_over_grpc_and_shared_memory(server, proto, shm_kind):
    """`gpuopt perf -i grpc --shared-memory system`: no errors, every request it counted is in the
    server's statistics, and its regions are unregistered and unlinked when it exits."""
    import json
    import subprocess
    hc = httpclient.InferenceServerClient(server.url)

    def successes():
        return int(hc.get_inference_statistics("simple")["model_stats"][0]["inference_stats"]["success"]["count"])

    before = successes()
    url = server.grpc_url if proto == "grpc" else server.url
    p = subprocess.Popen([H.gpuopt_bin(), "perf", "-m", "simple", "-u", url, "-i", proto, "--shared-memory", shm_kind,
                          "-b", "2", "--concurrency-range", "2", "-p", "300", "-r", "3", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = p.communicate(timeout=120)
    r = subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["protocol"] == proto and out["shared_memory"] == shm_kind
    res = out["results"][0]
    assert res["errors"] == 0 and res["requests"] > 0
    assert successes() - before >= res["requests"]  # the windows' requests, plus the ones around them
    assert res["server_compute_infer_us"] > 0
    assert hc.get_system_shared_memory_status() == []
    # Its own objects (gpuopt_perf_<pid>_...): another test's perf may be running meanwhile.
    assert not [f for f in os.listdir("/dev/shm") if f.startswith(f"gpuopt_perf_{p.pid}_")]
