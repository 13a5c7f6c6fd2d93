"""FusedConv (com.microsoft) against ONNX Runtime's own implementation of that contrib op, and the
Conv -> Add -> Relu fusion pass seen from the CLI (fused by default, not with GPUOPT_DISABLE_FUSION=1,
same answer either way).

The oracle is onnxruntime's CPU FusedConv kernel (MLAS), not gpuopt's: each case is a model of
one FusedConv node in domain com.microsoft, run by `gpuopt run` and by onnxruntime.
"""
import json
import os
import subprocess

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from gpuopt_cli import gpuopt_bin, run_gpuopt


def save(model, path):
    import onnx
    onnx.save(model, str(path))
    return path


def fused_model(rng, with_b, with_z, activation, params=None, stride=1, group=1):
    cin, cout = 6, 8
    w = rng.uniform(-0.5, 0.5, (cout, cin // group, 3, 3)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    inputs = ["x", "w"]
    if with_b:
        inits.append(numpy_helper.from_array(rng.uniform(-0.5, 0.5, cout).astype(np.float32), "b"))
        inputs.append("b")
    elif with_z:
        inputs.append("")
    out_hw = (11 - 1) // stride + 1
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, cin, 11, 11])]
    if with_z:
        inputs.append("z")
        graph_inputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, cout, out_hw, out_hw]))
    attrs = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride, stride], group=group)
    if activation is not None:
        attrs["activation"] = activation
    if params is not None:
        attrs["activation_params"] = params
    node = helper.make_node("FusedConv", inputs, ["y"], name="fc", domain="com.microsoft", **attrs)
    g = helper.make_graph([node], "fc", graph_inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)], ir_version=8)
    feeds = {"x": rng.uniform(-2, 2, (2, cin, 11, 11)).astype(np.float32)}
    if with_z:
        feeds["z"] = rng.uniform(-2, 2, (2, cout, out_hw, out_hw)).astype(np.float32)
    return model, feeds


CASES = {
    "relu_bias_z": dict(with_b=True, with_z=True, activation="Relu"),
    "relu_bias": dict(with_b=True, with_z=False, activation="Relu"),
    "relu_z_no_bias": dict(with_b=False, with_z=True, activation="Relu"),
    "identity_z": dict(with_b=True, with_z=True, activation=None),
    "leakyrelu": dict(with_b=True, with_z=True, activation="LeakyRelu", params=[0.1]),
    "clip": dict(with_b=True, with_z=False, activation="Clip", params=[-0.5, 1.5]),
    "sigmoid_stride2": dict(with_b=True, with_z=True, activation="Sigmoid", stride=2),
    "tanh_group2": dict(with_b=False, with_z=True, activation="Tanh", group=2),
    "hardsigmoid": dict(with_b=True, with_z=True, activation="HardSigmoid", params=[0.2, 0.5]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fusedconv_matches_onnxruntime(name, tmp_path):
    rng = np.random.default_rng(list(CASES).index(name))
    model, feeds = fused_model(rng, **CASES[name])
    path = save(model, tmp_path / "fc.onnx")
    run_gpuopt(path, feeds, tmp_path / "out")
    # Graph optimizations off: ORT's NCHWc rewrite of a FusedConv with Z fails shape checks for 8
    # output channels on some CPUs; the plain FusedConv kernel is the reference wanted here.
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = np.load(tmp_path / "out" / "y.npy")
    assert got.shape == want.shape
    assert np.abs(want).max() > 0.1
    err = float(np.max(np.abs(got.astype(np.float64) - want)))
    assert err <= 1e-4, f"max abs err {err:.3g}"


def test_default_domain_fusedconv_is_unknown(tmp_path):
    rng = np.random.default_rng(3)
    model, _ = fused_model(rng, True, False, "Relu")
    model.graph.node[0].domain = ""
    path = save(model, tmp_path / "fc.onnx")
    r = subprocess.run([gpuopt_bin(), "inspect", str(path)], capture_output=True, text=True)
    assert r.returncode != 0
    assert "unknown op 'FusedConv'" in r.stderr + r.stdout


def residual_model(rng):
    """x -> Conv+bias -> Relu -> a -> Conv -> Add(., a) -> Relu -> y: one ResNet basic block."""
    c = 8
    inits = [numpy_helper.from_array(rng.uniform(-0.3, 0.3, (c, c, 3, 3)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.uniform(-0.3, 0.3, c).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.uniform(-0.3, 0.3, (c, c, 3, 3)).astype(np.float32), "w2")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["a"], name="relu1"),
             helper.make_node("Conv", ["a", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "a"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["y"], name="relu2")]
    g = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, 10, 10])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), {
        "x": rng.uniform(-2, 2, (3, c, 10, 10)).astype(np.float32)}


def test_fusion_pass_on_and_off(tmp_path):
    rng = np.random.default_rng(5)
    model, feeds = residual_model(rng)
    path = save(model, tmp_path / "block.onnx")
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    results = {}
    for flag in ("0", "1"):
        env = dict(os.environ, GPUOPT_DISABLE_FUSION=flag)
        r = subprocess.run([gpuopt_bin(), "inspect", str(path), "--optimized", "--json"], capture_output=True,
                           text=True, env=env)
        assert r.returncode == 0, r.stderr
        ops = {o["op"]: o["count"] for o in json.loads(r.stdout)["ops"]}
        d = tmp_path / f"fusion_off_{flag}"
        d.mkdir()
        run_gpuopt(path, feeds, d / "out", env=env)
        results[flag] = (ops, np.load(d / "out" / "y.npy"))
    fused_ops, fused_y = results["0"]
    plain_ops, plain_y = results["1"]
    assert fused_ops == {"FusedConv": 2}, fused_ops
    assert plain_ops == {"Conv": 2, "Relu": 2, "Add": 1}, plain_ops
    assert np.abs(want).max() > 0.1
    assert float(np.max(np.abs(fused_y - want))) <= 1e-5
    assert float(np.max(np.abs(plain_y - want))) <= 1e-5
