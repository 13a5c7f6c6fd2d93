"""`gpuopt serve` paths only a GPU host takes, checked against numpy: a large binary request to a
GPU instance over HTTP (its body read into a pinned block and copied to the device from there)
and over gRPC, and Triton's CUDA shared-memory extension through
tritonclient.utils.cuda_shared_memory (inputs and outputs in the client's device memory), over
HTTP and gRPC, and large inputs in system shared memory (read in place, the region page-locked). Skips without a CUDA device (scripts/gpu/cuda_shm.sh runs it on the H200)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as H  # noqa: E402

grpcclient = pytest.importorskip("tritonclient.grpc")
httpclient = pytest.importorskip("tritonclient.http")

WIDTH = 150528  # 3*224*224: an [8, WIDTH] f32 input is a ResNet-50 batch-8 body (4.8 MB)


def have_cuda():
    r = subprocess.run([H.gpuopt_bin(), "info", "--json"], capture_output=True, text=True, timeout=60)
    try:
        j = json.loads(r.stdout)
    except ValueError:
        return False
    return bool(j.get("gpus")) and j["cuda"]["built_with_cuda"] and not j["cuda"].get("error")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not have_cuda():
        pytest.skip("skipped: no CUDA device")
    root = tmp_path_factory.mktemp("repo")
    H.add_sub_model(os.path.join(root, "big", "1", "model.onnx"), width=WIDTH)
    with open(os.path.join(root, "big", "config.pbtxt"), "w") as f:
        f.write("max_batch_size: 8\ndynamic_batching { }\ninstance_group { count: 1 kind: KIND_GPU }\n")
    H.add_sub_model(os.path.join(root, "small", "1", "model.onnx"))
    with open(os.path.join(root, "small", "config.pbtxt"), "w") as f:
        f.write("max_batch_size: 8\ninstance_group { count: 1 kind: KIND_GPU }\n")
    s = H.Server(["--model-repository", str(root)], timeout=180)
    yield s
    code, _, out = s.stop()
    assert code == 0, out


def inputs(mod, a, b):
    ins = [mod.InferInput("INPUT0", list(a.shape), "FP32"), mod.InferInput("INPUT1", list(b.shape), "FP32")]
    ins[0].set_data_from_numpy(a, binary_data=True) if mod is httpclient else ins[0].set_data_from_numpy(a)
    ins[1].set_data_from_numpy(b, binary_data=True) if mod is httpclient else ins[1].set_data_from_numpy(b)
    return ins


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_large_binary_request_on_a_gpu_instance(server, proto):
    mod = httpclient if proto == "http" else grpcclient
    c = mod.InferenceServerClient(server.url if proto == "http" else server.grpc_url)
    rng = np.random.default_rng(7)
    for rows in (8, 3, 8):  # the same size class again: a pooled pinned block reused
        a = rng.standard_normal((rows, WIDTH)).astype(np.float32)
        b = rng.standard_normal((rows, WIDTH)).astype(np.float32)
        outs = [mod.InferRequestedOutput("OUTPUT0", binary_data=True) if mod is httpclient
                else mod.InferRequestedOutput("OUTPUT0"),
                mod.InferRequestedOutput("OUTPUT1", binary_data=True) if mod is httpclient
                else mod.InferRequestedOutput("OUTPUT1")]
        r = c.infer("big", inputs(mod, a, b), outputs=outs)
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_cuda_shared_memory_with_tritonclient(server, proto):
    try:
        import tritonclient.utils.cuda_shared_memory as cudashm
    except Exception as e:  # noqa: BLE001 (it needs cuda-python)
        pytest.skip(f"tritonclient.utils.cuda_shared_memory does not import here: {e}")
    mod = httpclient if proto == "http" else grpcclient
    c = mod.InferenceServerClient(server.url if proto == "http" else server.grpc_url)
    rows = 3
    n = rows * 16 * 4
    rng = np.random.default_rng(11)
    a = rng.standard_normal((rows, 16)).astype(np.float32)
    b = rng.standard_normal((rows, 16)).astype(np.float32)
    hi = cudashm.create_shared_memory_region(f"in_{proto}", 2 * n, 0)
    ho = cudashm.create_shared_memory_region(f"out_{proto}", 2 * n + 64, 0)
    try:
        cudashm.set_shared_memory_region(hi, [a, b])
        c.register_cuda_shared_memory(f"in_{proto}", cudashm.get_raw_handle(hi), 0, 2 * n)
        c.register_cuda_shared_memory(f"out_{proto}", cudashm.get_raw_handle(ho), 0, 2 * n + 64)
        ins = [mod.InferInput("INPUT0", [rows, 16], "FP32"), mod.InferInput("INPUT1", [rows, 16], "FP32")]
        ins[0].set_shared_memory(f"in_{proto}", n)
        ins[1].set_shared_memory(f"in_{proto}", n, offset=n)
        outs = [mod.InferRequestedOutput("OUTPUT0"), mod.InferRequestedOutput("OUTPUT1")]
        outs[0].set_shared_memory(f"out_{proto}", n)
        outs[1].set_shared_memory(f"out_{proto}", n, offset=n + 64)
        c.infer("small", ins, outputs=outs)
        o0 = cudashm.get_contents_as_numpy(ho, np.float32, [rows, 16])
        np.testing.assert_array_equal(o0, a + b)
        full = cudashm.get_contents_as_numpy(ho, np.uint8, [2 * n + 64])
        o1 = full[n + 64:2 * n + 64].view(np.float32).reshape(rows, 16)
        np.testing.assert_array_equal(o1, a - b)
        status = c.get_cuda_shared_memory_status() if proto == "http" else \
            c.get_cuda_shared_memory_status(as_json=True).get("regions", {})
        assert f"in_{proto}" in json.dumps(status)
    finally:
        c.unregister_cuda_shared_memory(f"in_{proto}")
        c.unregister_cuda_shared_memory(f"out_{proto}")
        cudashm.destroy_shared_memory_region(hi)
        cudashm.destroy_shared_memory_region(ho)


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_system_shared_memory_on_a_gpu_instance(server, proto):
    """4.8 MB inputs in a system region: read in place (64-byte aligned offsets) from the region,
    which the server page-locks when it is registered, so the instance's upload is a DMA from the
    client's memory; one input at an unaligned offset takes the copy. The region's contents
    changed between requests are what the next request computes with; registered twice (the
    second time after an unregister, which unpins it)."""
    import tritonclient.utils.shared_memory as shm
    mod = httpclient if proto == "http" else grpcclient
    c = mod.InferenceServerClient(server.url if proto == "http" else server.grpc_url)
    rows = 8
    n = rows * WIDTH * 4  # a multiple of 64
    rng = np.random.default_rng(13)
    for attempt in range(2):
        name, key = f"sys_{proto}_{attempt}", f"/gpuopt_gpu_paths_{proto}_{os.getpid()}_{attempt}"
        h = shm.create_shared_memory_region(name, key, 2 * n + 4 + n)
        ho = shm.create_shared_memory_region(name + "_out", key + "_out", 2 * n)
        try:
            c.register_system_shared_memory(name, key, 2 * n + 4 + n)
            c.register_system_shared_memory(name + "_out", key + "_out", 2 * n)
            for step in range(2):
                a = rng.standard_normal((rows, WIDTH)).astype(np.float32)
                b = rng.standard_normal((rows, WIDTH)).astype(np.float32)
                # INPUT0 at 0 (aligned: in place); INPUT1 at 2n + 4 (unaligned: copied) on the second step.
                off1 = n if step == 0 else 2 * n + 4
                shm.set_shared_memory_region(h, [a], offset=0)
                shm.set_shared_memory_region(h, [b], offset=off1)
                ins = [mod.InferInput("INPUT0", [rows, WIDTH], "FP32"), mod.InferInput("INPUT1", [rows, WIDTH], "FP32")]
                ins[0].set_shared_memory(name, n, offset=0)
                ins[1].set_shared_memory(name, n, offset=off1)
                outs = [mod.InferRequestedOutput("OUTPUT0"), mod.InferRequestedOutput("OUTPUT1")]
                outs[0].set_shared_memory(name + "_out", n)
                outs[1].set_shared_memory(name + "_out", n, offset=n)
                c.infer("big", ins, outputs=outs)
                np.testing.assert_array_equal(shm.get_contents_as_numpy(ho, np.float32, [rows, WIDTH]), a + b)
                o1 = shm.get_contents_as_numpy(ho, np.float32, [2 * rows, WIDTH])[rows:]
                np.testing.assert_array_equal(o1, a - b)
        finally:
            c.unregister_system_shared_memory(name)
            c.unregister_system_shared_memory(name + "_out")
            shm.destroy_shared_memory_region(h)
            shm.destroy_shared_memory_region(ho)
