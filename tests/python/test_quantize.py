"""gpuopt quantize: calibration methods against NumPy implementations on fixed histograms, the
QDQ writer's output run by ONNX Runtime and by gpuopt's CPU reference (equal), a small CNN and a
small transformer end to end, the calibration cache, --accuracy-target, the report, image
preprocessing, run --precision int8, and bad calibration data.

Oracles: NumPy (histogram, the four amax rules, per-channel weight quantization, image
normalization), ONNX Runtime (the QDQ model's numerics), the f32 model (accuracy bounds)."""
import json
import os
import subprocess
import xml.etree.ElementTree as ET

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from gpuopt_cli import gpuopt_bin, run_gpuopt

BINS = 2048


def gpuopt(*args, check=True):
    r = subprocess.run([gpuopt_bin(), *map(str, args)], capture_output=True, text=True, timeout=600)
    if check:
        assert r.returncode == 0, f"gpuopt {' '.join(map(str, args))} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r


def ort_run(path, feeds):
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def rel_l2(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


# ---------------------------------------------------------------- NumPy oracle of calibrate.cpp


def np_histogram(batches):
    """|x| histogram: the first batch's max sets the range, a larger max doubles it (bins merge in pairs)."""
    counts, rng = np.zeros(BINS), 0.0
    for x in batches:
        a = np.abs(x.astype(np.float64)).ravel()
        m = a.max()
        if rng == 0 and m > 0:
            rng = m
        while rng > 0 and m > rng:
            counts = np.concatenate([counts.reshape(-1, 2).sum(1), np.zeros(BINS // 2)])
            rng *= 2
        idx = np.minimum((a * (BINS / rng)).astype(np.int64), BINS - 1)
        counts += np.bincount(idx, minlength=BINS)
    return counts, rng


def np_percentile(counts, w, p):
    cdf = np.cumsum(counts) / counts.sum()
    return (np.searchsorted(cdf, p / 100.0) + 1) * w


def np_entropy(counts, w):
    """TensorRT's entropy calibration as NVIDIA's pytorch-quantization writes it (bin 0 counted as bin 1)."""
    counts = counts.copy()
    counts[0] = counts[1]
    n, levels, total = len(counts), 128, counts.sum()
    best, best_i = np.inf, n
    for i in range(levels, n + 1):
        p = counts[:i].copy()
        p[-1] += counts[i:].sum()
        lvl = (np.arange(i) * levels) // i
        nz = counts[:i] != 0
        sums = np.bincount(lvl, weights=counts[:i], minlength=levels)
        cnt = np.bincount(lvl, weights=nz.astype(np.float64), minlength=levels)
        q = np.where(nz, sums[lvl] / np.maximum(cnt[lvl], 1), 0.0)
        p, q = p / total, q / q.sum()
        m = p > 0
        kl = np.inf if np.any(q[m] == 0) else float(np.sum(p[m] * np.log(p[m] / q[m])))
        if kl <= best:
            best, best_i = kl, i
    return best_i * w


def np_mse(counts, w):
    centers = (np.arange(len(counts)) + 0.5) * w
    best, best_i = np.inf, len(counts)
    for i in range(128, len(counts) + 1):
        s = i * w / 127.0
        q = np.clip(np.rint(centers / s), -127, 127) * s
        err = float(np.sum((q - centers) ** 2 * counts))
        if err < best:
            best, best_i = err, i
    return best_i * w


def np_amax(method, batches, pct=99.99):
    counts, rng = np_histogram(batches)
    mx = max(np.abs(b).max() for b in batches)
    w = rng / BINS
    a = {"minmax": mx, "percentile": np_percentile(counts, w, pct), "entropy": np_entropy(counts, w), "mse": np_mse(counts, w)}[method]
    return min(a, mx)


# ---------------------------------------------------------------- models


def save(model, path):
    onnx.save(model, str(path))
    return path


def probe_model(n):
    """x [1, n] -> MatMul(w [n, 2]) -> y: x is the one quantized activation."""
    w = np.ones((n, 2), np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "probe",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(w, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def small_cnn(rng):
    """Conv-Relu, a residual block (Conv-Relu-Conv + skip, Add, Relu), MaxPool, GlobalAveragePool, Gemm."""
    def init(name, shape, scale):
        return numpy_helper.from_array(rng.normal(0, scale, shape).astype(np.float32), name)
    inits = [init("w0", (8, 3, 3, 3), 0.3), init("b0", (8,), 0.1), init("w1", (8, 8, 3, 3), 0.15), init("b1", (8,), 0.1),
             init("w2", (8, 8, 3, 3), 0.15), init("b2", (8,), 0.1), init("fc_w", (10, 8), 0.3), init("fc_b", (10,), 0.1)]
    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], name="conv0", **conv),
        helper.make_node("Relu", ["c0"], ["r0"], name="relu0"),
        helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"], name="conv1", **conv),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", **conv),
        helper.make_node("Add", ["c2", "r0"], ["s"], name="add"),
        helper.make_node("Relu", ["s"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["gp"], name="gap"),
        helper.make_node("Flatten", ["gp"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
    ]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def q_scale(path, tensor):
    """The scale of the QuantizeLinear that reads `tensor` in the QDQ file."""
    m = onnx.load(str(path))
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    scales = [float(inits[n.input[1]]) for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == tensor]
    assert len(scales) == 1, (tensor, scales)
    return scales[0]


def small_transformer(rng, d=32, heads=2, seq=8):
    """One encoder block: QKV projections, attention matmuls (QK^T, PV), softmax, output projection,
    residual + LayerNorm, FFN with Gelu, residual + LayerNorm."""
    dh = d // heads
    def init(name, shape, scale=0.2):
        return numpy_helper.from_array(rng.normal(0, scale, shape).astype(np.float32), name)
    inits = [init(n, (d, d)) for n in ("wq", "wk", "wv", "wo")] + [init("w1", (d, 2 * d)), init("w2", (2 * d, d)),
             init("b1", (2 * d,), 0.05), numpy_helper.from_array(np.ones(d, np.float32), "ln_s"),
             numpy_helper.from_array(np.zeros(d, np.float32), "ln_b"),
             numpy_helper.from_array(np.array([1, seq, heads, dh], np.int64), "split_shape"),
             numpy_helper.from_array(np.array([1, seq, d], np.int64), "merge_shape"),
             numpy_helper.from_array(np.array(1.0 / np.sqrt(dh), np.float32), "scale")]
    n = helper.make_node
    nodes = []
    for p in ("q", "k", "v"):
        nodes += [n("MatMul", ["x", f"w{p}"], [f"{p}0"], name=f"proj_{p}"),
                  n("Reshape", [f"{p}0", "split_shape"], [f"{p}1"], name=f"split_{p}"),
                  n("Transpose", [f"{p}1"], [f"{p}h"], name=f"heads_{p}", perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])]
    nodes += [n("MatMul", ["qh", "kh"], ["qk"], name="attn_qk"), n("Mul", ["qk", "scale"], ["qks"], name="attn_scale"),
              n("Softmax", ["qks"], ["pr"], name="softmax", axis=-1), n("MatMul", ["pr", "vh"], ["ctx"], name="attn_pv"),
              n("Transpose", ["ctx"], ["ctx_t"], name="merge_t", perm=[0, 2, 1, 3]),
              n("Reshape", ["ctx_t", "merge_shape"], ["ctx_m"], name="merge"),
              n("MatMul", ["ctx_m", "wo"], ["att"], name="proj_o"), n("Add", ["att", "x"], ["res1"], name="res1"),
              n("LayerNormalization", ["res1", "ln_s", "ln_b"], ["h1"], name="ln1", axis=-1),
              n("MatMul", ["h1", "w1"], ["f1"], name="ffn1"), n("Add", ["f1", "b1"], ["f1b"], name="ffn1_bias"),
              n("Gelu", ["f1b"], ["f1g"], name="gelu"), n("MatMul", ["f1g", "w2"], ["f2"], name="ffn2"),
              n("Add", ["f2", "h1"], ["res2"], name="res2"),
              n("LayerNormalization", ["res2", "ln_s", "ln_b"], ["y"], name="ln2", axis=-1)]
    g = helper.make_graph(nodes, "tx", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, d])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, d])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def write_samples(folder, arrays):
    folder.mkdir(parents=True, exist_ok=True)
    for i, a in enumerate(arrays):
        np.save(folder / f"{i:03d}.npy", a)
    return folder


def count_ops(path):
    m = onnx.load(str(path))
    ops = {}
    for nd in m.graph.node:
        ops[nd.op_type] = ops.get(nd.op_type, 0) + 1
    return m, ops


# ---------------------------------------------------------------- calibration methods


@pytest.mark.parametrize("method", ["minmax", "percentile", "entropy", "mse"])
def test_calibration_methods_match_numpy(tmp_path, method):
    rng = np.random.default_rng(7)
    n = 30000
    # Fixed, heavy-tailed data; the second sample's larger max doubles the histogram range twice.
    a = (rng.laplace(0, 0.4, (1, n))).astype(np.float32)
    b = (rng.laplace(0, 0.4, (1, n)) * 3.5).astype(np.float32)
    model = save(probe_model(n), tmp_path / "probe.onnx")
    data = write_samples(tmp_path / "data", [a, b])
    cache = tmp_path / "probe.calib"
    gpuopt("quantize", model, "--calibration", data, "-o", tmp_path / "q.onnx", "--method", method,
           "--calibration-cache", cache, "--percentile", "99.9")
    lines = cache.read_text().splitlines()
    assert lines[0] == "gpuopt-calibration-cache 1"
    scales = dict(l.rsplit(": ", 1) for l in lines[1:] if not l.startswith("#"))
    want = np_amax(method, [a, b], pct=99.9)
    got = float(scales["x"]) * 127
    assert got == pytest.approx(want, rel=2e-6), (method, got, want)
    if method != "minmax":  # these clip: less than the max
        assert got < max(np.abs(a).max(), np.abs(b).max())
    # The QDQ model carries the same scale.
    m = onnx.load(str(tmp_path / "q.onnx"))
    init = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    assert float(init["x_scale"]) == pytest.approx(float(scales["x"]), rel=1e-7)


# ---------------------------------------------------------------- QDQ writer, CNN and transformer


def check_weights(orig, qpath, per_channel_axis):
    """Every quantized weight: int8 values and per-channel scales as NumPy computes them."""
    m = onnx.load(str(qpath))
    init = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    o = {t.name: numpy_helper.to_array(t) for t in orig.graph.initializer}
    dq = {nd.output[0]: nd for nd in m.graph.node if nd.op_type == "DequantizeLinear"}
    checked = 0
    for name, axis in per_channel_axis.items():
        node = dq[f"{name}_dequantized"]
        q, s = init[node.input[0]], init[node.input[1]]
        w = o[name]
        red = tuple(i for i in range(w.ndim) if i != axis)
        want_s = np.abs(w).max(axis=red) / 127
        np.testing.assert_allclose(s, want_s.astype(np.float32), rtol=1e-6)
        shape = [1] * w.ndim
        shape[axis] = -1
        np.testing.assert_array_equal(q, np.clip(np.rint(w / want_s.astype(np.float32).reshape(shape)), -127, 127).astype(np.int8))
        assert [a.i for a in node.attribute if a.name == "axis"] == [axis]
        checked += 1
    return checked


def test_cnn_qdq_ort_equals_reference(tmp_path):
    rng = np.random.default_rng(1)
    model = small_cnn(rng)
    path = save(model, tmp_path / "cnn.onnx")
    data = write_samples(tmp_path / "data", [rng.uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32) for _ in range(12)])
    q = tmp_path / "cnn_q.onnx"
    r = gpuopt("quantize", path, "--calibration", data, "-o", q, "--method", "percentile", "--json")
    rep = json.loads(r.stdout)
    onnx.checker.check_model(onnx.load(str(q)))
    m, ops = count_ops(q)
    # Activations: x, r0 (conv1 and the residual add read one shared pair), r1, c2, r2, p, f -> 7 Q/DQ pairs;
    # weights: w0, w1, w2, fc_w -> 4 DQ.
    assert ops["QuantizeLinear"] == 7 and ops["DequantizeLinear"] == 11, ops
    assert {l["name"]: l["op"] for l in rep["layers"]} == {"conv0": "Conv", "conv1": "Conv", "conv2": "Conv", "add": "Add",
                                                           "pool": "MaxPool", "gap": "GlobalAveragePool", "fc": "Gemm"}
    assert check_weights(model, q, {"w0": 0, "w1": 0, "w2": 0, "fc_w": 0}) == 4
    # The MaxPool's output p is quantized with its input r2's range (ONNX Runtime's recipe), not its
    # own calibrated one (a 2x2 maximum of r2 has a larger 99.99th percentile than r2).
    assert q_scale(q, "p") == q_scale(q, "r2") > 0
    x = rng.uniform(-1, 1, (3, 3, 16, 16)).astype(np.float32)
    out = tmp_path / "out"
    run_gpuopt(q, {"x": x}, out)
    ref = np.load(out / "logits.npy")
    got = ort_run(q, {"x": x})[0]
    # Same QDQ semantics: equal up to float summation order (a value on a rounding edge may move one quantum).
    np.testing.assert_allclose(ref, got, atol=2e-3 * np.abs(got).max())
    f32 = ort_run(path, {"x": x})[0]
    assert rel_l2(got, f32) < 0.05
    # The report's held-out accuracy is the same comparison, made by gpuopt.
    acc = rep["accuracy"][0]
    assert acc["name"] == "logits" and 0 < acc["rel_l2"] < 0.05 and acc["top1_agreement"] >= 0.5


def test_transformer_qdq_ort_equals_reference(tmp_path):
    rng = np.random.default_rng(2)
    model = small_transformer(rng)
    path = save(model, tmp_path / "tx.onnx")
    data = write_samples(tmp_path / "data", [rng.normal(0, 1, (1, 8, 32)).astype(np.float32) for _ in range(8)])
    q = tmp_path / "tx_q.onnx"
    rep = json.loads(gpuopt("quantize", path, "--calibration", data, "-o", q, "--method", "minmax", "--json").stdout)
    onnx.checker.check_model(onnx.load(str(q)))
    layers = {l["name"]: l for l in rep["layers"]}
    # Six weight MatMuls (per-channel along N) and both attention MatMuls on two activations; the
    # residual adds before LayerNorm stay float (no Conv or pool reads them).
    assert set(layers) == {"proj_q", "proj_k", "proj_v", "attn_qk", "attn_pv", "proj_o", "ffn1", "ffn2"}
    assert len(layers["attn_qk"]["activations"]) == 2 and "weight" not in layers["attn_qk"]
    assert check_weights(model, q, {"wq": 1, "wk": 1, "wv": 1, "wo": 1, "w1": 1, "w2": 1}) == 6
    x = rng.normal(0, 1, (1, 8, 32)).astype(np.float32)
    out = tmp_path / "out"
    run_gpuopt(q, {"x": x}, out)
    ref, got, f32 = np.load(out / "y.npy"), ort_run(q, {"x": x})[0], ort_run(path, {"x": x})[0]
    np.testing.assert_allclose(ref, got, atol=2e-2)
    assert rel_l2(got, f32) < 0.1


def test_per_tensor_weights_below_opset_13(tmp_path):
    rng = np.random.default_rng(3)
    model = small_cnn(rng)
    model.opset_import[0].version = 12
    path = save(model, tmp_path / "cnn12.onnx")
    data = write_samples(tmp_path / "data", [rng.uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32) for _ in range(3)])
    q = tmp_path / "q.onnx"
    gpuopt("quantize", path, "--calibration", data, "-o", q, "--method", "minmax")
    m = onnx.load(str(q))
    for nd in m.graph.node:
        if nd.op_type == "DequantizeLinear":
            assert not [a for a in nd.attribute if a.name == "axis"]
    x = rng.uniform(-1, 1, (2, 3, 16, 16)).astype(np.float32)
    out = tmp_path / "out"
    run_gpuopt(q, {"x": x}, out)
    np.testing.assert_allclose(np.load(out / "logits.npy"), ort_run(q, {"x": x})[0], atol=2e-3)


# ---------------------------------------------------------------- cache, accuracy target, report


def test_cache_rebuilds_without_data(tmp_path):
    rng = np.random.default_rng(4)
    path = save(small_cnn(rng), tmp_path / "cnn.onnx")
    data = write_samples(tmp_path / "data", [rng.uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32) for _ in range(4)])
    cache = tmp_path / "cnn.calib"
    gpuopt("quantize", path, "--calibration", data, "-o", tmp_path / "a.onnx", "--calibration-cache", cache)
    gpuopt("quantize", path, "--calibration-cache", cache, "-o", tmp_path / "b.onnx")
    a, b = onnx.load(str(tmp_path / "a.onnx")), onnx.load(str(tmp_path / "b.onnx"))
    assert a.SerializeToString() == b.SerializeToString()
    # A cache that misses a tensor, and one that is not a cache, are refused.
    lines = cache.read_text().splitlines()
    (tmp_path / "short.calib").write_text("\n".join(l for l in lines if not l.startswith("r1:")) + "\n")
    r = gpuopt("quantize", path, "--calibration-cache", tmp_path / "short.calib", "-o", tmp_path / "c.onnx", check=False)
    assert r.returncode == 1 and "no scale for tensor 'r1'" in r.stderr
    (tmp_path / "bad.calib").write_text("hello\n")
    r = gpuopt("quantize", path, "--calibration-cache", tmp_path / "bad.calib", "-o", tmp_path / "c.onnx", check=False)
    assert r.returncode == 1 and "line 1" in r.stderr


def test_accuracy_target_keeps_sensitive_layers_in_float(tmp_path):
    rng = np.random.default_rng(5)
    path = save(small_cnn(rng), tmp_path / "cnn.onnx")
    data = write_samples(tmp_path / "data", [rng.uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32) for _ in range(10)])
    base = json.loads(gpuopt("quantize", path, "--calibration", data, "-o", tmp_path / "a.onnx", "--method", "minmax",
                             "--json").stdout)
    err = base["accuracy"][0]["rel_l2"]
    assert err > 0 and base["layers_float"] == 0
    target = err / 3
    rep_dir = tmp_path / "rep"
    r = gpuopt("quantize", path, "--calibration", data, "-o", tmp_path / "b.onnx", "--method", "minmax",
               "--accuracy-target", f"rel-l2={target}", "--report", rep_dir)
    rep = json.loads((rep_dir / "report.json").read_text())
    assert rep["accuracy_all_int8"][0]["rel_l2"] == pytest.approx(err)
    assert rep["accuracy"][0]["rel_l2"] <= target
    floats = [l for l in rep["layers"] if l["precision"] == "float"]
    assert 0 < len(floats) < len(rep["layers"])
    assert all("sensitivity rank" in l["reason"] and "loss_alone" in l for l in floats)
    # The most sensitive layer (largest loss alone) is the first kept in float.
    worst = max(rep["layers"], key=lambda l: l["loss_alone"])
    assert worst["precision"] == "float"
    # The file agrees: the float layers read no dequantized input; ORT's result meets the target.
    m = onnx.load(str(tmp_path / "b.onnx"))
    for nd in m.graph.node:
        if nd.name in {l["name"] for l in floats}:
            assert not any(i.endswith("_dequantized") for i in nd.input), nd.name
    held = [np.load(data / f"{i:03d}.npy") for i in (8, 9)]  # the last fifth is held out
    got = np.concatenate([ort_run(tmp_path / "b.onnx", {"x": h})[0] for h in held])
    f32 = np.concatenate([ort_run(path, {"x": h})[0] for h in held])
    assert rel_l2(got, f32) == pytest.approx(rep["accuracy"][0]["rel_l2"], rel=1e-3)
    text = (rep_dir / "report.txt").read_text()
    assert "kept in float" in text and "sensitivity rank 1" in text
    svg = ET.parse(rep_dir / "layers.svg").getroot()
    groups = [g for g in svg.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "layer"]
    assert len(groups) == len(rep["layers"])
    assert sum(g.get("data-precision") == "float" for g in groups) == len(floats)
    assert "layers:" in r.stdout


# ---------------------------------------------------------------- images, run --precision int8


def write_ppm(path, img):
    h, w, _ = img.shape
    path.write_bytes(f"P6\n{w} {h}\n255\n".encode() + img.astype(np.uint8).tobytes())


def test_images_with_preprocess(tmp_path):
    rng = np.random.default_rng(6)
    model = small_cnn(rng)
    path = save(model, tmp_path / "cnn.onnx")
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    pix = [rng.integers(0, 256, (16, 16, 3)) for _ in range(3)]
    for i, p in enumerate(pix):
        write_ppm(imgs / f"{i}.ppm", p)
    cache = tmp_path / "c.calib"
    mean, std = np.array([0.5, 0.4, 0.3]), np.array([0.2, 0.25, 0.3])
    gpuopt("quantize", path, "--calibration", imgs, "-o", tmp_path / "q.onnx", "--method", "minmax", "--calibration-cache",
           cache, "--preprocess", "resize=0,crop=0,mean=0.5/0.4/0.3,std=0.2/0.25/0.3")
    scales = dict(l.rsplit(": ", 1) for l in cache.read_text().splitlines()[1:] if not l.startswith("#"))
    want = max(np.abs((p / 255.0 - mean) / std).max() for p in pix)
    assert float(scales["x"]) * 127 == pytest.approx(want, rel=1e-5)
    # Images without --preprocess, and a bad spec, are refused.
    r = gpuopt("quantize", path, "--calibration", imgs, "-o", tmp_path / "q2.onnx", check=False)
    assert r.returncode == 1 and "--preprocess" in r.stderr
    r = gpuopt("quantize", path, "--calibration", imgs, "-o", tmp_path / "q2.onnx", "--preprocess", "size=3", check=False)
    assert r.returncode == 2 and "size=3" in r.stderr


def test_run_precision_int8_calibrates_with_warning(tmp_path):
    rng = np.random.default_rng(8)
    path = save(small_cnn(rng), tmp_path / "cnn.onnx")
    x = rng.uniform(-1, 1, (2, 3, 16, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = gpuopt("run", path, "--precision", "int8", "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "o",
               "--iterations", "1")
    assert "accuracy is unknown" in r.stderr
    got = np.load(tmp_path / "o" / "logits.npy")
    f32 = ort_run(path, {"x": x})[0]
    assert 0 < rel_l2(got, f32) < 0.05  # quantized (not the f32 result), and close to it
    # The same model, quantized by gpuopt quantize with minmax on these inputs, gives the same answer in ORT.
    write_samples(tmp_path / "d", [x])
    gpuopt("quantize", path, "--calibration", tmp_path / "d", "-o", tmp_path / "q.onnx", "--method", "minmax")
    np.testing.assert_allclose(got, ort_run(tmp_path / "q.onnx", {"x": x})[0], atol=2e-3 * np.abs(got).max())
    # A QDQ model runs at int8 without calibrating again.
    r = gpuopt("run", tmp_path / "q.onnx", "--precision", "int8", "--random-inputs", "--iterations", "1")
    assert "warning" not in r.stderr


def inspect_ops(*args):
    """Op type -> count in `gpuopt inspect --optimized --json` (the graph after the session's passes)."""
    r = gpuopt("inspect", *args, "--optimized", "--device", "cuda", "--precision", "int8", "--json")
    return {e["op"]: e["count"] for e in json.loads(r.stdout)["ops"]}, r.stderr


def test_inspect_precision_int8_calibrates_a_float_model_as_run_does(tmp_path):
    """inspect --optimized --precision int8 on a float model shows the graph `run --precision int8`
    executes: calibrated on random inputs (with run's warning), the same nodes as the file that
    `gpuopt quantize --method minmax` writes for that model (the oracle), int8 ops included."""
    rng = np.random.default_rng(12)
    path = save(small_cnn(rng), tmp_path / "cnn.onnx")
    got, err = inspect_ops(path)
    assert "no QDQ nodes" in err and "accuracy is unknown" in err
    write_samples(tmp_path / "d", [rng.uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32)])
    gpuopt("quantize", path, "--calibration", tmp_path / "d", "-o", tmp_path / "q.onnx", "--method", "minmax")
    want, err_q = inspect_ops(tmp_path / "q.onnx")
    assert "warning" not in err_q
    assert got == want
    assert any(op.startswith("Int8") for op in got), got


# ---------------------------------------------------------------- bad data


def test_bad_calibration_data(tmp_path):
    rng = np.random.default_rng(9)
    path = save(small_cnn(rng), tmp_path / "cnn.onnx")
    good = rng.uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32)

    def fails(folder, text, code=1):
        r = gpuopt("quantize", path, "--calibration", folder, "-o", tmp_path / "q.onnx", check=False)
        assert r.returncode == code, r.stderr
        assert text in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        return r

    (tmp_path / "empty").mkdir()
    fails(tmp_path / "empty", "no .npy files")
    fails(tmp_path / "missing", "not a folder")
    d = write_samples(tmp_path / "shape", [good, rng.uniform(-1, 1, (1, 3, 8, 16)).astype(np.float32)])
    fails(d, "001.npy: shape f32[1,3,8,16] does not match input 'x'")
    d = write_samples(tmp_path / "dtype", [good.astype(np.float64)])
    fails(d, "000.npy: dtype f64, but input 'x' takes f32")
    bad = good.copy()
    bad[0, 1, 2, 3] = np.nan
    d = write_samples(tmp_path / "nan", [good, bad])
    fails(d, "001.npy: NaN at element")
    d = tmp_path / "garbage"
    d.mkdir()
    (d / "0.npy").write_bytes(b"not an npy file")
    fails(d, "0.npy")
    r = gpuopt("quantize", path, "-o", tmp_path / "q.onnx", check=False)
    assert r.returncode == 2 and "--calibration" in r.stderr
    r = gpuopt("quantize", path, "--calibration", write_samples(tmp_path / "ok", [good]), "-o", tmp_path / "no" / "q.onnx",
               check=False)
    assert r.returncode == 1 and "does not exist" in r.stderr
    # --samples N reads the first N files only: the one with the NaN is never read.
    gpuopt("quantize", path, "--calibration", tmp_path / "nan", "--samples", "1", "-o", tmp_path / "q1.onnx")
    r = gpuopt("quantize", path, "--calibration", write_samples(tmp_path / "g", [good]), "-o", tmp_path / "q.onnx",
               "--accuracy-target", "top5=3", check=False)
    assert r.returncode == 2 and "--accuracy-target" in r.stderr
