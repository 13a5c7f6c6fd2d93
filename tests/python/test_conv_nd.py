"""3-D convolutions and 1-D/3-D transposed convolutions against ONNX Runtime on both CPU backends
(the reference, the oracle of the CUDA kernels' backend_ops cases, and the fast one): groups,
depthwise, strides, dilations, pads, output_padding, bias, and a 3-D Conv + Relu that the conv
fusion makes one FusedConv. On CUDA (skipped without a device): the same models run with every
node on the GPU and no CPU-fallback warning, and a model with a node the GPU does not take warns
once, naming the node and the reason."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from gpuopt_cli import cuda_device, gpuopt_bin  # noqa: E402

WARNING = "run on the CPU inside the GPU graph"  # "node runs" / "nodes run"


def conv_model(path, op, x_shape, w_shape, bias, relu=False, **attrs):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal(w_shape) * 0.3).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    ins = ["x", "w"]
    if bias:
        m = w_shape[0] if op == "Conv" else w_shape[1] * attrs.get("group", 1)
        inits.append(numpy_helper.from_array(rng.standard_normal(m).astype(np.float32), "b"))
        ins.append("b")
    nodes = [helper.make_node(op, ins, ["c" if relu else "y"], name="/net/" + op.lower(), **attrs)]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"], name="/net/relu"))
    g = helper.make_graph(nodes, "conv_nd", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(m, str(path))
    return m


def run(path, x, tmp, device, extra=()):
    out = tmp / f"out_{device}"
    np.save(tmp / "x.npy", x)
    r = subprocess.run([gpuopt_bin(), "run", str(path), "--device", device, "--iterations", "1", "--warmup", "0",
                        "--input", f"x={tmp / 'x.npy'}", "--output-dir", str(out), "--json", *extra],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return np.load(out / "y.npy"), json.loads(r.stdout), r.stderr


CASES = {
    "conv3d_k3_p1_bias": ("Conv", (2, 3, 8, 9, 10), (8, 3, 3, 3, 3), True,
                          dict(kernel_shape=[3, 3, 3], pads=[1] * 6)),
    "conv3d_s2_dilation2": ("Conv", (1, 4, 11, 10, 9), (6, 4, 3, 3, 3), False,
                            dict(kernel_shape=[3, 3, 3], pads=[2] * 6, strides=[2, 2, 2], dilations=[2, 2, 2])),
    "conv3d_k133_group2": ("Conv", (1, 8, 6, 7, 8), (12, 4, 1, 3, 3), True,
                           dict(kernel_shape=[1, 3, 3], pads=[0, 1, 1, 0, 1, 1], group=2)),
    "conv3d_depthwise_s122": ("Conv", (2, 8, 5, 9, 9), (8, 1, 3, 3, 3), True,
                              dict(kernel_shape=[3, 3, 3], pads=[1] * 6, strides=[1, 2, 2], group=8)),
    "conv3d_patch_embed": ("Conv", (1, 3, 8, 32, 32), (16, 3, 2, 8, 8), True,
                           dict(kernel_shape=[2, 8, 8], strides=[2, 8, 8])),
    "convt1d_k3_s2_outpad1": ("ConvTranspose", (2, 8, 50), (8, 6, 3), True,
                              dict(kernel_shape=[3], strides=[2], pads=[1, 1], output_padding=[1])),
    "convt1d_k4_s2_group2": ("ConvTranspose", (1, 6, 33), (6, 2, 4), False,
                             dict(kernel_shape=[4], strides=[2], pads=[1, 1], group=2)),
    "convt1d_k7_dilation2_len1": ("ConvTranspose", (1, 4, 1), (4, 3, 7), True, dict(kernel_shape=[7], dilations=[2])),
    "convt3d_k2_s2": ("ConvTranspose", (1, 4, 3, 4, 5), (4, 2, 2, 2, 2), False,
                      dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2])),
    "convt3d_k3_s2_p1_outpad1_group2": ("ConvTranspose", (2, 4, 4, 5, 3), (4, 3, 3, 3, 3), True,
                                        dict(kernel_shape=[3, 3, 3], strides=[2, 2, 2], pads=[1] * 6,
                                             output_padding=[1, 1, 1], group=2)),
}


def make(tmp_path, name, relu=False):
    op, xs, ws, bias, attrs = CASES[name]
    m = conv_model(tmp_path / "m.onnx", op, xs, ws, bias, relu=relu, **attrs)
    x = np.random.default_rng(1).standard_normal(xs).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    return x, want


@pytest.mark.parametrize("name", sorted(CASES))
def test_cpu_backends_match_onnxruntime(tmp_path, name):
    x, want = make(tmp_path, name)
    for device in ("cpu-ref", "cpu"):
        got, _, _ = run(tmp_path / "m.onnx", x, tmp_path, device)
        assert got.shape == want.shape, device
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=device)


def test_conv3d_relu_fuses_and_matches(tmp_path):
    x, want = make(tmp_path, "conv3d_k3_p1_bias", relu=True)
    assert (want == 0).any() and (want > 0).any()  # the Relu does something
    got, j, _ = run(tmp_path / "m.onnx", x, tmp_path, "cpu-ref", extra=["--profile"])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert [o["op"] for o in j["profile"]["ops"]] == ["FusedConv"], j["profile"]["ops"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_runs_every_node_without_a_warning(tmp_path, name):
    if not cuda_device():
        pytest.skip("skipped: no CUDA device")
    x, want = make(tmp_path, name, relu=CASES[name][0] == "Conv")
    got, j, err = run(tmp_path / "m.onnx", x, tmp_path, "cuda", extra=["--profile"])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert all(o["device"].startswith("cuda") for o in j["profile"]["ops"]), j["profile"]["ops"]
    assert WARNING not in err, err


def test_cuda_warns_about_a_cpu_node(tmp_path):
    if not cuda_device():
        pytest.skip("skipped: no CUDA device")
    # Asymmetric pads: cuDNN has none, so this ConvTranspose runs on the CPU.
    m = conv_model(tmp_path / "m.onnx", "ConvTranspose", (1, 4, 20), (4, 4, 3), False, kernel_shape=[3], pads=[2, 0])
    x = np.random.default_rng(2).standard_normal((1, 4, 20)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got, _, err = run(tmp_path / "m.onnx", x, tmp_path, "cuda")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    lines = [ln for ln in err.splitlines() if WARNING in ln]
    assert len(lines) == 1, err
    assert "1 node runs on the CPU inside the GPU graph: [ConvTranspose] '/net/convtranspose' (the CUDA kernel does " \
           "not take this form of ConvTranspose (" in lines[0], lines[0]
    assert "pads=[2,0]" in lines[0], lines[0]
