"""`gpuopt tune` on the CPU with a tiny model: the search space (powers of two, then a binary
search at the memory edge), the edge found with --memory-limit against the model's own tensor
sizes, the constraints, the time budget, the written config.pbtxt served by a real `serve` and
answering like ONNX Runtime, and online mode against real servers for a few seconds."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from gpuopt_cli import ROOT, gpuopt_bin
sys.path.insert(0, os.path.join(ROOT, "tools", "models"))
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
from archs import ARCHS  # noqa: E402
import server_harness as H  # noqa: E402

onnx = pytest.importorskip("onnx")
httpclient = pytest.importorskip("tritonclient.http")
ort = pytest.importorskip("onnxruntime")


def tune(args):
    return subprocess.run([gpuopt_bin(), "tune"] + args, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    m, _ = ARCHS["resnet_small"]()
    path = tmp_path_factory.mktemp("m") / "resnet_small.onnx"
    onnx.save(m, str(path))
    return path


def largest_tensor_per_sample(path):
    """Bytes of the model's largest tensor for one sample, from ONNX's own shape inference."""
    m = onnx.load(str(path))
    for v in list(m.graph.input) + list(m.graph.output):
        v.type.tensor_type.shape.dim[0].dim_value = 1
    m = onnx.shape_inference.infer_shapes(m)
    best = 0
    for v in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output):
        dims = [d.dim_value for d in v.type.tensor_type.shape.dim]
        assert all(d > 0 for d in dims), v
        best = max(best, math.prod(dims) * 4)  # float32
    return best


def test_memory_edge_search_and_served_config(model, tmp_path):
    limit = 1 << 20
    out = tmp_path / "out"
    r = tune([str(model), "--max-batch", "64", "--iterations", "2", "--memory-limit", "1M", "--output-dir", str(out), "--json"])
    assert r.returncode == 0, r.stdout + r.stderr
    j = json.loads(r.stdout)
    # The first batch whose largest tensor passes the limit, from the model's own shapes.
    edge = limit // largest_tensor_per_sample(model) + 1
    assert j["memory_edge"] == {"fp32": edge}
    assert j["largest_batch_that_fit"] == {"fp32": edge - 1}
    batches = [p["batch"] for p in j["points"]]
    doubling = [b for b in (1, 2, 4, 8, 16, 32, 64) if b < 2 * edge][: len(batches)]
    assert batches[: len(doubling)] == doubling  # powers of two until the first failure
    lo, hi = doubling[-2], doubling[-1]
    for p in j["points"][len(doubling):]:  # then a binary search between the last fit and the first failure
        mid = lo + (hi - lo) // 2
        assert p["batch"] == mid
        if p["ok"]:
            lo = mid
        else:
            hi = mid
    assert hi - lo == 1 and hi == edge
    for p in j["points"]:
        assert p["ok"] == (p["batch"] < edge) and p["oom"] == (p["batch"] >= edge)
        if p["ok"]:
            assert p["throughput"] > 0 and 0 < p["p50_ms"] <= p["p99_ms"] and p["memory_bytes"] > 0
    chosen = j["points"][j["chosen"]]
    assert chosen["feasible"] and j["chosen"] in j["pareto"]
    assert chosen["throughput"] == max(p["throughput"] for p in j["points"] if p["feasible"])
    assert (out / "report.html").exists() and (out / "throughput_latency.svg").exists()
    assert "<svg" in (out / "memory_batch.svg").read_text()
    assert json.loads((out / "tune.json").read_text())["points"] == j["points"]

    # The written repository is served as it is, with the chosen settings.
    repo = out / "repository"
    assert (repo / "resnet_small" / "config.pbtxt").read_text() == j["config_pbtxt"]
    with H.Server(["--model-repository", str(repo)]) as s:
        c = httpclient.InferenceServerClient(s.url)
        cfg = c.get_model_config("resnet_small")
        assert cfg["max_batch_size"] == chosen["batch"]
        assert cfg["instance_group"][0]["count"] == 1
        assert chosen["batch"] in cfg["dynamic_batching"]["preferred_batch_size"]
        x = np.random.default_rng(1).standard_normal((chosen["batch"], 3, 64, 64)).astype(np.float32)
        inp = httpclient.InferInput("input", x.shape, "FP32")
        inp.set_data_from_numpy(x)
        got = c.infer("resnet_small", [inp]).as_numpy("logits")
        want = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


def test_constraints(model, tmp_path):
    # A latency budget nothing meets: batch 1 is over it, so larger batches are not tried, and
    # nothing is chosen (exit 1, no config).
    r = tune([str(model), "--iterations", "2", "--latency-budget-ms", "0.001", "--output-dir", str(tmp_path / "a"), "--json"])
    assert r.returncode == 1, r.stdout + r.stderr
    j = json.loads(r.stdout)
    assert [p["batch"] for p in j["points"]] == [1]
    assert "p99" in j["points"][0]["violates"] and j["chosen"] is None and j["config_pbtxt"] is None
    assert not (tmp_path / "a" / "repository").exists()
    # A throughput floor: the chosen point meets it, points below it are marked.
    r = tune([str(model), "--max-batch", "8", "--iterations", "2", "--output-dir", str(tmp_path / "b"), "--json"])
    assert r.returncode == 0, r.stderr
    tps = sorted(p["throughput"] for p in json.loads(r.stdout)["points"])
    floor = (tps[0] + tps[-1]) / 2
    r = tune([str(model), "--max-batch", "8", "--iterations", "2", "--min-throughput", str(floor), "--output-dir",
              str(tmp_path / "c"), "--json"])
    j = json.loads(r.stdout)
    for p in j["points"]:
        assert p["feasible"] == (p["throughput"] >= floor), p
    if j["chosen"] is not None:
        assert j["points"][j["chosen"]]["throughput"] >= floor
    # Bad input: one clear line; a bad value is a usage error (2), a missing model a runtime error (1).
    r = tune([str(model), "--memory-limit", "lots"])
    assert r.returncode == 2 and "--memory-limit: 'lots'" in r.stderr
    r = tune(["--model-repository", str(tmp_path), "-m", "nothing"])
    assert r.returncode == 1 and "no model folder" in r.stderr


def test_time_budget(model, tmp_path):
    r = tune([str(model), "--iterations", "2", "--time-budget", "0.000001", "--output-dir", str(tmp_path), "--json"])
    j = json.loads(r.stdout)
    assert j["time_budget_hit"] and len(j["points"]) == 0 and r.returncode == 1
    assert "--time-budget" in " ".join(j["notes"])


def test_online_mode_and_repository_input(model, tmp_path):
    repo = tmp_path / "repo"
    (repo / "small" / "1").mkdir(parents=True)
    os.symlink(model, repo / "small" / "1" / "model.onnx")
    out = tmp_path / "out"
    r = tune(["--model-repository", str(repo), "-m", "small", "--mode", "online", "--max-batch", "4", "--iterations", "2",
              "--instances", "1", "2", "--max-queue-delay-us", "0", "--measurement-ms", "300", "--max-concurrency", "4",
              "--output-dir", str(out), "--json"])
    assert r.returncode == 0, r.stdout + r.stderr
    j = json.loads(r.stdout)
    online = [p for p in j["points"] if p["mode"] == "online"]
    assert {p["instances"] for p in online} == {1, 2}
    for p in online:
        assert p["ok"], p
        assert p["throughput"] > 0 and p["p50_ms"] <= p["p99_ms"]
        assert p["concurrency"] in (1, 2, 4)
    # Concurrency rises per configuration.
    for inst in (1, 2):
        conc = [p["concurrency"] for p in online if p["instances"] == inst and p["batch"] == online[0]["batch"]]
        assert conc == sorted(conc) and conc[0] == 1
    chosen = j["points"][j["chosen"]]
    assert chosen["mode"] == "online"
    text = (out / "repository" / "small" / "config.pbtxt").read_text()
    assert f"max_batch_size: {chosen['batch']}" in text and f"count: {chosen['instances']}" in text
    assert f"max_queue_delay_microseconds: {chosen['max_queue_delay_us']}" in text


def test_fp8_only_for_a_model_with_fp8_gemms(model, tmp_path):
    # A float model: fp8 is skipped with the reason. A model carrying Fp8Gemm nodes: fp8 points
    # run, and the config the server loads says fp8.
    r = tune([str(model), "--precision", "fp8", "--precision", "fp32", "--max-batch", "1", "--iterations", "1",
              "--output-dir", str(tmp_path / "a"), "--json"])
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert {p["precision"] for p in j["points"]} == {"fp32"}
    assert any(n.startswith("fp8: not searched: the model has no Fp8Gemm nodes") for n in j["notes"]), j["notes"]
    from onnx import TensorProto, helper, numpy_helper
    w = (np.random.default_rng(0).integers(0, 0x70, (16, 32))).astype(np.uint8)  # finite e4m3 patterns
    g = helper.make_graph([helper.make_node("Fp8Gemm", ["a", "w"], ["y"], domain="ai.gpuopt", a_scale=0.01, b_scale=0.02)],
                          "fp8", [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])],
                          [numpy_helper.from_array(w, "w")])
    path = tmp_path / "fp8.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.gpuopt", 1)],
                                ir_version=8), str(path))
    r = tune([str(path), "--precision", "fp8", "--max-batch", "2", "--iterations", "1", "--output-dir",
              str(tmp_path / "b"), "--json"])
    assert r.returncode == 0, r.stdout + r.stderr
    j = json.loads(r.stdout)
    assert [p["batch"] for p in j["points"]] == [1, 2] and all(p["ok"] and p["precision"] == "fp8" for p in j["points"])
    assert 'string_value: "fp8"' in j["config_pbtxt"]


def test_int8_only_where_the_model_is_quantized(model, tmp_path):
    # resnet_small has no quantized nodes: int8 is skipped with the reason, fp32 still searched.
    r = tune([str(model), "--precision", "int8", "--precision", "fp32", "--max-batch", "2", "--iterations", "2",
              "--output-dir", str(tmp_path / "a"), "--json"])
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert {p["precision"] for p in j["points"]} == {"fp32"}
    assert any(n.startswith("int8: not searched: the model has no quantized nodes") for n in j["notes"])
    # A Q/DQ model: int8 points run at the session's int8, and the config the server loads says int8.
    from onnx import TensorProto, helper, numpy_helper
    w = np.random.default_rng(0).standard_normal((32, 16)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]), helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
         helper.make_node("MatMul", ["d", "w"], ["y"])],
        "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])],
        [numpy_helper.from_array(np.array(0.05, np.float32), "s"), numpy_helper.from_array(np.array(0, np.int8), "z"),
         numpy_helper.from_array(w, "w")])
    path = tmp_path / "qdq.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    r = tune([str(path), "--precision", "int8", "--max-batch", "4", "--iterations", "2", "--output-dir", str(tmp_path / "b"),
              "--json"])
    assert r.returncode == 0, r.stdout + r.stderr
    j = json.loads(r.stdout)
    assert [p["batch"] for p in j["points"]] == [1, 2, 4] and all(p["ok"] and p["precision"] == "int8" for p in j["points"])
    assert 'string_value: "int8"' in j["config_pbtxt"] and 'string_value: "fp32"' not in j["config_pbtxt"]


def test_kernel_settings_reach_the_written_config(model, tmp_path):
    """tune --kernel: the sessions it times run with the setting, and the config.pbtxt it writes
    carries it (gpuopt.kernel.NAME), which serve reads: the repository loads and answers like ONNX
    Runtime with every fusion off."""
    out = tmp_path / "out"
    r = tune([str(model), "--max-batch", "2", "--iterations", "2", "--kernel", "GPUOPT_DISABLE_FUSION=all",
              "--output-dir", str(out), "--json"])
    assert r.returncode == 0, r.stdout + r.stderr
    j = json.loads(r.stdout)
    assert 'key: "gpuopt.kernel.GPUOPT_DISABLE_FUSION"' in j["config_pbtxt"], j["config_pbtxt"]
    assert 'string_value: "all"' in j["config_pbtxt"], j["config_pbtxt"]
    with H.Server(["--model-repository", str(out / "repository")]) as s:
        c = httpclient.InferenceServerClient(s.url)
        params = c.get_model_config("resnet_small")["parameters"]
        assert params["gpuopt.kernel.GPUOPT_DISABLE_FUSION"]["string_value"] == "all", params
        x = np.random.default_rng(2).standard_normal((1, 3, 64, 64)).astype(np.float32)
        inp = httpclient.InferInput("input", x.shape, "FP32")
        inp.set_data_from_numpy(x)
        got = c.infer("resnet_small", [inp]).as_numpy("logits")
        want = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
