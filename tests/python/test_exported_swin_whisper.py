"""Real exporter graphs of a shifted-window vision transformer and a Whisper-style audio encoder
(tests/data/exported: torchvision SwinTransformer at 56x56 with a shifted block, transformers'
Whisper encoder with its 1-D conv stem; both torch exporters) on the CPU reference against ONNX
Runtime, and what the passes make of them: every Swin block's attention (the shifted one with its
mask) one Attention node, the window padding (zero for these sizes) and its crop gone, the
cyclic shift and the patch merging one copy each; the
Whisper encoder's two layers two Attention nodes. On CUDA (skipped without a GPU) each runs as one
CUDA graph and matches ONNX Runtime."""

import json
import os
import subprocess

import numpy as np
import onnxruntime as ort
import pytest

from gpuopt_cli import ROOT, cuda_device, gpuopt_bin, op_counts, run_gpuopt

DATA = f"{ROOT}/tests/data/exported"
SWIN = [f"swin_tiny_tv_{e}" for e in ("legacy", "dynamo")]
WHISPER = [f"whisper_tiny_encoder_{e}" for e in ("legacy", "dynamo")]


def feeds_for(name, batch=3):
    rng = np.random.default_rng(5)
    if name.startswith("swin"):
        return {"input": rng.standard_normal((batch, 3, 56, 56)).astype(np.float32)}
    return {"input_features": rng.standard_normal((batch, 16, 64)).astype(np.float32)}


def onnxruntime_output(path, feeds):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def rel_l2(got, want):
    return float(np.linalg.norm(got.astype(np.float64) - want) / np.linalg.norm(want))


@pytest.mark.parametrize("name", SWIN + WHISPER)
def test_matches_onnx_runtime(name, tmp_path):
    path = f"{DATA}/{name}.onnx"
    feeds = feeds_for(name)
    want = onnxruntime_output(path, feeds)
    out = tmp_path / "out"
    run_gpuopt(path, feeds, out)
    got = np.load(sorted(out.glob("*.npy"))[0])
    assert got.shape == want.shape
    err = rel_l2(got, want)
    assert err <= 1e-5, f"{name}: rel L2 {err:.2e} against ONNX Runtime"


@pytest.mark.parametrize("name", SWIN)
def test_every_swin_block_is_one_attention(name):
    """Four blocks (stage 1: plain and shifted; stage 2: one window, no shift), four Attention
    nodes; with the attention fusion off the Softmaxes are back."""
    path = f"{DATA}/{name}.onnx"
    ops = op_counts(path)
    assert ops.get("Attention") == 4, ops
    assert "Softmax" not in ops, ops
    assert "MatMul" not in ops or ops["MatMul"] <= 1, ops  # the patch merging's bias-free Linear
    off = op_counts(path, env={"GPUOPT_DISABLE_FUSION": "attention"})
    assert off.get("Softmax") == 4, off


@pytest.mark.parametrize("name", SWIN)
def test_window_movement_is_one_copy_each(name):
    """14x14 and 7x7 token maps are whole windows: the Pads pad nothing and the crops after the
    window reverse keep everything; neither is left to run. The cyclic shift (a Slice + Concat
    pair per axis, there and back) is one Gather each way, the patch merging (four parity Slices
    + Concat) one Transpose: no Slice is left. Each rewrite turned off brings its nodes back."""
    path = f"{DATA}/{name}.onnx"
    ops = op_counts(path)
    assert "Pad" not in ops, ops
    assert "Slice" not in ops, ops
    assert op_counts(path, env={"GPUOPT_DISABLE_FUSION": "roll"}).get("Slice", 0) == 8
    assert op_counts(path, env={"GPUOPT_DISABLE_FUSION": "space_to_depth"}).get("Slice", 0) >= 4


@pytest.mark.parametrize("name", WHISPER)
def test_whisper_layers_are_one_attention_each(name):
    ops = op_counts(f"{DATA}/{name}.onnx")
    assert ops.get("Attention") == 2, ops
    assert "Softmax" not in ops, ops


@pytest.mark.parametrize("precision,tol", [("fp32", 1e-4), ("fp16", 2e-2)])
@pytest.mark.parametrize("name", SWIN + WHISPER)
def test_runs_on_cuda_as_one_graph(name, precision, tol, tmp_path):
    if not cuda_device():
        pytest.skip("skipped: no CUDA device")
    path = f"{DATA}/{name}.onnx"
    feeds = feeds_for(name, batch=4)
    want = onnxruntime_output(path, feeds)
    out = tmp_path / "out"
    out.mkdir()
    args = [gpuopt_bin(), "run", path, "--device", "cuda", "--precision", precision, "--iterations", "3",
            "--warmup", "1", "--output-dir", str(out), "--json"]
    for k, v in feeds.items():
        np.save(tmp_path / f"{k}.npy", v)
        args += ["--input", f"{k}={tmp_path / f'{k}.npy'}"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    j = json.loads(r.stdout)
    assert j.get("execution") == "graph", j.get("execution_note")
    got = np.load(sorted(out.glob("*.npy"))[0])
    err = rel_l2(got, want)
    assert err <= tol, f"{name} {precision}: rel L2 {err:.2e} against ONNX Runtime"
