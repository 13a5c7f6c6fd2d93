"""Real exporter graphs (tests/data/exported: BERT, GPT-2 and torchvision ViT, two layers each, both
torch exporters) on the CPU reference against ONNX Runtime, and what the passes make of them with
a symbolic batch, as a run sees them: the attention fused into one node per layer and no
head-split Transpose left -- BERT and GPT-2 from both exporters (shape inference follows the
Reshape targets computed from Shape; sink_transposes composes the dynamo exporter's K^T chain),
torchvision's ViT (nn.MultiheadAttention, sequence-first, packed q/k/v) with only its patch
embedding's Transpose."""

import numpy as np
import onnxruntime as ort
import pytest

from gpuopt_cli import ROOT, op_counts, run_gpuopt

DATA = f"{ROOT}/tests/data/exported"
MODELS = [f"{m}_{e}" for m in ("bert_tiny", "gpt2_tiny", "vit_tiny_tv") for e in ("legacy", "dynamo")]


def feeds_for(path, batch=3):
    rng = np.random.default_rng(7)
    feeds = {}
    for i in ort.InferenceSession(path, providers=["CPUExecutionProvider"]).get_inputs():
        if i.name == "input":
            feeds[i.name] = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
        elif i.name == "attention_mask":
            m = np.ones((batch, 16), np.int64)
            m[1:, -5:] = 0  # padded tails, one row without
            feeds[i.name] = m
        else:
            feeds[i.name] = rng.integers(0, 256, (batch, 16)).astype(np.int64)
    return feeds


@pytest.mark.parametrize("name", MODELS)
def test_matches_onnx_runtime(name, tmp_path):
    path = f"{DATA}/{name}.onnx"
    feeds = feeds_for(path)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    out = tmp_path / "out"
    run_gpuopt(path, feeds, out)
    got = np.load(sorted(out.glob("*.npy"))[0])
    assert got.shape == want.shape
    err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    assert err <= 1e-5, f"{name}: rel L2 {err:.2e} against ONNX Runtime"




@pytest.mark.parametrize("name", MODELS)
def test_attention_is_one_node_per_layer(name):
    ops = op_counts(f"{DATA}/{name}.onnx")
    assert ops.get("Attention") == 2, ops
    assert "Softmax" not in ops, ops


@pytest.mark.parametrize("name", MODELS)
def test_head_splits_are_read_in_place(name):
    ops = op_counts(f"{DATA}/{name}.onnx")
    # ViT: the patch embedding's [B, C, P] -> [B, P, C] stays (the conv is NCHW); none per layer.
    assert ops.get("Transpose", 0) == (1 if name.startswith("vit") else 0), ops
    # BERT: the per-layer attention mask built once (common subexpressions).
    if name.startswith("bert"):
        assert ops.get("Where", 0) <= 2 + 1 + 2, ops  # token types, one mask, a NaN guard per layer


@pytest.mark.parametrize("name", ["vit_tiny_tv_legacy", "vit_tiny_tv_dynamo", "bert_tiny_dynamo"])
def test_transpose_sinking_is_what_removes_them(name):
    """GPUOPT_DISABLE_FUSION=transpose turns sink_transposes off: the Transposes are back."""
    ops = op_counts(f"{DATA}/{name}.onnx", env={"GPUOPT_DISABLE_FUSION": "transpose"})
    assert ops.get("Transpose", 0) >= 2 + (1 if name.startswith("vit") else 0), ops


@pytest.mark.parametrize("name", MODELS)
def test_qkv_projections_are_one_gemm_per_layer(name):
    """merge_qkv: each layer's Q, K and V projections (BERT's three Linears; GPT-2's c_attn and ViT's
    in_proj, which transpose sinking cut into parts) are one GEMM that the Attention node reads in
    place: two GEMMs fewer per layer than with the pass off, and no Split copying the parts out
    (test_matches_onnx_runtime checks the output with the pass on)."""
    path = f"{DATA}/{name}.onnx"

    def gemms(ops):
        return sum(ops.get(k, 0) for k in ("MatMul", "Gemm", "FusedGemm"))

    on = op_counts(path)
    off = op_counts(path, env={"GPUOPT_DISABLE_FUSION": "merge_qkv"})
    assert gemms(off) - gemms(on) == 2 * 2, (on, off)
    assert "Split" not in on, on
    assert on.get("Attention") == 2, on
