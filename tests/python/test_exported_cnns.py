"""Real exporter graphs of the CNN blocks the compare run measures (tests/data/exported: torchvision
ConvNeXt and EfficientNet blocks at 32x32, both torch exporters) on the CPU reference against ONNX
Runtime, and what the conv passes make of them: EfficientNet's SiLUs (Sigmoid + Mul as the
exporters write them) inside the convs' epilogues, ConvNeXt's layer-scale Mul folded into the
block's last Linear. Each fusion is also turned off by its GPUOPT_DISABLE_FUSION name and must
come back, so a count that cannot tell the two apart fails."""
import json
import os
import subprocess

import numpy as np
import onnxruntime as ort
import pytest

from gpuopt_cli import ROOT, gpuopt_bin, run_gpuopt

DATA = f"{ROOT}/tests/data/exported"
MODELS = [f"{m}_{e}" for m in ("convnext_tiny_tv", "efficientnet_tiny_tv") for e in ("legacy", "dynamo")]


@pytest.mark.parametrize("name", MODELS)
def test_matches_onnx_runtime(name, tmp_path):
    path = f"{DATA}/{name}.onnx"
    x = np.random.default_rng(3).standard_normal((3, 3, 32, 32)).astype(np.float32)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    out = tmp_path / "out"
    run_gpuopt(path, {"input": x}, out)
    got = np.load(sorted(out.glob("*.npy"))[0])
    assert got.shape == want.shape
    err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    assert err <= 1e-5, f"{name}: rel L2 {err:.2e} against ONNX Runtime"


def ops_run(path, env=None):
    """Op -> node count of the graph a run executes (`run --profile --json`, random inputs, batch 2)."""
    r = subprocess.run([gpuopt_bin(), "run", path, "--random-inputs", "--batch", "2", "--iterations", "1",
                        "--profile", "--json"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, **(env or {})})
    assert r.returncode == 0, r.stderr
    return {o["op"]: o["nodes"] for o in json.loads(r.stdout)["profile"]["ops"]}


@pytest.mark.parametrize("exporter", ["legacy", "dynamo"])
def test_efficientnet_silu_rides_in_the_convs(exporter):
    path = f"{DATA}/efficientnet_tiny_tv_{exporter}.onnx"
    off = ops_run(path, {"GPUOPT_DISABLE_FUSION": "conv"})
    on = ops_run(path)
    # Unfused: a Sigmoid per SiLU and per squeeze-excitation gate. Fused: only the gates' Sigmoids
    # stay (their Mul scales another tensor), one per block.
    assert off.get("Sigmoid", 0) > on.get("Sigmoid", 0) == 3, (off, on)
    assert off.get("Mul", 0) - on.get("Mul", 0) == off.get("Sigmoid", 0) - 3, (off, on)


@pytest.mark.parametrize("exporter", ["legacy", "dynamo"])
def test_convnext_layer_scale_folds_into_the_linear(exporter):
    path = f"{DATA}/convnext_tiny_tv_{exporter}.onnx"
    off = ops_run(path, {"GPUOPT_DISABLE_FUSION": "gemm_scale"})
    on = ops_run(path)
    assert off.get("Mul", 0) - on.get("Mul", 0) == 2, (off, on)  # one layer scale per block
