"""The static memory plan and `gpuopt inspect --optimized`'s report of what the compiler did.

1. The plan that `inspect --optimized --json --verbose` prints for each generated architecture
   (tools/models/archs.py) is checked here independently: lifetimes and view chains are recomputed
   from the nodes' edges, then no two tensors whose lifetimes overlap share a byte (unless one is a
   view of the other), offsets are 256-byte aligned, and the arena lies between the most bytes live
   at one step and the sum of all activations.
2. The CPU executor with the plan (GPUOPT_MEMORY_PLAN=static, its default) gives the same outputs
   as without it (pool) and as ONNX Runtime; the peak of activation bytes of both is printed.
3. The report's fusion counts agree with counts made here from the ONNX graph: a hand-made CNN
   (Conv+Relu, Conv+BN+Add+Relu, Conv+Add, a Conv read twice that must not fuse) and the generated
   transformers (one Softmax per attention, one Erf per GELU, MatMul+bias pairs).
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from gpuopt_cli import ROOT, gpuopt_bin, run_gpuopt
sys.path.insert(0, os.path.join(ROOT, "tools", "models"))
from archs import ARCHS  # noqa: E402

VIEW_OPS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}
MODELS = [n for n in ARCHS if not n.endswith(("_full", "_base"))]


def inspect(path, *extra, env=None):
    args = [gpuopt_bin(), "inspect", str(path), "--optimized", "--json", "--verbose", "--batch", "2", *extra]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def dims_for(model):
    names = {d.dim_param for i in model.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param}
    return ["--dim", "sequence=16"] if "sequence" in names else []


def check_plan(compiled):
    nodes, mp = compiled["nodes"], compiled["memory_plan"]
    producer, last_read = {}, {}
    for i, n in enumerate(nodes):
        for o in n["outputs"]:
            if o:
                producer[o] = i
        for v in n["inputs"]:
            if v:
                last_read[v] = i

    def root_of(v):
        while v in producer and nodes[producer[v]]["op"] in VIEW_OPS and nodes[producer[v]]["inputs"][0]:
            v = nodes[producer[v]]["inputs"][0]
        return v

    life = {}
    for v, p in producer.items():
        r = root_of(v)
        first, last = life.get(r, (producer.get(r, -1), producer.get(r, -1)))
        life[r] = (first, max(last, last_read.get(v, p)))
    tensors = {t["name"]: t for t in mp["tensors"]}
    arena, align = mp["arena_bytes"], mp["alignment"]
    assert align == 256
    for t in tensors.values():
        assert t["offset"] % align == 0 and t["bytes"] % align == 0, t
        assert t["offset"] + t["bytes"] <= arena, t
        r = root_of(t["name"])
        assert (t["view_of"] or t["name"]) == r, f"{t['name']}: plan says view of {t['view_of']!r}, the edges say {r!r}"
        assert (t["first"], t["last"]) == life[r], f"{t['name']}: plan lifetime {(t['first'], t['last'])} vs {life[r]}"
    roots = [t for t in tensors.values() if not t["view_of"]]
    for i, a in enumerate(roots):
        for b in roots[i + 1:]:
            time = a["first"] <= b["last"] and b["first"] <= a["last"]
            space = a["offset"] < b["offset"] + b["bytes"] and b["offset"] < a["offset"] + a["bytes"]
            assert not (time and space), f"{a} and {b} overlap in time and bytes"
    total = sum(t["bytes"] for t in roots)
    most = max([sum(t["bytes"] for t in roots if t["first"] <= s <= t["last"]) for s in range(len(nodes))] or [0])
    assert total == mp["activation_bytes"]
    assert most <= arena <= total, (most, arena, total)
    assert most == mp["peak_live_bytes"]
    return arena, total, len(roots)


@pytest.mark.parametrize("name", MODELS)
def test_plan_of_generated_model_passes_the_independent_check(name, tmp_path):
    model, _ = ARCHS[name]()
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    compiled = inspect(path, *dims_for(model))["compile"]
    arena, total, buffers = check_plan(compiled)
    assert buffers > 0 and arena < total, f"{name}: no reuse ({arena} of {total} bytes)"
    print(f"{name}: arena {arena} B for {total} B of activations in {buffers} buffers ({100 * arena / total:.0f}%)")


def outputs(d):
    return {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d))}


@pytest.mark.parametrize("name", MODELS)
def test_cpu_executor_with_the_plan_matches_pool_and_onnxruntime(name, tmp_path):
    model, feeds_of = ARCHS[name]()
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    feeds = feeds_of(np.random.default_rng(5), 3)
    peaks, outs = {}, {}
    for mode in ("static", "pool"):
        d = tmp_path / mode
        d.mkdir()
        env = dict(os.environ, GPUOPT_MEMORY_PLAN=mode)
        run_gpuopt(path, feeds, d / "out", env=env)
        outs[mode] = outputs(d / "out")
        args = [gpuopt_bin(), "run", str(path), "--iterations", "2", "--warmup", "0", "--json"]
        for k in feeds:
            args += ["--input", f"{k}={d / (k + '.npy')}"]
        r = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        peaks[mode] = json.loads(r.stdout)["peak_intermediate_bytes"]
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for o, want in zip(ref.get_outputs(), ref.run(None, feeds)):
        s, p = outs["static"][o.name], outs["pool"][o.name]
        assert np.array_equal(s, p), f"{o.name}: static and pool differ"
        assert s.shape == want.shape
        assert float(np.max(np.abs(s.astype(np.float64) - want))) <= 1e-4
    print(f"{name} batch 3: peak activation bytes pool {peaks['pool']}, static {peaks['static']} "
          f"({100 * peaks['static'] / peaks['pool']:.0f}%)")


def conv_model(path):
    rng = np.random.default_rng(0)
    init = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n) for n, s in
            [("w1", (8, 3, 3, 3)), ("w2", (8, 8, 3, 3)), ("w3", (8, 8, 3, 3)), ("w4", (8, 8, 3, 3))]]
    init += [numpy_helper.from_array(v.astype(np.float32), n) for n, v in
             [("scale", rng.uniform(0.5, 1.5, 8)), ("bias", rng.standard_normal(8)), ("mean", rng.standard_normal(8)),
              ("var", rng.uniform(0.5, 1.5, 8))]]
    c = dict(pads=[1, 1, 1, 1])
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", **c),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", **c),
        helper.make_node("BatchNormalization", ["c2", "scale", "bias", "mean", "var"], ["b2"], name="bn2"),
        helper.make_node("Add", ["b2", "r1"], ["a2"], name="add2"),
        helper.make_node("Relu", ["a2"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", "w3"], ["c3"], name="conv3", **c),
        helper.make_node("Add", ["c3", "r2"], ["a3"], name="add3"),
        helper.make_node("Conv", ["a3", "w4"], ["c4"], name="conv4", **c),  # read twice: stays a Conv
        helper.make_node("Relu", ["c4"], ["r4"], name="relu4"),
        helper.make_node("Add", ["r4", "c4"], ["y"], name="out"),
    ]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], init)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_report_counts_conv_fusions_and_epilogues(tmp_path):
    path = tmp_path / "cnn.onnx"
    conv_model(path)
    j = inspect(path)
    c = j["compile"]
    by_node = {f["node"]: f for f in c["fusions"]}
    assert c["fusion_counts"] == {"conv": 3}, c["fusion_counts"]
    assert {n: f["epilogue"] for n, f in by_node.items()} == {"conv1": "Relu", "conv2": "Add+Relu", "conv3": "Add"}
    assert all(f["op"] == "com.microsoft:FusedConv" for f in by_node.values())
    assert c["batchnorms_folded"] == 1
    ops = [n["op"] for n in c["nodes"]]
    assert ops.count("Conv") == 1 and ops.count("com.microsoft:FusedConv") == 3
    assert c["nodes_before"] == 11 and c["nodes_after"] == len(c["nodes"]) == 6  # 3 FusedConv, Conv, Relu, Add
    assert all(n["layout"] == "NCHW" and n["precision"] == "f32" for n in c["nodes"])
    # The table says the same.
    r = subprocess.run([gpuopt_bin(), "inspect", str(path), "--optimized"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "conv: Conv+Add+Relu" in r.stdout and "fusions   3 conv" in r.stdout
    assert "memory    arena" in r.stdout
    # GPUOPT_DISABLE_FUSION=conv: no conv fusion reported.
    off = inspect(path, env=dict(os.environ, GPUOPT_DISABLE_FUSION="conv"))["compile"]
    assert off["fusion_counts"] == {} and [n["op"] for n in off["nodes"]].count("Conv") == 4


def count_linear(model):
    """MatMul with a constant weight whose only reader is an Add of a constant bias."""
    inits = {i.name for i in model.graph.initializer}
    readers = {}
    for n in model.graph.node:
        for v in n.input:
            readers.setdefault(v, []).append(n)
    k = 0
    for n in model.graph.node:
        if n.op_type == "MatMul" and n.input[1] in inits:
            r = readers.get(n.output[0], [])
            if len(r) == 1 and r[0].op_type == "Add" and any(v in inits for v in r[0].input if v != n.output[0]):
                k += 1
    return k


@pytest.mark.parametrize("name", ["bert", "vit_tiny", "gpt_block"])
def test_report_counts_transformer_fusions(name, tmp_path):
    model, _ = ARCHS[name]()
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    c = inspect(path, *dims_for(model))["compile"]
    ops = [n.op_type for n in model.graph.node]
    # Each GELU here follows a linear layer: MatMul+Add+Gelu becomes one FusedGemm, reported
    # as gemm_activation (not also as matmul_bias and gelu).
    # The erf form has one Erf; the tanh form one Tanh that feeds the Add of 1 + tanh(...).
    readers = {v: n for n in model.graph.node for v in n.input}
    gelus = ops.count("Erf") + sum(1 for n in model.graph.node
                                   if n.op_type == "Tanh" and getattr(readers.get(n.output[0]), "op_type", "") == "Add")
    # Each attention's Q, K and V linears (self-attention in these models) are one Gemm (merge_qkv).
    want = {"attention": ops.count("Softmax"), "matmul_bias": count_linear(model) - gelus - 3 * ops.count("Softmax"),
            "gemm_activation": gelus, "merge_qkv": ops.count("Softmax")}
    # Each fused residual Add + LayerNormalization is one LayerNormalization fewer in the plan.
    left = [n["op"] for n in c["nodes"]].count("LayerNormalization")
    want["skip_layernorm"] = ops.count("LayerNormalization") - left
    assert want["skip_layernorm"] > 0
    got = c["fusion_counts"]
    for k, v in want.items():
        assert got.get(k, 0) == v, f"{name} {k}: report {got.get(k, 0)}, ONNX graph {v} ({got})"
    assert [n["op"] for n in c["nodes"]].count("Attention") == want["attention"]


def test_bad_setting_is_one_line(tmp_path):
    path = tmp_path / "cnn.onnx"
    conv_model(path)
    r = subprocess.run([gpuopt_bin(), "run", str(path), "--random-inputs", "--iterations", "1"], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, GPUOPT_MEMORY_PLAN="arena"))
    assert r.returncode == 1, r.stdout + r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "GPUOPT_MEMORY_PLAN='arena': expected static or pool" in lines[0], r.stderr
