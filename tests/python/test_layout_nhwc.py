"""The channels-last layout pass seen from the CLI, on tools/models/archs.py's ResNet-50 and
MobileNetV2 (small widths): `gpuopt inspect --optimized --device cuda --precision fp16` lists what a
CUDA session runs (every conv NhwcFusedConv, the stem pool NhwcMaxPool, the global pool a
ReduceMean, two Transposes at the edges); GPUOPT_DISABLE_FUSION=nhwc, fp32 and the CPU device
leave the graph NCHW. No GPU needed for these. On a machine with a CUDA device the fp16 runs with
and without the pass are also compared with ONNX Runtime (skipped elsewhere).
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest

from gpuopt_cli import ROOT, gpuopt_bin
sys.path.insert(0, os.path.join(ROOT, "tools", "models"))
from archs import mobilenet_v2, resnet  # noqa: E402

MODELS = {
    "resnet50": lambda: resnet(50, width=8, size=48, classes=10),
    "mobilenet_v2": lambda: mobilenet_v2(width_mult=0.25, size=48, classes=10),
}


def inspect_ops(path, precision, device="cuda", off=None):
    env = dict(os.environ)
    env.pop("GPUOPT_DISABLE_FUSION", None)
    if off:
        env["GPUOPT_DISABLE_FUSION"] = off
    r = subprocess.run([gpuopt_bin(), "inspect", str(path), "--optimized", "--device", device, "--precision", precision,
                        "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return {o["op"]: o["count"] for o in json.loads(r.stdout)["ops"]}


def save(tmp_path, name):
    import onnx
    model, feeds_fn = MODELS[name]()
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    convs = sum(1 for n in model.graph.node if n.op_type == "Conv")
    return path, feeds_fn, convs


@pytest.mark.parametrize("name", list(MODELS))
def test_inspect_shows_the_channels_last_graph(name, tmp_path):
    path, _, convs = save(tmp_path, name)
    ops = inspect_ops(path, "fp16")
    assert ops.get("NhwcFusedConv") == convs, ops
    for gone in ("Conv", "FusedConv", "MaxPool", "GlobalAveragePool"):
        assert gone not in ops, ops
    assert ops.get("NhwcMaxPool", 0) == (1 if name == "resnet50" else 0), ops
    assert ops.get("ReduceMean") == 1, ops
    # Into the region: the input's Cast and entry Transpose as one ToNhwc (nhwc_entry), its RGB
    # channels padded to 4 for the stem conv; out of it once, after the pool.
    assert ops.get("ToNhwc") == 1 and ops.get("Cast") == 1, ops  # the Cast left: the output back to f32
    assert ops.get("Transpose") == 1, ops


@pytest.mark.parametrize("name", list(MODELS))
def test_switch_precision_and_device_keep_nchw(name, tmp_path):
    path, _, _ = save(tmp_path, name)
    for ops in (inspect_ops(path, "fp16", off="nhwc"), inspect_ops(path, "fp32"), inspect_ops(path, "fp16", "cpu")):
        assert not any(k.startswith("Nhwc") for k in ops), ops
        assert "Transpose" not in ops, ops
    # Only the listed pass goes: with conv fusion off the plain Convs still go channels-last.
    ops = inspect_ops(path, "fp16", off="conv")
    assert "NhwcFusedConv" in ops and "FusedConv" not in ops and "Conv" not in ops, ops


def cuda_run(path, feeds, out_dir, off):
    env = dict(os.environ)
    env.pop("GPUOPT_DISABLE_FUSION", None)
    if off:
        env["GPUOPT_DISABLE_FUSION"] = off
    out_dir.mkdir()
    args = [gpuopt_bin(), "run", str(path), "--device", "cuda", "--precision", "fp16", "--iterations", "3",
            "--output-dir", str(out_dir)]
    for k, v in feeds.items():
        np.save(out_dir.parent / f"{k}.npy", v)
        args += ["--input", f"{k}={out_dir.parent / f'{k}.npy'}"]
    return subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)


@pytest.mark.parametrize("name", list(MODELS))
def test_cuda_fp16_with_and_without_the_pass_matches_onnxruntime(name, tmp_path):
    path, feeds_fn, _ = save(tmp_path, name)
    feeds = feeds_fn(np.random.default_rng(3), 5)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    for off in (None, "nhwc"):
        r = cuda_run(path, feeds, tmp_path / f"out_{off}", off)
        if r.returncode != 0 and "device" in (r.stderr + r.stdout).lower() and "cuda" in (r.stderr + r.stdout).lower():
            pytest.skip("skipped: no CUDA device")
        assert r.returncode == 0, r.stderr
        got = np.load(tmp_path / f"out_{off}" / "logits.npy").astype(np.float64)
        err = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert err <= 1e-2, f"{name} fp16 (GPUOPT_DISABLE_FUSION={off}): relative L2 {err:.3g}"
