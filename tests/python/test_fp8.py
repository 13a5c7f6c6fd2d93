"""FP8 e4m3 (--precision fp8): Fp8Gemm's CPU reference against an ml_dtypes/NumPy oracle (every
bit pattern, rounding ties, saturation, a GEMM with bias and Relu), and `gpuopt run --precision
fp8` on a small float transformer block against ONNX Runtime running the same model with
ONNX's FP8 QuantizeLinear/DequantizeLinear around each GEMM input (and the f32 model), a
GEMM left in float where K is no multiple of 16, and a QDQ model refused.

Oracles: ml_dtypes.float8_e4m3fn (the format: round to nearest even; it turns overflow into NaN
where gpuopt saturates at +-448, so the oracle clips first, as cuBLASLt's saturating conversion
does), NumPy float64 matmuls, ONNX Runtime (the f32 model)."""
import json
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import onnx
import onnx.version_converter
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from gpuopt_cli import ROOT, gpuopt_bin, run_gpuopt
from test_quantize import ort_run, rel_l2, save, small_transformer

E4M3 = ml_dtypes.float8_e4m3fn


def gpuopt(*args, check=True):
    r = subprocess.run([gpuopt_bin(), *map(str, args)], capture_output=True, text=True, timeout=600)
    if check:
        assert r.returncode == 0, f"gpuopt {' '.join(map(str, args))} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r


def oracle_e4m3(x):
    """x rounded to e4m3 (saturating), as float64."""
    x = np.asarray(x, np.float32)
    return np.where(np.isnan(x), np.nan, np.clip(x, -448, 448)).astype(np.float32).astype(E4M3).astype(np.float64)


def fp8_gemm_model(k, n, w_bits, a_scale, b_scale, bias=None, activation=""):
    """y = Fp8Gemm(a [M, K], w_bits u8 [N, K][, bias]) in domain ai.gpuopt."""
    inits = [numpy_helper.from_array(w_bits.astype(np.uint8), "w")]
    ins = ["a", "w"]
    if bias is not None:
        inits.append(numpy_helper.from_array(bias.astype(np.float32), "bias"))
        ins.append("bias")
    attrs = dict(a_scale=float(a_scale), b_scale=float(b_scale))
    if activation:
        attrs["activation"] = activation
    node = helper.make_node("Fp8Gemm", ins, ["y"], name="fp8", domain="ai.gpuopt", **attrs)
    g = helper.make_graph([node], "fp8", [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["m", k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.gpuopt", 1)],
                             ir_version=8)


def run_fp8_gemm(tmp_path, model, a):
    path = save(model, tmp_path / "fp8.onnx")
    out = tmp_path / "out"
    run_gpuopt(path, {"a": a.astype(np.float32)}, out)
    return np.load(out / "y.npy")


def test_every_bit_pattern_decodes_as_ml_dtypes(tmp_path):
    # y[0, c] = 1.0 * e4m3(pattern c) with unit scales: the decoder, pattern by pattern.
    bits = np.arange(256, dtype=np.uint8).reshape(256, 1)
    y = run_fp8_gemm(tmp_path, fp8_gemm_model(1, 256, bits, 1.0, 1.0), np.ones((1, 1), np.float32))
    want = bits.ravel().view(E4M3).astype(np.float32)
    np.testing.assert_array_equal(y.ravel(), want)  # NaN at 0x7F and 0xFF in both
    assert np.isnan(y.ravel()[[0x7F, 0xFF]]).all()


def test_rounding_ties_saturation_and_nan(tmp_path):
    # y[i, 0] = e4m3(a[i]) * 1.0 (the weight is the pattern of 1.0): the encoder.
    vals = np.arange(0x7F, dtype=np.uint8).view(E4M3).astype(np.float64)  # 0 .. 448, increasing
    mids = (vals[:-1] + vals[1:]) / 2  # every tie, exact in f32
    rng = np.random.default_rng(0)
    a = np.concatenate([mids, -mids, np.nextafter(mids.astype(np.float32), np.float32(0)),
                        np.nextafter(mids.astype(np.float32), np.float32(1e9)), rng.uniform(-500, 500, 300),
                        rng.normal(0, 0.01, 200), [448, 449, 464, 1e4, -1e4, np.inf, -np.inf, np.nan, 2.0**-10, 0.0]])
    a = a.astype(np.float32).reshape(-1, 1)
    one = np.array([[0x38]], np.uint8)
    y = run_fp8_gemm(tmp_path, fp8_gemm_model(1, 1, one, 1.0, 1.0), a).ravel()
    want = oracle_e4m3(a.ravel())
    np.testing.assert_array_equal(y, want.astype(np.float32))
    assert list(y[-10:-3]) == [448, 448, 448, 448, -448, 448, -448]  # saturation: 449, 464, 1e4, inf
    assert np.isnan(y[-3])  # NaN stays NaN


@pytest.mark.parametrize("activation", ["", "Relu"])
def test_fp8_gemm_matches_numpy(tmp_path, activation):
    rng = np.random.default_rng(1)
    m, k, n = 7, 64, 48
    a = rng.normal(0, 2, (m, k)).astype(np.float32)
    w = rng.normal(0, 0.3, (n, k)).astype(np.float32)
    a_scale, b_scale = np.float32(np.abs(a).max() * 0.8 / 448), np.float32(np.abs(w).max() / 448)  # some of A saturates
    w_bits = np.clip(w / b_scale, -448, 448).astype(E4M3).view(np.uint8)
    bias = rng.normal(0, 1, n).astype(np.float32)
    y = run_fp8_gemm(tmp_path, fp8_gemm_model(k, n, w_bits, a_scale, b_scale, bias, activation), a)
    qa = oracle_e4m3(a / a_scale)
    qw = w_bits.view(E4M3).astype(np.float64)
    want = (qa @ qw.T) * (np.float64(a_scale) * np.float64(b_scale)) + bias
    if activation == "Relu":
        want = np.maximum(want, 0)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())
    # And it is an fp8 result: not the f32 GEMM's.
    f32 = a.astype(np.float64) @ w.T.astype(np.float64) + bias
    if activation == "Relu":
        f32 = np.maximum(f32, 0)
    assert 1e-3 < rel_l2(y, f32) < 0.1


def run_json(path, *args):
    r = gpuopt("run", path, "--iterations", "1", "--warmup", "0", "--json", *args)
    return json.loads(r.stdout), r.stderr


def fake_fp8_model(model, feeds, keep=()):
    """The oracle of `run --precision fp8`: the float model with every MatMul of a constant weight
    (but those named in `keep`) fed through ONNX's own FP8 QDQ (QuantizeLinear to FLOAT8E4M3FN,
    saturating, and back) at amax / 448 of its input on `x`, and its weight replaced by
    e4m3(W / s) * s (s = max|W| / 448), run by ONNX Runtime."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    mms = [nd for nd in m.graph.node if nd.op_type == "MatMul" and nd.input[1] in inits and nd.name not in keep]
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for nd in mms:
        if nd.input[0] not in feeds and nd.input[0] not in [o.name for o in probe.graph.output]:
            probe.graph.output.append(helper.make_tensor_value_info(nd.input[0], TensorProto.FLOAT, None))
    names = [o.name for o in probe.graph.output]
    acts = dict(zip(names, ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feeds)))
    acts.update(feeds)
    nodes, done = [], set()
    for nd in m.graph.node:
        if nd in mms:
            a, w = nd.input[0], nd.input[1]
            wf = inits[w]
            sw = np.float32(np.float64(np.abs(wf).max()) / 448)
            wq = (np.clip(wf / sw, -448, 448).astype(E4M3).astype(np.float32) * sw).astype(np.float32)
            m.graph.initializer.append(numpy_helper.from_array(wq, w + "_fq"))
            if a not in done:  # x feeds Q, K and V: one Q/DQ pair
                done.add(a)
                sa = np.float32(np.float64(np.abs(acts[a]).max()) / 448)
                m.graph.initializer.extend([numpy_helper.from_array(np.array(sa, np.float32), a + "_s"),
                                            helper.make_tensor(a + "_z", TensorProto.FLOAT8E4M3FN, [], [0])])
                nodes += [helper.make_node("QuantizeLinear", [a, a + "_s", a + "_z"], [a + "_q"], saturate=1),
                          helper.make_node("DequantizeLinear", [a + "_q", a + "_s", a + "_z"], [a + "_dq"])]
            nd.input[0], nd.input[1] = a + "_dq", w + "_fq"
        nodes.append(nd)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m


def test_run_precision_fp8_on_a_transformer_block(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPT_DISABLE_FUSION", "fp8_lone")  # every GEMM in e4m3, lone or not
    rng = np.random.default_rng(2)
    model = small_transformer(rng)
    path = save(model, tmp_path / "tx.onnx")
    x = rng.normal(0, 1, (1, 8, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    j, err = run_json(path, "--precision", "fp8", "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "o")
    assert "accuracy is unknown" in err
    assert j["precision"] == "fp8"
    assert j["fp8"]["gemms"] == 6 and j["fp8"]["kept"] == []  # Q, K, V, O projections and the two FFN GEMMs
    got = np.load(tmp_path / "o" / "y.npy")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # its QDQ rewrites reject float8
    oracle = ort.InferenceSession(fake_fp8_model(model, {"x": x}).SerializeToString(), so, providers=["CPUExecutionProvider"])
    want = oracle.run(None, {"x": x})[0]
    f32 = ort_run(path, {"x": x})[0]
    # Equal to ONNX Runtime's FP8 QDQ emulation (up to f32 rounding), and not the f32 result:
    # e4m3's 3 mantissa bits on a 32-wide toy cost several percent (measured 6.5e-2).
    assert rel_l2(got, want) < 1e-5, (rel_l2(got, want), rel_l2(got, f32))  # measured 1.6e-7
    assert 0.01 < rel_l2(got, f32) < 0.15, rel_l2(got, f32)


@pytest.mark.parametrize("norm", [True, False])
def test_run_precision_fp8_on_a_generated_bert_with_chained_gemms(tmp_path, monkeypatch, norm):
    # tools/models' 2-layer BERT: every Linear has a bias, so each FFN up-projection writes the
    # down-projection's e4m3 input itself (chained), and the residual LayerNorms (every one is a
    # SkipLayerNormalization here, the embeddings' too) write the e4m3 input of Q, K and V and of
    # the FFN's up-projection (norm); with GPUOPT_DISABLE_FUSION=fp8_norm, K and V read the e4m3
    # copy of their input that Q made instead (shared). Still ONNX Runtime's FP8 QDQ emulation.
    # fp8_lone: the attention output projections and the pooler in e4m3 too (see the next test).
    monkeypatch.setenv("GPUOPT_DISABLE_FUSION", "fp8_lone" if norm else "fp8_norm,fp8_lone")
    sys.path.insert(0, os.path.join(ROOT, "tools", "models"))
    from archs import ARCHS
    model, make_feeds = ARCHS["bert"]()
    model = onnx.version_converter.convert_version(model, 19)  # FP8 QuantizeLinear, for the oracle
    path = save(model, tmp_path / "bert.onnx")
    feeds = make_feeds(np.random.default_rng(5), 2)
    args = []
    for k, v in feeds.items():
        np.save(tmp_path / f"{k}.npy", v)
        args += ["--input", f"{k}={tmp_path / f'{k}.npy'}"]
    j, _ = run_json(path, "--precision", "fp8", "--output-dir", tmp_path / "o", *args)
    assert j["fp8"]["gemms"] == 13 and j["fp8"]["kept"] == []  # 2 x 6 + the pooler
    assert j["fp8"]["chained"] == 2  # per layer: FFN up -> down
    if norm:  # per layer: the LayerNorm before Q/K/V and the one before the FFN (the last feeds the pooler's Gather)
        assert j["fp8"]["norm"] == 4 and j["fp8"]["shared"] == 0
    else:  # per layer: K and V read Q's e4m3 x
        assert j["fp8"]["norm"] == 0 and j["fp8"]["shared"] == 4
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    oracle = ort.InferenceSession(fake_fp8_model(model, feeds).SerializeToString(), so, providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in oracle.get_outputs()], oracle.run(None, feeds)))
    f32 = dict(zip([o.name for o in model.graph.output], ort_run(path, feeds)))
    for name in want:
        got = np.load(tmp_path / "o" / f"{name}.npy")
        assert rel_l2(got, want[name]) < 1e-4, (name, rel_l2(got, want[name]), rel_l2(got, f32[name]))
        assert rel_l2(got, f32[name]) > 1e-3, name


def test_run_precision_fp8_keeps_lone_gemms_in_float(tmp_path):
    # By default a GEMM whose input no producer writes in e4m3 (it would quantize it in a pass of
    # its own) stays in float below N = 2048: in the generated BERT the attention output
    # projections (behind the attention kernel) and the pooler (behind a Gather). Every other GEMM
    # still reads e4m3 written by a LayerNorm or the GEMM before it. ONNX Runtime's FP8 QDQ
    # emulation with those three MatMuls left float is the oracle.
    sys.path.insert(0, os.path.join(ROOT, "tools", "models"))
    from archs import ARCHS
    model, make_feeds = ARCHS["bert"]()
    model = onnx.version_converter.convert_version(model, 19)
    path = save(model, tmp_path / "bert.onnx")
    feeds = make_feeds(np.random.default_rng(6), 2)
    args = []
    for k, v in feeds.items():
        np.save(tmp_path / f"{k}.npy", v)
        args += ["--input", f"{k}={tmp_path / f'{k}.npy'}"]
    j, _ = run_json(path, "--precision", "fp8", "--output-dir", tmp_path / "o", *args)
    kept = j["fp8"]["kept"]
    assert j["fp8"]["gemms"] == 10 and len(kept) == 3, kept
    assert all("quantize pass of its own for N = 64 < 2048" in k for k in kept), kept
    names = [k.split("'")[1] for k in kept]
    consumers = {nd.name: nd for nd in model.graph.node}
    assert all(consumers[n].op_type == "MatMul" for n in names), names
    assert j["fp8"]["chained"] == 2 and j["fp8"]["norm"] == 4
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    oracle = ort.InferenceSession(fake_fp8_model(model, feeds, keep=names).SerializeToString(), so,
                                  providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in oracle.get_outputs()], oracle.run(None, feeds)))
    f32 = dict(zip([o.name for o in model.graph.output], ort_run(path, feeds)))
    for name in want:
        got = np.load(tmp_path / "o" / f"{name}.npy")
        assert rel_l2(got, want[name]) < 1e-4, (name, rel_l2(got, want[name]), rel_l2(got, f32[name]))
        assert rel_l2(got, f32[name]) > 1e-3, name


def test_run_precision_fp8_keeps_unaligned_gemms_in_float(tmp_path):
    # K = 24: no multiple of 16, so the GEMM stays float and the output is the f32 one.
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.normal(0, 0.2, (24, 32)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 24])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    path = save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), tmp_path / "mm.onnx")
    x = rng.normal(0, 1, (4, 24)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    j, err = run_json(path, "--precision", "fp8", "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "o")
    assert j["fp8"]["gemms"] == 0
    assert len(j["fp8"]["kept"]) == 1 and "K = 24" in j["fp8"]["kept"][0] and "multiples of 16" in j["fp8"]["kept"][0]
    np.testing.assert_allclose(np.load(tmp_path / "o" / "y.npy"), ort_run(path, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_run_precision_fp8_refuses_a_qdq_model(tmp_path):
    rng = np.random.default_rng(4)
    path = save(small_transformer(rng), tmp_path / "tx.onnx")
    (tmp_path / "d").mkdir()
    np.save(tmp_path / "d" / "000.npy", rng.normal(0, 1, (1, 8, 32)).astype(np.float32))
    gpuopt("quantize", path, "--calibration", tmp_path / "d", "-o", tmp_path / "q.onnx", "--method", "minmax")
    r = gpuopt("run", tmp_path / "q.onnx", "--precision", "fp8", "--random-inputs", "--iterations", "1", check=False)
    assert r.returncode == 2, r.stderr
    assert "--precision fp8 takes a float model" in r.stderr and "--precision int8" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("precision", ["int8", "fp8", "fp32"])
def test_run_reads_the_model_file_once(tmp_path, precision):
    """run --precision int8/fp8 on a float model calibrates on its inputs and runs the result
    (quant/precision_session.h) from one read of the file; the outputs still agree with NumPy's
    product within the quantization's error."""
    import shutil
    if not shutil.which("strace"):
        pytest.skip("strace is not installed")
    rng = np.random.default_rng(7)
    w_arr = rng.standard_normal((32, 16)).astype(np.float32)
    w = numpy_helper.from_array(w_arr, "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])], [w])
    path = save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "mm_once.onnx")
    x = rng.standard_normal((4, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    log = tmp_path / "strace.txt"
    r = subprocess.run(["strace", "-f", "-e", "trace=open,openat", "-o", str(log), gpuopt_bin(), "run", str(path),
                        "--precision", precision, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir",
                        str(tmp_path / "o"), "--iterations", "1"], capture_output=True, text=True, timeout=300)
    if r.returncode != 0 and "ptrace" in r.stderr:
        pytest.skip(f"strace cannot trace here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    opens = [line for line in log.read_text().splitlines() if "mm_once.onnx" in line and "ENOENT" not in line]
    assert len(opens) == 1, "\n".join(opens)
    got, want = np.load(tmp_path / "o" / "y.npy"), x.astype(np.float64) @ w_arr.astype(np.float64)
    assert rel_l2(got, want) < (1e-6 if precision == "fp32" else 0.05), rel_l2(got, want)
