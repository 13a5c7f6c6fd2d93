"""Precision through `gpuopt serve`: int8 and fp8 by `--precision` and by the config's
`gpuopt.precision`, Triton's tensorrt `precision_mode` (GPU instances only), and the refusals,
on the CPU. A real server on 127.0.0.1 answering tritonclient; oracles: ONNX Runtime (the Q/DQ
model), NumPy with ml_dtypes (the Fp8Gemm model), the f32 model's NumPy result."""
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as H  # noqa: E402

grpcclient = pytest.importorskip("tritonclient.grpc")
httpclient = pytest.importorskip("tritonclient.http")
ort = pytest.importorskip("onnxruntime")
ml_dtypes = pytest.importorskip("ml_dtypes")
E4M3 = ml_dtypes.float8_e4m3fn


def qdq_model(path, k=32, n=16, seed=0):
    """y = DQ(Q(x)) @ w: the activation quantized to int8 at scale 0.05."""
    w = np.random.default_rng(seed).standard_normal((k, n)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]), helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
         helper.make_node("MatMul", ["d", "w"], ["y"])],
        "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", n])],
        [numpy_helper.from_array(np.array(0.05, np.float32), "s"), numpy_helper.from_array(np.array(0, np.int8), "z"),
         numpy_helper.from_array(w, "w")])
    H._save(helper.make_model(g), path)


def fp8_model(path, k=32, n=16, seed=1):
    """y = Fp8Gemm(a, w) (ai.gpuopt): e4m3 weights and activations at fixed scales. Returns the
    NumPy oracle."""
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.3, (n, k)).astype(np.float32)
    a_scale, b_scale = np.float32(4.0 / 448), np.float32(np.abs(w).max() / 448)
    w_bits = np.clip(w / b_scale, -448, 448).astype(E4M3).view(np.uint8)
    node = helper.make_node("Fp8Gemm", ["a", "w"], ["y"], name="fp8", domain="ai.gpuopt", a_scale=float(a_scale),
                            b_scale=float(b_scale))
    g = helper.make_graph([node], "fp8", [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", n])],
                          [numpy_helper.from_array(w_bits, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.gpuopt", 1)], ir_version=8)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(m, path)

    def oracle(a):
        qa = np.clip(a / a_scale, -448, 448).astype(np.float32).astype(E4M3).astype(np.float64)
        return (qa @ w_bits.view(E4M3).astype(np.float64).T) * (np.float64(a_scale) * np.float64(b_scale))
    return oracle


def config(name, inp, out, k, n, extra=""):
    return f"""name: "{name}"
max_batch_size: 8
input [ {{ name: "{inp}" data_type: TYPE_FP32 dims: [ {k} ] }} ]
output [ {{ name: "{out}" data_type: TYPE_FP32 dims: [ {n} ] }} ]
dynamic_batching {{ }}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
{extra}"""


def param(p):
    return f'parameters {{ key: "gpuopt.precision" value: {{ string_value: "{p}" }} }}'


TENSORRT_FP16 = """optimization { execution_accelerators { gpu_execution_accelerator : [ {
  name : "tensorrt"
  parameters { key: "precision_mode" value: "FP16" }
  parameters { key: "max_workspace_size_bytes" value: "1073741824" } } ] } }"""


def write(root, name, body):
    with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
        f.write(body)


def infer(s, model, inp, out, x):
    i = grpcclient.InferInput(inp, list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    return grpcclient.InferenceServerClient(s.grpc_url).infer(model, [i]).as_numpy(out)


def test_int8_and_fp8_models_serve_at_their_precision(tmp_path):
    root = str(tmp_path)
    qdq_model(os.path.join(root, "q8", "1", "model.onnx"))
    write(root, "q8", config("q8", "x", "y", 32, 16, param("int8")))
    oracle = fp8_model(os.path.join(root, "f8", "1", "model.onnx"))
    write(root, "f8", config("f8", "a", "y", 32, 16, param("fp8")))
    # Triton's tensorrt FP16 applies to GPU instances: this CPU instance stays at the server's fp32.
    mlp_w = H.mlp_model(os.path.join(root, "mlp", "1", "model.onnx"))
    write(root, "mlp", config("mlp", "X", "Y", 32, 8, TENSORRT_FP16))
    rng = np.random.default_rng(7)
    with H.Server(["--model-repository", root]) as s:
        log = "".join(s.log)
        assert "model 'q8' version 1 READY (max_batch_size 8, 1 instance(s) at int8" in log, log
        assert "model 'f8' version 1 READY (max_batch_size 8, 1 instance(s) at fp8" in log, log
        assert "model 'mlp' version 1 READY (max_batch_size 8, 1 instance(s) at fp32" in log, log
        assert "tensorrt accelerator parameter 'max_workspace_size_bytes' has no effect" in log, log
        x = rng.standard_normal((3, 32)).astype(np.float32) * 2
        want = ort.InferenceSession(os.path.join(root, "q8", "1", "model.onnx"),
                                    providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        np.testing.assert_allclose(infer(s, "q8", "x", "y", x), want, rtol=1e-5, atol=1e-5)
        a = rng.normal(0, 1.5, (4, 32)).astype(np.float32)
        y = infer(s, "f8", "a", "y", a)
        want8 = oracle(a)
        np.testing.assert_allclose(y, want8, rtol=1e-6, atol=1e-6 * np.abs(want8).max())
        xm = rng.standard_normal((2, 32)).astype(np.float32)
        np.testing.assert_allclose(infer(s, "mlp", "X", "Y", xm), H.mlp_reference(xm, mlp_w), rtol=1e-5, atol=1e-6)
        code, _, out = s.stop()
        assert code == 0, out


def test_server_wide_int8_and_the_refusals(tmp_path):
    root = str(tmp_path / "a")
    qdq_model(os.path.join(root, "q8", "1", "model.onnx"))
    with H.Server(["--model-repository", root, "--precision", "int8"]) as s:
        assert "1 instance(s) at int8" in "".join(s.log)
        x = np.linspace(-3, 3, 64, dtype=np.float32).reshape(2, 32)
        want = ort.InferenceSession(os.path.join(root, "q8", "1", "model.onnx"),
                                    providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        np.testing.assert_allclose(infer(s, "q8", "x", "y", x), want, rtol=1e-5, atol=1e-5)
    # A float model asked for int8 or fp8 does not load; the message says what it lacks.
    for p, why in (("int8", "no QuantizeLinear/DequantizeLinear nodes; quantize it first"),
                   ("fp8", "no Fp8Gemm nodes")):
        bad = str(tmp_path / p)
        H.mlp_model(os.path.join(bad, "mlp", "1", "model.onnx"))
        write(bad, "mlp", config("mlp", "X", "Y", 32, 8, param(p)))
        r = subprocess.run([H.gpuopt_bin(), "serve", "--model-repository", bad, "--http-port", "0", "--metrics-port",
                            "0", "--grpc-port", "0"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "model 'mlp'" in r.stderr and why in r.stderr, r.stderr
    # Triton's precision_mode outside FP32/FP16/INT8: the config is refused, naming the line.
    write(bad, "mlp", config("mlp", "X", "Y", 32, 8, TENSORRT_FP16.replace("FP16", "FP64")))
    r = subprocess.run([H.gpuopt_bin(), "serve", "--model-repository", bad, "--http-port", "0", "--metrics-port", "0",
                        "--grpc-port", "0"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "precision_mode must be FP32, FP16 or INT8, found 'FP64'" in r.stderr, r.stderr
