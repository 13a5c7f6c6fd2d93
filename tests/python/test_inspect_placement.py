"""`gpuopt inspect MODEL --device cuda`: per op type, how many nodes run on CUDA and how many fall
back to the CPU, and one line per op type naming the CPU nodes and why (the warning a CUDA run
prints). Det (no CUDA kernel) is on the CPU and Relu/Mul are on the GPU; without a CUDA device the
CUDA op table decides the same (the report says so). In a build without CUDA the report says
placement needs a CUDA device and still exits 0 with the rest of the report. `--device cpu` (the fast CPU backend) names the ops its own kernels
take; `cpu-ref` runs every op on the reference kernels.
"""
import json
import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from gpuopt_cli import gpuopt_bin


def make_model(path):
    two = numpy_helper.from_array(np.array(2, dtype=np.float32), "two")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Det", ["r"], ["i"], name="det"),
        helper.make_node("Mul", ["i", "two"], ["y"], name="double"),
    ]
    g = helper.make_graph(nodes, "placement", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [two])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_placement_text_and_json(tmp_path):
    path = tmp_path / "m.onnx"
    make_model(path)
    r = subprocess.run([gpuopt_bin(), "inspect", str(path), "--device", "cuda"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Det" in r.stdout  # the rest of the report is there
    rj = subprocess.run([gpuopt_bin(), "inspect", str(path), "--device", "cuda", "--json"], capture_output=True, text=True,
                        timeout=120)
    assert rj.returncode == 0, rj.stdout + rj.stderr
    p = json.loads(rj.stdout)["placement"]
    assert p["device"] == "cuda"
    if "error" in p:  # no CUDA in the build
        assert "placement needs a CUDA device" in r.stdout, r.stdout
        return
    if p.get("source") == "op table":  # no device here: the op table's decision
        assert "from the op table: no device here" in r.stdout, r.stdout
    want = "cuda: 1 node runs on the CPU inside the GPU graph: [Det] 'det' (no CUDA kernel for Det)"
    assert p["fallbacks"] == [want], p["fallbacks"]
    assert want in r.stdout.splitlines(), r.stdout
    ops = {o["op"]: (o["on_device"], o["on_cpu"]) for o in p["ops"]}
    assert ops["Det"] == (0, 1)
    assert ops["Relu"] == (1, 0)
    assert ops["Mul"] == (1, 0)
    assert (p["on_device"], p["on_cpu"]) == (2, 1)
    assert "cpu (fallback)" in r.stdout


def test_placement_on_cpu_ref_is_all_on_device(tmp_path):
    path = tmp_path / "m.onnx"
    make_model(path)
    r = subprocess.run([gpuopt_bin(), "inspect", str(path), "--device", "cpu-ref", "--json"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    p = json.loads(r.stdout)["placement"]
    assert (p["on_device"], p["on_cpu"]) == (3, 0)


def test_placement_on_cpu_names_the_fast_kernels(tmp_path):
    # The fast CPU backend has f32 Relu and Mul kernels; Det stays on the reference kernels.
    path = tmp_path / "m.onnx"
    make_model(path)
    r = subprocess.run([gpuopt_bin(), "inspect", str(path), "--device", "cpu", "--json"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    p = json.loads(r.stdout)["placement"]
    ops = {o["op"]: (o["on_device"], o["on_cpu"]) for o in p["ops"]}
    assert ops == {"Relu": (1, 0), "Mul": (1, 0), "Det": (0, 1)}, ops
