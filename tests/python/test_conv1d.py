"""1-D convolutions run as 2-D ones of unit height (passes/conv1d_as_2d.cpp): the rewritten graph
against the unrewritten one (GPUOPT_DISABLE_FUSION=conv1d, both on the CPU reference) and against
ONNX Runtime, over kernel 3 and 7, stride 1 and 2, dilation, groups (depthwise too), symmetric and
asymmetric pads and lengths 1..3000; the reshapes between two convs cancel across an elementwise
op and stay across one that is not (a mean over the length); on CUDA, a Whisper-style stem runs there."""
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
from gpuopt_cli import cuda_device, gpuopt_bin, op_counts  # noqa: E402


def conv(name, x, y, c_in, c_out, k, rng, stride=1, dil=1, group=1, pads=None, bias=True):
    w = numpy_helper.from_array((rng.standard_normal((c_out, c_in // group, k)) / np.sqrt(c_in * k / group))
                                .astype(np.float32), name + "_w")
    inits = [w]
    ins = [x, name + "_w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(c_out).astype(np.float32) * 0.1, name + "_b"))
        ins.append(name + "_b")
    p = pads if pads is not None else [(k - 1) * dil // 2] * 2
    node = helper.make_node("Conv", ins, [y], name=name, kernel_shape=[k], strides=[stride], dilations=[dil],
                            group=group, pads=p)
    return node, inits


def model(path, c, length, between, **kw):
    """x [N, c, L] -> Conv1d -> `between` ops -> Conv1d(stride 2) -> Relu -> Transpose -> y."""
    rng = np.random.default_rng(0)
    n1, i1 = conv("c1", "x", "h", c, 32, rng=rng, **kw)
    nodes, inits, cur = [n1], list(i1), "h"
    for j, (op, attrs) in enumerate(between):
        nodes.append(helper.make_node(op, [cur], [f"b{j}"], **attrs))
        cur = f"b{j}"
    n2, i2 = conv("c2", cur, "z", 32, 32, 3, rng, stride=2)
    nodes += [n2, helper.make_node("Relu", ["z"], ["r"]), helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 1])]
    inits += i2
    g = helper.make_graph(nodes, "conv1d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, length])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(m, str(path))
    return m


def run(path, x, tmp, device="cpu", env=None, extra=(), iterations=1):
    out = tmp / f"out_{device}_{len(env or {})}"
    np.save(tmp / "x.npy", x)
    r = subprocess.run([gpuopt_bin(), "run", str(path), "--device", device, "--iterations", str(iterations), "--warmup", "0",
                        "--input", f"x={tmp / 'x.npy'}", "--output-dir", str(out), "--json", *extra],
                       capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})})
    assert r.returncode == 0, r.stdout + r.stderr
    return np.load(out / "y.npy"), json.loads(r.stdout)


CASES = [
    dict(c=16, length=3000, k=3),
    dict(c=16, length=17, k=7, stride=2),
    dict(c=16, length=1, k=3),
    dict(c=16, length=50, k=3, dil=2),
    dict(c=32, length=64, k=7, group=32),            # depthwise
    dict(c=16, length=40, k=5, group=4, pads=[1, 3]),  # asymmetric pads
    dict(c=8, length=33, k=3, stride=2, bias=False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "_".join(f"{k}{v}" for k, v in c.items()))
def test_rewritten_equals_unrewritten_and_onnxruntime(tmp_path, case):
    case = dict(case)
    c, length = case.pop("c"), case.pop("length")
    between = [("Erf", {}), ("Tanh", {})]
    m = model(tmp_path / "m.onnx", c, length, between, **case)
    x = np.random.default_rng(1).standard_normal((2, c, length)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got, _ = run(tmp_path / "m.onnx", x, tmp_path)
    plain, _ = run(tmp_path / "m.onnx", x, tmp_path, env={"GPUOPT_DISABLE_FUSION": "conv1d"})
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, plain, rtol=1e-5, atol=1e-6)


def test_reshapes_cancel_across_elementwise_ops_only(tmp_path):
    m = model(tmp_path / "e.onnx", 16, 64, [("Erf", {}), ("Tanh", {})], k=3)
    ops = op_counts(str(tmp_path / "e.onnx"))
    assert ops.get("Reshape", 0) == 2 and ops.get("Conv", 0) + ops.get("FusedConv", 0) == 2, ops  # in, out
    assert "Conv" in op_counts(str(tmp_path / "e.onnx"), env={"GPUOPT_DISABLE_FUSION": "conv1d"})
    # A mean over the length between the convs is not elementwise (on the 4-D tensor axis 2 is the
    # unit height): the reshapes stay around it, and the answer is still ONNX Runtime's.
    t = [("ReduceMean", {"axes": [2], "keepdims": 1})]
    m = model(tmp_path / "t.onnx", 16, 64, t, k=3)
    before = op_counts(str(tmp_path / "t.onnx"), env={"GPUOPT_DISABLE_FUSION": "conv1d"}).get("Reshape", 0)
    assert op_counts(str(tmp_path / "t.onnx")).get("Reshape", 0) == before + 4
    x = np.random.default_rng(2).standard_normal((2, 16, 64)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(run(tmp_path / "t.onnx", x, tmp_path)[0], want, rtol=1e-4, atol=1e-5)


def test_whisper_style_stem_runs_on_cuda(tmp_path):
    if not cuda_device():
        pytest.skip("skipped: no CUDA device")
    m = model(tmp_path / "w.onnx", 80, 3000, [("Erf", {})], k=3)
    x = np.random.default_rng(3).standard_normal((2, 80, 3000)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got, j = run(tmp_path / "w.onnx", x, tmp_path, device="cuda", iterations=3)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
    assert j.get("execution") == "graph", j.get("execution_note")  # one CUDA graph
    _, p = run(tmp_path / "w.onnx", x, tmp_path, device="cuda", extra=["--profile"])
    assert all(o["device"].startswith("cuda") for o in p["profile"]["ops"]), p["profile"]["ops"]
