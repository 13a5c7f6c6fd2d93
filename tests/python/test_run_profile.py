"""`gpuopt run --profile`: one extra run node by node, time per op type and the slowest nodes.

Every node in the list has a positive time, the per-op sums add up to the node list, and on a
MatMul-heavy model the CPU reference spends most of its time in matrix products.
"""
import json
import os
import subprocess
import sys

from gpuopt_cli import ROOT, gpuopt_bin
sys.path.insert(0, os.path.join(ROOT, "tools", "models"))
from archs import ARCHS  # noqa: E402


def test_profile_covers_every_node(tmp_path):
    import onnx
    model, _ = ARCHS["gpt_block"]()
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    r = subprocess.run([gpuopt_bin(), "run", str(path), "--random-inputs", "--dim", "sequence=16", "--iterations", "1",
                        "--device", "cpu-ref", "--profile", "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    prof = json.loads(r.stdout)["profile"]
    nodes, ops = prof["nodes"], prof["ops"]
    assert all(n["wall_us"] > 0 and n["device"] == "cpu" for n in nodes)
    assert sum(o["nodes"] for o in ops) == len(nodes)
    by_op = {}
    for n in nodes:
        by_op[n["op"]] = by_op.get(n["op"], 0.0) + n["wall_us"]
    for o in ops:
        assert abs(o["wall_us"] - by_op[o["op"]]) <= 1e-6 * max(1.0, by_op[o["op"]])
    assert ops == sorted(ops, key=lambda o: -o["wall_us"])  # slowest op type first
    # Matrix products (MatMul, Gemm where a Linear layer's MatMul + bias Add were fused, FusedGemm with its activation)
    # dominate a transformer block on the CPU reference (--device cpu-ref; the fast backend's GEMMs
    # take so little of this tiny block that the elementwise ops and shape arithmetic weigh as much).
    products = sum(o["wall_us"] for o in ops if o["op"] in ("MatMul", "Gemm", "FusedGemm"))
    assert products > 0.5 * sum(o["wall_us"] for o in ops), ops[:4]

    text = subprocess.run([gpuopt_bin(), "run", str(path), "--random-inputs", "--dim", "sequence=16", "--iterations", "1",
                           "--profile"], capture_output=True, text=True, timeout=300)
    assert text.returncode == 0, text.stderr
    assert "profile: one run, node by node" in text.stdout
    assert "slowest nodes" in text.stdout
