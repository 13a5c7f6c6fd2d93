"""`gpuopt generate --kv-cache-dtype fp16|fp8` on the CPU runner against numpy.

The oracle is test_llm_generate's float64 forward pass with the cache's rounding applied to the
rotated keys and the values (vLLM's convention for fp8: the cache holds e4m3(K / k_scale) and
e4m3(V / v_scale), read back times the scale, one scale per layer from the checkpoint's
`self_attn.k_scale` / `v_scale`, 1.0 without them). e4m3 rounding here is written from the format
(llm_quant_formats' table of the 256 codes, nearest value, ties to the even code, saturating at
448). Checked: greedy tokens equal numpy's, the first generated position's logits within 1e-4 of
the largest logit while the unrounded oracle is visibly further away; the scales are read; the
bytes per cached token halve from fp16 to fp8; a malformed scale exits 1 naming the tensor;
`gpuopt serve --kv-cache-dtype fp8` answers a greedy completion as the same oracle does.
"""
import os
import sys

import numpy as np
import pytest

safetensors_numpy = pytest.importorskip("safetensors.numpy")

sys.path.insert(0, os.path.dirname(__file__))
from test_llm_generate import PROMPT, forward, generate, gpuopt, greedy, make_model, one_line_error  # noqa: E402
from llm_quant_formats import E4M3  # noqa: E402

FINITE = E4M3[:127]  # codes 0x00..0x7e: the non-negative finite values, ascending


def to_e4m3(x):
    """Nearest e4m3 value (ties to the even code), saturating at 448."""
    a = np.minimum(np.abs(x), 448.0)
    i = np.clip(np.searchsorted(FINITE, a), 1, len(FINITE) - 1)
    lo, hi = FINITE[i - 1], FINITE[i]
    up = (a - lo > hi - a) | ((a - lo == hi - a) & (i % 2 == 0))
    return np.sign(x) * np.where(up, hi, lo)


def test_e4m3_rounding_oracle():
    # Exact values stay, midpoints go to the even code, beyond 448 saturates, subnormals exist.
    assert to_e4m3(np.array([1.0, 1.125, 448.0, 1000.0, -2 ** -9])).tolist() == [1.0, 1.125, 448.0, 448.0, -2 ** -9]
    assert to_e4m3(np.array([1.0625, 1.1875, 2 ** -10])).tolist() == [1.0, 1.25, 0.0]


def cached_e4m3(x):
    """to_e4m3 for the oracle's K/V: the runner computes them in f32, so a value within f32's
    error of a rounding midpoint could go either way; the models here have none."""
    a = np.minimum(np.abs(x), 448.0)
    i = np.clip(np.searchsorted(FINITE, a), 1, len(FINITE) - 1)
    mid = (FINITE[i - 1] + FINITE[i]) / 2
    assert np.min(np.abs(a - mid) / np.maximum(mid, 2 ** -10)) > 1e-5, "a near-midpoint: pick another seed"
    return to_e4m3(x)


def fp8_round(scales=None):
    def r(layer, k, v):
        ks, vs = scales[layer] if scales else (1.0, 1.0)
        return cached_e4m3(k / ks) * ks, cached_e4m3(v / vs) * vs
    return r


def fp16_round(layer, k, v):
    return k.astype(np.float16).astype(np.float64), v.astype(np.float16).astype(np.float64)


def check(tmp_path, cfg, W, kv_round, dtype, n=8):
    out, logits = generate(tmp_path / "m", PROMPT, n, "--ignore-eos", "--kv-cache-dtype", dtype, tmp=tmp_path)
    want, first = greedy(cfg, W, PROMPT, n, kv_round=kv_round)
    assert out["sequences"][0]["token_ids"] == want
    top = np.max(np.abs(first))
    err = np.max(np.abs(logits[0] - first)) / top
    assert err < 1e-4, err
    # The rounding is really there: the plain forward pass is further off than the bound.
    plain = forward(cfg, W, PROMPT)[-1]
    assert np.max(np.abs(logits[0] - plain)) / top > (1e-3 if dtype != "fp16" else 1e-6)
    return out


def test_fp8_cache_matches_numpy(tmp_path):
    cfg, W = make_model(tmp_path / "m")
    out = check(tmp_path, cfg, W, fp8_round(), "fp8")
    L, KV, D = cfg["num_hidden_layers"], cfg["num_key_value_heads"], cfg["hidden_size"] // cfg["num_attention_heads"]
    assert out["kv_cache"]["dtype"] == "fp8_e4m3"
    assert out["kv_cache"]["bytes_per_token"] == 2 * L * KV * D


def test_fp8_cache_reads_the_checkpoints_scales(tmp_path):
    cfg, W = make_model(tmp_path / "m")
    # Powers of two (the division is exact in f32 and float64 alike), large enough that the keys
    # and values fall among e4m3's subnormals and small ones that they saturate: a scale that is
    # not read changes the result.
    scales = {0: (8.0, 0.5), 1: (0.25, 4.0)}
    path = os.path.join(tmp_path, "m", "model.safetensors")
    T = safetensors_numpy.load_file(path)
    for layer, (ks, vs) in scales.items():
        T[f"model.layers.{layer}.self_attn.k_scale"] = np.array(ks, dtype=np.float32)
        T[f"model.layers.{layer}.self_attn.v_scale"] = np.array([vs], dtype=np.float32)
    safetensors_numpy.save_file(T, path, metadata={"format": "pt"})
    _, with_scales = generate(tmp_path / "m", PROMPT, 1, "--kv-cache-dtype", "fp8_e4m3", tmp=tmp_path)
    first_unscaled = forward(cfg, W, PROMPT, fp8_round())[-1]
    first_scaled = forward(cfg, W, PROMPT, fp8_round(scales))[-1]
    top = np.max(np.abs(first_scaled))
    assert np.max(np.abs(with_scales[0] - first_scaled)) / top < 1e-4
    assert np.max(np.abs(with_scales[0] - first_unscaled)) / top > 1e-3
    check(tmp_path, cfg, W, fp8_round(scales), "fp8")


def test_fp16_cache_matches_numpy_and_sizes(tmp_path):
    cfg, W = make_model(tmp_path / "m")
    out16 = check(tmp_path, cfg, W, fp16_round, "fp16")
    out32, _ = generate(tmp_path / "m", PROMPT, 1, "--kv-cache-dtype", "auto")
    out8, _ = generate(tmp_path / "m", PROMPT, 1, "--kv-cache-dtype", "fp8")
    assert out16["kv_cache"]["dtype"] == "fp16" and out32["kv_cache"]["dtype"] == "auto"
    # The CPU computes in f32: auto caches 4 bytes an element, fp16 2, fp8 1.
    assert out32["kv_cache"]["bytes_per_token"] == 2 * out16["kv_cache"]["bytes_per_token"]
    assert out16["kv_cache"]["bytes_per_token"] == 2 * out8["kv_cache"]["bytes_per_token"]


@pytest.mark.parametrize("value", [[1.0, 2.0], [-1.0], [0.0]], ids=["two", "negative", "zero"])
def test_malformed_kv_scale_exits_1_naming_it(tmp_path, value):
    make_model(tmp_path / "m")
    path = os.path.join(tmp_path, "m", "model.safetensors")
    T = safetensors_numpy.load_file(path)
    T["model.layers.1.self_attn.v_scale"] = np.array(value, dtype=np.float32)
    safetensors_numpy.save_file(T, path, metadata={"format": "pt"})
    r = gpuopt("generate", tmp_path / "m", "--prompt-ids", "1,2", "--max-new-tokens", "1", "--kv-cache-dtype", "fp8")
    assert r.returncode == 1, r.stderr
    assert "model.layers.1.self_attn.v_scale" in one_line_error(r)
    # Without an fp8 cache the scale is not used.
    assert gpuopt("generate", tmp_path / "m", "--prompt-ids", "1,2", "--max-new-tokens", "1").returncode == 0


def test_serve_with_fp8_cache_matches_numpy(tmp_path):
    """`gpuopt serve --kv-cache-dtype fp8`: a greedy completion is numpy's with the e4m3 cache, and
    /metrics reports the cache's blocks."""
    import json
    import re
    import urllib.request
    from llm_server import MODEL, start_llm_server
    s = start_llm_server(tmp_path, "--kv-cache-dtype", "fp8", "--num-kv-blocks", "40")
    try:
        import safetensors.numpy as sn
        m = os.path.join(tmp_path, MODEL)
        with open(os.path.join(m, "config.json")) as f:
            cfg = json.load(f)
        W = {k: v.astype(np.float64) for k, v in sn.load_file(os.path.join(m, "model.safetensors")).items()}
        prompt = [5, 17, 33, 2, 60, 9]
        want, _ = greedy(cfg, W, prompt, 6, kv_round=fp8_round())
        plain, _ = greedy(cfg, W, prompt, 6)
        body = json.dumps({"model": MODEL, "prompt": prompt, "max_tokens": 6, "temperature": 0,
                           "ignore_eos": True, "logprobs": 1}).encode()
        req = urllib.request.Request(f"http://{s.url}/v1/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            choice = json.loads(r.read())["choices"][0]
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(os.path.join(m, "tokenizer.json"))
        assert choice["text"] == tok.decode(want, skip_special_tokens=True), (want, plain)
        with urllib.request.urlopen(f"http://127.0.0.1:{s.metrics_port}/metrics", timeout=10) as r:
            text = r.read().decode()
        blocks = re.search(r'^gpuopt:kv_cache_blocks\{model_name="[^"]+"\} (\S+)$', text, re.M)
        assert blocks and float(blocks.group(1)) == 40, text[-2000:]
    finally:
        s.stop()
