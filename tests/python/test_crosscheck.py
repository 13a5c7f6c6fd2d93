"""gpuopt's CPU reference vs ONNX Runtime on real architectures (tools/models/archs.py).

Each model is built with the onnx package, fed seeded random inputs, run by `gpuopt run
--input ... --output-dir` and by onnxruntime's CPU provider; every output must agree to a max
abs error of 1e-4 (f32). Transformers run at two sequence lengths and the CNNs at two batch sizes,
so run-time shape re-inference is exercised too.
"""
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest

from gpuopt_cli import ROOT, gpuopt_bin, run_gpuopt
sys.path.insert(0, os.path.join(ROOT, "tools", "models"))
from archs import ARCHS, bert, gpt_block  # noqa: E402

MAX_ABS_ERR = 1e-4


def run_both(model, feeds, tmp_path):
    import onnx
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    run_gpuopt(path, feeds, tmp_path / "out")
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ref = sess.run(None, feeds)
    for o, expected in zip(sess.get_outputs(), ref):
        got = np.load(tmp_path / "out" / f"{o.name}.npy")
        assert got.shape == expected.shape, f"{o.name}: shape {got.shape} vs onnxruntime {expected.shape}"
        assert got.dtype == expected.dtype, f"{o.name}: dtype {got.dtype} vs onnxruntime {expected.dtype}"
        err = float(np.max(np.abs(got.astype(np.float64) - expected.astype(np.float64))))
        assert np.isfinite(got).all(), f"{o.name}: non-finite values"
        assert err <= MAX_ABS_ERR, f"{o.name}: max abs err {err:.3g} > {MAX_ABS_ERR} (|ref| max {np.abs(expected).max():.3g})"


@pytest.mark.parametrize("name", [n for n in ARCHS if n != "resnet_small" and not n.endswith(("_full", "_base"))])
def test_architecture_matches_onnxruntime(name, tmp_path):
    model, feeds = ARCHS[name]()
    run_both(model, feeds(np.random.default_rng(1), 2), tmp_path)


def test_dynamic_batch_resnet_small(tmp_path):
    model, feeds = ARCHS["resnet_small"]()
    for batch in (1, 3):
        d = tmp_path / f"b{batch}"
        d.mkdir()
        run_both(model, feeds(np.random.default_rng(batch), batch), d)


@pytest.mark.parametrize("builder", [bert, gpt_block], ids=["bert", "gpt_block"])
def test_other_sequence_length(builder, tmp_path):
    model, feeds = builder(seq=9)
    run_both(model, feeds(np.random.default_rng(7), 3), tmp_path)


# ---- the CLI around the engine: inspect and run report what they should, bad input is one line


def _conv_model(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.ones((8, 3, 3, 3), np.float32), "w")
    n = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])
    g = helper.make_graph([n], "c", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    path = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_inspect_json_counts(tmp_path):
    import json
    path = _conv_model(tmp_path)
    r = subprocess.run([gpuopt_bin(), "inspect", str(path), "--json", "--batch", "2"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["opset"] == 17 and j["parameters"] == 8 * 3 * 3 * 3
    assert j["inputs"][0]["shape"] == ["N", "3", "16", "16"]
    # 2 FLOPs per MAC: batch 2 x 8 out channels x 16x16 outputs x 27 MACs.
    assert j["ops"][0]["op"] == "Conv" and j["ops"][0]["count"] == 1
    assert abs(j["flops_total"] - 2 * 2 * 8 * 16 * 16 * 27) / (2 * 2 * 8 * 16 * 16 * 27) < 0.05
    assert j["ops"][0]["support"]["cpu"] is True


def test_run_random_inputs_json(tmp_path):
    import json
    path = _conv_model(tmp_path)
    r = subprocess.run([gpuopt_bin(), "run", str(path), "--random-inputs", "--batch", "3", "--iterations", "4", "--json",
                        "--output-dir", str(tmp_path / "o")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["batch"] == 3 and j["iterations"] == 4
    lat = j["latency_ms"]
    assert 0 < lat["min"] <= lat["median"] <= lat["p99"]
    assert np.load(tmp_path / "o" / "y.npy").shape == (3, 8, 16, 16)


def test_run_bad_input_is_one_clear_line(tmp_path):
    path = _conv_model(tmp_path)
    r = subprocess.run([gpuopt_bin(), "run", str(path)], capture_output=True, text=True)
    assert r.returncode == 2 and "missing input 'x'" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    np.save(tmp_path / "bad.npy", np.zeros((1, 3, 16), np.float32))
    r = subprocess.run([gpuopt_bin(), "run", str(path), "--input", f"x={tmp_path / 'bad.npy'}"], capture_output=True,
                       text=True)
    assert r.returncode == 1 and "rank 3 given" in r.stderr, r.stderr
    (tmp_path / "trunc.onnx").write_bytes(path.read_bytes()[:100])
    r = subprocess.run([gpuopt_bin(), "inspect", str(tmp_path / "trunc.onnx")], capture_output=True, text=True)
    assert r.returncode == 1 and "truncated or corrupt" in r.stderr, r.stderr
