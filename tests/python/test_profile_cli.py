"""`gpuopt profile` and `gpuopt run --trace`: the Chrome trace-event file is schema-valid (phases,
fields, timestamps in order per track, proper nesting on the host track), every node appears
once per run, the summary's per-node times add up to the run within 5%, FLOPs and bytes of a
MatMul match the arithmetic, and the roofline class follows the ceilings file."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from gpuopt_cli import ROOT, gpuopt_bin
sys.path.insert(0, os.path.join(ROOT, "tools", "models"))
from archs import ARCHS  # noqa: E402

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def run(args, **kw):
    return subprocess.run([gpuopt_bin()] + args, capture_output=True, text=True, timeout=600, **kw)


def check_trace(trace):
    """Chrome trace-event format: what Perfetto and chrome://tracing read."""
    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list)
    tracks = {}
    last = {}
    stacks = {}
    for e in trace["traceEvents"]:
        assert e["ph"] in ("X", "M", "C"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and isinstance(e["name"], str)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "thread_sort_index")
            if e["name"] == "thread_name":
                tracks[(e["pid"], e["tid"])] = e["args"]["name"]
            continue
        if e["ph"] != "X":
            continue
        key = (e["pid"], e["tid"])
        assert key in tracks, f"event on an unnamed track: {e}"
        assert e["dur"] >= 0 and e["ts"] >= 0
        assert e["ts"] >= last.get(key, 0.0), f"timestamps go back on {tracks[key]}: {e}"
        last[key] = e["ts"]
        # Complete events on one track nest or follow each other, never overlap partly.
        st = stacks.setdefault(key, [])
        while st and e["ts"] >= st[-1] - 1e-3:
            st.pop()
        if st:
            assert e["ts"] + e["dur"] <= st[-1] + 1e-3, f"{e} overlaps its enclosing event on {tracks[key]}"
        st.append(e["ts"] + e["dur"])
    return tracks


def test_profile_trace_and_summary(tmp_path):
    model, _ = ARCHS["resnet_small"]()
    path = tmp_path / "resnet_small.onnx"
    onnx.save(model, str(path))
    trace_path = tmp_path / "t.json"
    r = run(["profile", str(path), "--batch", "4", "--runs", "2", "--warmup", "1", "--top", "5", "--trace", str(trace_path),
             "--json"])
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.loads(r.stdout)
    assert s["runs"] == 2 and s["batch"] == 4 and s["device"] == "cpu"
    assert len(s["top"]) == 5
    assert [n["time_us"] for n in s["nodes"]] == sorted((n["time_us"] for n in s["nodes"]), reverse=True)
    # The nodes account for the run: per-node time sums to the run time within 5% (the rest is
    # the host gaps, reported as such).
    assert abs(sum(n["wall_us"] for n in s["nodes"]) - s["node_wall_us"]) <= 1e-6 * s["node_wall_us"]
    assert s["node_wall_us"] <= s["run_us"] * 1.0001
    assert s["node_wall_us"] >= 0.95 * s["run_us"], s
    assert abs(s["host_gap_share"] - (1 - s["node_wall_us"] / s["run_us"])) < 1e-9
    assert abs(sum(n["share"] for n in s["nodes"]) - 1) < 1e-9

    trace = json.loads(trace_path.read_text())
    tracks = check_trace(trace)
    assert "host" in tracks.values()
    # Every node once per run, and the same nodes as `run --profile` lists (the executor's own list).
    ref = run(["run", str(path), "--random-inputs", "--batch", "4", "--iterations", "1", "--profile", "--json"])
    assert ref.returncode == 0, ref.stderr
    names = sorted(n["node"] for n in json.loads(ref.stdout)["profile"]["nodes"])
    for k in (1, 2):
        got = sorted(e["name"] for e in trace["traceEvents"]
                     if e["ph"] == "X" and e["cat"] in ("node cpu", "launch") and e["args"]["run"] == k)
        assert got == names
    runs = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "run"]
    assert len(runs) == 2
    assert abs(sum(e["dur"] for e in runs) / 2 - s["run_us"]) <= 1e-3 * s["run_us"]
    steps = [e["name"] for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "load"]
    assert steps == ["import", "compile"]
    conv = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["args"].get("op") in ("Conv", "FusedConv")]
    assert conv and all(e["args"]["flops"] > 0 and e["args"]["bytes"] > 0 and "[4," in e["args"]["shapes"] for e in conv)

    # The table for people names the same top node.
    text = run(["profile", str(path), "--batch", "4", "--warmup", "1", "--no-trace"])
    assert text.returncode == 0, text.stderr
    assert "top 10 nodes" in text.stdout and "host gaps" in text.stdout


def matmul_model(path, k=256, n=512):
    w = np.random.default_rng(0).standard_normal((k, n)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"), helper.make_node("Relu", ["y"], ["z"], name="relu")],
        "mm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", k])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", n])], [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_profile_flops_bytes_and_roofline(tmp_path):
    path = tmp_path / "mm.onnx"
    matmul_model(path)
    ceilings = tmp_path / "bench.json"
    # Ridge at 10 FLOP/byte: the MatMul (about 50 FLOP/byte at batch 64) is compute-bound, the
    # Relu (at most one FLOP per 8 bytes moved) memory-bound.
    ceilings.write_text(json.dumps({"device": {"name": "test"}, "sections": [
        {"name": "memory", "results": [{"test": "d2d_copy_kernel", "unit": "GB/s", "value": 100.0}]},
        {"name": "compute", "results": [{"test": "gemm_f32", "unit": "TFLOP/s", "value": 1.0}]}]}))
    r = run(["profile", str(path), "--batch", "64", "--warmup", "1", "--ceilings", str(ceilings), "--no-trace", "--json"])
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.loads(r.stdout)
    nodes = {n["node"]: n for n in s["nodes"]}
    mm, relu = nodes["mm"], nodes["relu"]
    b, k, n = 64, 256, 512
    assert mm["flops"] == 2 * b * k * n
    assert mm["bytes"] == 4 * (b * k + k * n + b * n)
    assert relu["bytes"] == 4 * 2 * b * n
    assert mm["bound"] == "compute" and relu["bound"] == "memory"
    assert abs(mm["TFLOPs"] - mm["flops"] / (mm["time_us"] * 1e-6) / 1e12) <= 1e-9 + 1e-6 * mm["TFLOPs"]
    assert abs(mm["percent_of_roof"] - 100 * mm["TFLOPs"] / 1.0) < 1e-6 * max(1.0, mm["percent_of_roof"])
    assert s["ceilings"]["bandwidth_GBps"] == 100.0
    # On the CPU there are no kernels to record and nothing tries CUPTI.
    assert s["kernels"] == [] and s["kernels_recorded"] is False and s["kernels_note"] is None
    assert "kernel names" not in r.stderr, r.stderr

    bad = tmp_path / "bad.json"
    bad.write_text("{\"sections\": []}")
    r = run(["profile", str(path), "--ceilings", str(bad), "--no-trace"])
    assert r.returncode == 1, r.stderr  # a file that cannot be used: a runtime error (docs/cli.md)
    assert "no memory bandwidth or GEMM rows" in r.stderr and str(bad) in r.stderr


def test_run_trace(tmp_path):
    path = tmp_path / "mm.onnx"
    matmul_model(path)
    trace_path = tmp_path / "run.json"
    r = run(["run", str(path), "--random-inputs", "--batch", "8", "--iterations", "2", "--trace", str(trace_path)])
    assert r.returncode == 0, r.stderr
    trace = json.loads(trace_path.read_text())
    check_trace(trace)
    names = [e["name"] for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] in ("node cpu", "launch")]
    assert sorted(names) == ["mm", "relu"]
    r = run(["run", str(path), "--random-inputs", "--trace", str(tmp_path / "no" / "such" / "dir.json")])
    assert r.returncode == 1 and "cannot open for writing" in r.stderr


def test_inspect_and_profile_count_the_same_flops(tmp_path):
    """One FLOP count (engine/analysis.h node_costs) behind both commands: inspect --optimized and
    profile on the same graph at the same batch give the arithmetic of the two MatMuls, and the
    shape arithmetic in front of the Reshape (folded once the batch is bound) costs nothing."""
    b, k, n1, n2 = 6, 32, 16, 8
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((k, n1)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((n1, n2)).astype(np.float32), "w2")
    minus1 = numpy_helper.from_array(np.array([-1], np.int64), "minus1")
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    g = helper.make_graph([
        helper.make_node("Shape", ["x"], ["sx"], name="shape"),
        helper.make_node("Gather", ["sx", "zero"], ["n"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["n", "zero"], ["n1"], name="unsq"),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["xr"], name="reshape"),
        helper.make_node("MatMul", ["xr", "w1"], ["h"], name="mm1"),
        helper.make_node("MatMul", ["h", "w2"], ["y"], name="mm2")],
        "two_mm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", n2])], [w1, w2, minus1, zero])
    path = tmp_path / "two_mm.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    expected = 2 * b * k * n1 + 2 * b * n1 * n2

    r = run(["inspect", str(path), "--optimized", "--device", "cpu", "--batch", str(b), "--json"])
    assert r.returncode == 0, r.stdout + r.stderr
    inspected = json.loads(r.stdout)
    assert inspected["flops_total"] == expected and inspected["flops_exact"] is True
    per_op = {o["op"]: o["flops"] for o in inspected["ops"]}
    assert per_op["MatMul"] == expected

    r = run(["profile", str(path), "--device", "cpu", "--batch", str(b), "--warmup", "1", "--no-trace", "--json"])
    assert r.returncode == 0, r.stdout + r.stderr
    profiled = {n["node"]: n for n in json.loads(r.stdout)["nodes"]}
    assert profiled["mm1"]["flops"] == 2 * b * k * n1 and profiled["mm2"]["flops"] == 2 * b * n1 * n2
    assert sum(n["flops"] for n in profiled.values()) == inspected["flops_total"]
