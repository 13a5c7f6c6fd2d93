"""Quantized language-model folders: `gpuopt quantize MODEL_DIR` (GPTQ int4/int8, AWQ, FP8
compressed-tensors) and the loader of published GPTQ / AWQ / FP8 checkpoints, against numpy.

The numpy side (llm_quant_formats.py) is written from the formats' descriptions, not from gpuopt's
code. The quantizer's integers are checked against numpy's own round-to-nearest (AutoGPTQ's rule), so
the dequantized weights must be identical; CPU generate on the folder must match the numpy forward
pass of the dequantized weights (1e-5, f32 against float64) and stay within the quantization's
expected error of the float model; malformed folders exit 1 with one line.
"""
import json
import math
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_llm_generate import PROMPT, forward, gpuopt, greedy, make_model, make_tokenizer, one_line_error  # noqa: E402
from llm_quant_formats import (E4M3, awq_weight, fp8_weight, gptq_weight, rtn_gptq, st_read,  # noqa: E402
                               st_write)

pytest.importorskip("safetensors.numpy")

# K (64 and 128) divisible by groups 32/64; intermediate 128.
SHAPE = {"intermediate_size": 128}
LINEARS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
           "mlp.up_proj", "mlp.down_proj"]


# ---- helpers -----------------------------------------------------------------------------------

def quantize(src, dst, *args):
    r = gpuopt("quantize", src, "-o", dst, "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def folder_weights(path, cfg, read_linear):
    T, _ = st_read(os.path.join(path, "model.safetensors"))
    W = {k: v.astype(np.float64) for k, v in T.items() if not k.endswith((".qweight", ".qzeros", ".scales", ".g_idx",
                                                                          ".weight_scale", ".input_scale"))}
    for layer in range(cfg["num_hidden_layers"]):
        for lin in LINEARS:
            base = f"model.layers.{layer}.{lin}"
            W[base + ".weight"] = read_linear(T, base).astype(np.float64)
    return T, W


def cpu_logits(path, tmp, prompt=PROMPT, n=6):
    dump = os.path.join(tmp, "logits.npy")
    r = gpuopt("generate", path, "--device", "cpu", "--prompt-ids", ",".join(map(str, prompt)), "--max-new-tokens", n,
               "--temperature", "0", "--ignore-eos", "--json", "--dump-logits", dump)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["sequences"][0]["token_ids"], np.load(dump)[0]


def check_folder_runs_as_numpy(path, tmp, cfg, W):
    """CPU generate on the quantized folder = numpy on its dequantized weights."""
    tokens, logits = cpu_logits(path, tmp)
    want, first = greedy(cfg, W, PROMPT, 6)
    assert tokens == want
    err = np.max(np.abs(logits - first)) / np.max(np.abs(first))
    assert err < 1e-5, err
    return first


def logits_error(cfg, W_float, W_q):
    a, b = forward(cfg, W_float, PROMPT), forward(cfg, W_q, PROMPT)
    return np.linalg.norm(a - b) / np.linalg.norm(a)


def expected_logit_error(report):
    # Independent per-layer errors add in quadrature along the residual stream, each linear
    # contributing its relative weight error (the residual connections and norms keep the logits'
    # relative error below that sum; a tenth of it is the floor of a quantization that changed
    # the model at all).
    return math.sqrt(sum(x["rel_error"] ** 2 for x in report["layers"]))


def check_logit_error(cfg, W, Wq, report):
    err, bound = logits_error(cfg, W, Wq), expected_logit_error(report)
    assert 0.1 * bound < err < bound, (err, bound)


# ---- quantize + load ---------------------------------------------------------------------------

@pytest.mark.parametrize("bits,group,sym", [(4, 32, True), (4, 64, False), (8, -1, True)],
                         ids=["int4-g32-sym", "int4-g64-asym", "int8-channel"])
def test_gptq_folder_matches_numpy(tmp_path, bits, group, sym):
    cfg, W = make_model(tmp_path / "m", **SHAPE)
    args = ["--scheme", f"int{bits}", "--group-size", str(group)] + ([] if sym else ["--asym"])
    rep = quantize(tmp_path / "m", tmp_path / "q", *args)
    qc = json.load(open(tmp_path / "q" / "config.json"))["quantization_config"]
    assert qc["quant_method"] == "gptq" and qc["bits"] == bits and qc["group_size"] == group
    assert qc["sym"] is sym and qc["desc_act"] is False
    T, Wq = folder_weights(tmp_path / "q", cfg, lambda T, b: gptq_weight(T, b, bits))
    assert len(rep["layers"]) == 7 * cfg["num_hidden_layers"]
    for layer in rep["layers"]:
        want = rtn_gptq(W[layer["name"] + ".weight"], bits, group, sym)
        got = Wq[layer["name"] + ".weight"]
        np.testing.assert_array_equal(got, want.astype(np.float64), err_msg=layer["name"])
        w = W[layer["name"] + ".weight"]
        rel = np.linalg.norm(got - w) / np.linalg.norm(w)
        assert abs(layer["rel_error"] - rel) < 1e-6 * rel + 1e-9, (layer, rel)
        # At most half a step (step = range / (2^bits - 1), range <= 2 max|w|), plus the f16
        # rounding of the scale (2^-11 relative) carried over the 2^bits - 1 steps of the range.
        step = np.max(np.abs(w)) * 2 / (2 ** bits - 1)
        assert layer["max_abs_error"] <= step * (0.5 + (2 ** bits - 1) / 2048) + 1e-7
    g = T["model.layers.0.self_attn.q_proj.g_idx"]
    assert g.tolist() == [k // (64 if group == -1 else group) for k in range(64)]
    first = check_folder_runs_as_numpy(tmp_path / "q", tmp_path, cfg, Wq)
    assert first is not None
    check_logit_error(cfg, W, Wq, rep)
    # The folder is smaller: int4 ~ 1/8 of f32 for the linears (+ scales), int8 ~ 1/4.
    assert rep["bytes_out"] < rep["bytes_in"]


def test_fp8_folder_matches_numpy(tmp_path):
    cfg, W = make_model(tmp_path / "m", **SHAPE, seed=5)
    rep = quantize(tmp_path / "m", tmp_path / "q", "--scheme", "fp8")
    qc = json.load(open(tmp_path / "q" / "config.json"))["quantization_config"]
    assert qc["quant_method"] == "compressed-tensors" and qc["format"] == "float-quantized"
    grp = qc["config_groups"]["group_0"]
    assert grp["weights"]["strategy"] == "channel" and grp["weights"]["type"] == "float"
    T, dtypes = st_read(tmp_path / "q" / "model.safetensors")
    assert dtypes["model.layers.0.mlp.up_proj.weight"] == "F8_E4M3"
    assert T["model.layers.0.mlp.up_proj.weight_scale"].shape == (128, 1)
    _, Wq = folder_weights(tmp_path / "q", cfg, fp8_weight)
    for layer in rep["layers"]:
        w, got = W[layer["name"] + ".weight"], Wq[layer["name"] + ".weight"]
        scale = T[layer["name"] + ".weight_scale"].astype(np.float64)
        # max |w| of each row maps to 448 exactly; every value is within half an e4m3 step of
        # w / scale: the step at |x| in [2^e, 2^(e+1)) is 2^(e-3) (subnormals 2^-9).
        assert np.allclose(np.max(np.abs(w), axis=1, keepdims=True) / scale, 448, rtol=1e-6)
        x = np.abs(w / scale)
        step = 2.0 ** (np.maximum(np.floor(np.log2(np.maximum(x, 2.0 ** -20))), -6) - 3)
        assert np.all(np.abs(got / scale - w / scale) <= step / 2 * (1 + 1e-6)), layer["name"]
        # ...and its code is the nearest e4m3 to w / scale (computed in f32 as the format's writers
        # do), the even code on a tie.
        x = (w.astype(np.float32) / scale.astype(np.float32)).astype(np.float64).reshape(-1, 1)
        codes = T[layer["name"] + ".weight"].reshape(-1)
        dist = np.abs(x - np.where(np.isfinite(E4M3), E4M3, np.inf).reshape(1, -1))
        best = dist.min(axis=1)
        assert np.all(dist[np.arange(len(codes)), codes] == best), layer["name"]
        ties = (dist == best[:, None]).sum(axis=1) > 1
        assert np.all(codes[ties & (x[:, 0] != 0)] % 2 == 0)
    check_folder_runs_as_numpy(tmp_path / "q", tmp_path, cfg, Wq)
    check_logit_error(cfg, W, Wq, rep)


def test_awq_folder_matches_numpy(tmp_path):
    m = tmp_path / "m"
    os.makedirs(m)
    tok = make_tokenizer(m)
    cfg, W = make_model(m, **SHAPE, vocab_size=tok.get_vocab_size(), bos_token_id=0, eos_token_id=1, seed=6)
    with open(tmp_path / "calib.txt", "w") as f:
        f.write("the quick brown fox jumps over the lazy dog\n\na stitch in time saves nine\nthe lazy fox naps\n")
    rep = quantize(m, tmp_path / "q", "--scheme", "awq", "--group-size", "32", "--calibration", tmp_path / "calib.txt")
    assert rep["calibration_tokens"] == sum(len(tok.encode(s).ids) for s in
                                            ["the quick brown fox jumps over the lazy dog", "a stitch in time saves nine",
                                             "the lazy fox naps"])
    qc = json.load(open(tmp_path / "q" / "config.json"))["quantization_config"]
    assert qc == {"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": True, "version": "gemm"}
    assert os.path.exists(tmp_path / "q" / "tokenizer.json")
    T, Wq = folder_weights(tmp_path / "q", cfg, lambda T, b: awq_weight(T, b, 32))
    # The norms absorbed 1/s: the folder is a different factorisation of (nearly) the same model.
    assert not np.allclose(Wq["model.layers.0.input_layernorm.weight"], W["model.layers.0.input_layernorm.weight"])
    check_folder_runs_as_numpy(tmp_path / "q", tmp_path, cfg, Wq)
    check_logit_error(cfg, W, Wq, rep)
    scaled = [x for x in rep["layers"] if "awq_ratio" in x]
    assert len(scaled) == 6 * cfg["num_hidden_layers"]  # all but o_proj
    assert all(x["awq_out_error"] <= x["rtn_out_error"] for x in scaled)


# ---- published layouts the quantizer does not write: act-order, asym v1 ------------------------------

def pack_rows(q, bits):  # [K, N] ints -> int32 [K*bits/32, N]
    p = 32 // bits
    K, N = q.shape
    out = np.zeros((K // p, N), dtype=np.uint32)
    for j in range(p):
        out |= (q[j::p].astype(np.uint32) << (bits * j))
    return out.view(np.int32)


def pack_cols(q, bits):  # [G, N] -> int32 [G, N*bits/32]
    return np.ascontiguousarray(pack_rows(np.ascontiguousarray(q.T), bits).view(np.uint32).T).view(np.int32)


def write_gptq_act_order(tmp_path, cfg, W, group=16, bits=4):
    """A GPTQ folder with desc_act: each linear's input channels grouped by a random permutation
    (as act-order does: g_idx[k] = position of k in the order // group), asymmetric, v1 zeros."""
    rng = np.random.default_rng(11)
    T, dtypes, Wq = {}, {}, dict(W)
    for name, w in W.items():
        base = name[:-7]
        if name.startswith("model.layers.") and w.ndim == 2:
            N, K = w.shape
            order = rng.permutation(K)
            g_idx = np.empty(K, dtype=np.int32)
            g_idx[order] = np.arange(K) // group
            G = K // group
            q = rng.integers(0, 2 ** bits, (K, N))
            z = rng.integers(0, 2 ** bits, (G, N))
            s = (rng.uniform(0.5, 1.5, (G, N)) / (2 ** bits * math.sqrt(K))).astype(np.float16)
            T[base + ".qweight"], T[base + ".qzeros"] = pack_rows(q, bits), pack_cols((z - 1) % (2 ** bits), bits)
            T[base + ".scales"], T[base + ".g_idx"] = s, g_idx
            dtypes.update({base + ".qweight": "I32", base + ".qzeros": "I32", base + ".scales": "F16",
                           base + ".g_idx": "I32"})
            Wq[name] = (s.astype(np.float32)[g_idx] * (q - z[g_idx]).astype(np.float32)).T.astype(np.float64)
        else:
            T[name], dtypes[name] = w.astype(np.float32), "F32"
    os.makedirs(tmp_path / "g", exist_ok=True)
    st_write(tmp_path / "g" / "model.safetensors", T, dtypes)
    c = dict(cfg)
    c["quantization_config"] = {"quant_method": "gptq", "bits": bits, "group_size": group, "desc_act": True,
                                "sym": False}
    json.dump(c, open(tmp_path / "g" / "config.json", "w"))
    return T, dtypes, c, Wq


def test_gptq_act_order_asym_checkpoint_loads_as_numpy(tmp_path):
    cfg, W = make_model(tmp_path / "m", **SHAPE, seed=8)
    T, _, c, Wq = write_gptq_act_order(tmp_path, cfg, W)
    # The numpy reader agrees with the writer above (a check of the test's own two halves).
    np.testing.assert_array_equal(gptq_weight(T, "model.layers.1.mlp.down_proj", 4), Wq["model.layers.1.mlp.down_proj.weight"])
    check_folder_runs_as_numpy(tmp_path / "g", tmp_path, c, Wq)
    r = gpuopt("inspect", tmp_path / "g", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["quantization"] == "gptq int4 g16 asym act-order"


# ---- malformed ---------------------------------------------------------------------------------

def test_malformed_checkpoints_exit_1_with_one_line(tmp_path):
    cfg, W = make_model(tmp_path / "m", **SHAPE, seed=9)
    T, dtypes, c, _ = write_gptq_act_order(tmp_path, cfg, W)
    n = [0]

    def case(edit_tensors=None, edit_config=None):
        n[0] += 1
        d = tmp_path / f"bad{n[0]}"
        os.makedirs(d)
        t, dt, cc = dict(T), dict(dtypes), json.loads(json.dumps(c))
        if edit_tensors:
            edit_tensors(t, dt)
        if edit_config:
            edit_config(cc["quantization_config"])
        st_write(d / "model.safetensors", t, dt)
        json.dump(cc, open(d / "config.json", "w"))
        return one_line_error(gpuopt("generate", d, "--device", "cpu", "--prompt-ids", "1,2"))

    q = "model.layers.0.self_attn.k_proj"
    line = case(lambda t, dt: t.__setitem__(q + ".qweight", t[q + ".qweight"][:4]))
    assert q + ".qweight" in line and "shape [4, 32]" in line and "[8, 32]" in line, line
    line = case(lambda t, dt: t.pop(q + ".scales"))
    assert q + ".scales" in line and "missing" in line, line
    line = case(lambda t, dt: t.pop(q + ".g_idx"))
    assert q + ".g_idx" in line and "desc_act" in line, line
    line = case(lambda t, dt: t.__setitem__(q + ".g_idx", t[q + ".g_idx"] + 3))
    assert q + ".g_idx" in line and "group" in line, line
    line = case(lambda t, dt: (t.__setitem__(q + ".scales", t[q + ".scales"].astype(np.int32)),
                               dt.__setitem__(q + ".scales", "I32")))
    assert q + ".scales" in line and "I32" in line, line
    line = case(edit_config=lambda qc: qc.__setitem__("group_size", 48))
    assert "group_size 48 does not divide the input dimension 64" in line, line
    line = case(edit_config=lambda qc: qc.__setitem__("quant_method", "bitsandbytes"))
    assert "quant_method 'bitsandbytes' is not supported" in line and "gptq" in line, line
    line = case(edit_config=lambda qc: qc.__setitem__("bits", 3))
    assert "gptq with 3 bits" in line, line
    line = case(edit_config=lambda qc: qc.__setitem__("checkpoint_format", "marlin"))
    assert "marlin" in line, line
    line = case(edit_config=lambda qc: qc.update({"quant_method": "awq", "version": "gemv"}))
    assert "awq version 'gemv' is not supported" in line, line
    line = case(edit_config=lambda qc: qc.update({"quant_method": "compressed-tensors", "format": "pack-quantized",
                                                  "config_groups": {}}))
    assert "format 'pack-quantized' is not supported" in line, line
    line = case(edit_config=lambda qc: qc.clear())
    assert "quant_method" in line and "missing" in line, line


def test_fp8_malformed_and_per_tensor(tmp_path):
    cfg, W = make_model(tmp_path / "m", **SHAPE, seed=10)
    quantize(tmp_path / "m", tmp_path / "q", "--scheme", "fp8")
    T, dtypes = st_read(tmp_path / "q" / "model.safetensors")
    c = json.load(open(tmp_path / "q" / "config.json"))
    # Per-tensor scales with static input scales, as llm-compressor's FP8 scheme writes them.
    t2, d2 = dict(T), dict(dtypes)
    Wq = {k: v.astype(np.float64) for k, v in T.items() if dtypes[k] == "F32"}
    for layer in range(cfg["num_hidden_layers"]):
        for lin in LINEARS:
            b = f"model.layers.{layer}.{lin}"
            w = W[b + ".weight"]
            s = np.float32(np.max(np.abs(w)) / 448)
            codes = np.abs((w / s).reshape(-1, 1) - np.where(np.isfinite(E4M3), E4M3, 1e9)).argmin(1)
            t2[b + ".weight"] = codes.astype(np.uint8).reshape(w.shape)
            t2[b + ".weight_scale"] = np.array([s], dtype=np.float32)
            t2[b + ".input_scale"], d2[b + ".input_scale"] = np.array([0.05], dtype=np.float32), "F32"
            Wq[b + ".weight"] = (E4M3[t2[b + ".weight"]] * np.float64(s))
    c2 = json.loads(json.dumps(c))
    grp = c2["quantization_config"]["config_groups"]["group_0"]
    grp["weights"]["strategy"] = "tensor"
    grp["input_activations"] = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False,
                                "symmetric": True}
    os.makedirs(tmp_path / "t")
    st_write(tmp_path / "t" / "model.safetensors", t2, d2)
    json.dump(c2, open(tmp_path / "t" / "config.json", "w"))
    check_folder_runs_as_numpy(tmp_path / "t", tmp_path, cfg, Wq)

    def bad(t, d, cc, name):
        os.makedirs(tmp_path / name)
        st_write(tmp_path / name / "model.safetensors", t, d)
        json.dump(cc, open(tmp_path / name / "config.json", "w"))
        return one_line_error(gpuopt("generate", tmp_path / name, "--device", "cpu", "--prompt-ids", "1,2"))

    b = "model.layers.1.mlp.gate_proj"
    t3 = dict(t2)
    t3.pop(b + ".input_scale")
    assert b + ".input_scale" in bad(t3, d2, c2, "b1")
    t3 = dict(T)
    t3.pop(b + ".weight_scale")
    assert b + ".weight_scale" in bad(t3, dtypes, c, "b2")
    t3 = dict(T)
    t3[b + ".weight_scale"] = T[b + ".weight_scale"][:5]
    line = bad(t3, dtypes, c, "b3")
    assert b + ".weight_scale" in line and "per-channel" in line, line
    c3 = json.loads(json.dumps(c))
    del c3["quantization_config"]
    line = bad(T, dtypes, c3, "b4")
    assert "F8_E4M3" in line and "compressed-tensors" in line, line


def test_quantize_refusals(tmp_path):
    make_model(tmp_path / "m")  # hidden 64, intermediate 112
    r = gpuopt("quantize", tmp_path / "m", "-o", tmp_path / "q", "--scheme", "int4")
    line = one_line_error(r)
    assert "group size 128 does not divide the input dimension 64" in line, line
    line = one_line_error(gpuopt("quantize", tmp_path / "m", "-o", tmp_path / "q", "--group-size", "32"))
    assert "does not divide the input dimension 112" in line and "down_proj" in line, line
    r = gpuopt("quantize", tmp_path / "m", "-o", tmp_path / "q", "--scheme", "awq")
    assert r.returncode == 2 and "--calibration" in r.stderr, r.stderr
    line = one_line_error(gpuopt("quantize", tmp_path / "m", "-o", tmp_path / "q", "--scheme", "awq", "--group-size", "16",
                                 "--calibration", tmp_path / "nope.txt"))
    assert "tokenizer.json" in line or "nope.txt" in line, line
    quantize(tmp_path / "m", tmp_path / "q8", "--scheme", "int8")
    line = one_line_error(gpuopt("quantize", tmp_path / "q8", "-o", tmp_path / "qq", "--scheme", "int8"))
    assert "already quantized" in line, line


# ---- serving a quantized folder ---------------------------------------------------------------

def test_serve_answers_from_a_quantized_folder(tmp_path):
    """`gpuopt serve` loads a GPTQ folder as `generate` does: the same greedy completion."""
    import urllib.request
    from llm_server import MODEL, make_llm_repository
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "server"))
    import server_harness as H
    make_llm_repository(tmp_path / "float")
    quantize(tmp_path / "float" / MODEL, tmp_path / "repo" / MODEL, "--scheme", "int4", "--group-size", "16")
    prompt = "the lazy fox"
    r = gpuopt("generate", tmp_path / "repo" / MODEL, "--device", "cpu", "--prompt", prompt, "--max-new-tokens", 6,
               "--temperature", 0, "--ignore-eos", "--json")
    assert r.returncode == 0, r.stderr
    want = json.loads(r.stdout)["sequences"][0]["text"]
    with H.Server(["--model-repository", str(tmp_path / "repo"), "--llm-device", "cpu"]) as s:
        body = json.dumps({"model": MODEL, "prompt": prompt, "max_tokens": 6, "temperature": 0,
                           "ignore_eos": True}).encode()
        req = urllib.request.Request(f"http://{s.url}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            got = json.loads(resp.read())["choices"][0]["text"]
    assert got == want and len(want) > 0, (got, want)


def test_qwen2_biases_and_sharded_gptq_folder(tmp_path):
    """Qwen2's q/k/v biases stay float beside the packed weights; the folder split into shards with
    an index loads the same."""
    cfg, W = make_model(tmp_path / "m", arch="Qwen2ForCausalLM", tie_word_embeddings=True, seed=12, **SHAPE)
    rep = quantize(tmp_path / "m", tmp_path / "q", "--scheme", "int8")
    T, dtypes = st_read(tmp_path / "q" / "model.safetensors")
    assert dtypes["model.layers.0.self_attn.q_proj.bias"] == "F32"
    _, Wq = folder_weights(tmp_path / "q", cfg, lambda T, b: gptq_weight(T, b, 8))
    np.testing.assert_array_equal(Wq["model.layers.1.self_attn.v_proj.bias"], W["model.layers.1.self_attn.v_proj.bias"])
    check_folder_runs_as_numpy(tmp_path / "q", tmp_path, cfg, Wq)
    check_logit_error(cfg, W, Wq, rep)
    # Two shards and an index, tensors spread over both.
    names = sorted(T)
    os.remove(tmp_path / "q" / "model.safetensors")
    wmap = {}
    for s in range(2):
        fname = f"model-{s + 1:05d}-of-00002.safetensors"
        part = names[s::2]
        st_write(tmp_path / "q" / fname, {n: T[n] for n in part}, {n: dtypes[n] for n in part})
        wmap.update({n: fname for n in part})
    json.dump({"metadata": {}, "weight_map": wmap}, open(tmp_path / "q" / "model.safetensors.index.json", "w"))
    check_folder_runs_as_numpy(tmp_path / "q", tmp_path, cfg, Wq)
    # A shard the index names but that is gone: one line naming it.
    os.remove(tmp_path / "q" / "model-00002-of-00002.safetensors")
    line = one_line_error(gpuopt("generate", tmp_path / "q", "--device", "cpu", "--prompt-ids", "1,2"))
    assert "model-00002-of-00002.safetensors" in line, line


def test_fp8_static_activation_scales_from_calibration(tmp_path):
    """--scheme fp8 --calibration: each linear's input_scale is max |input| / 448 over the
    calibration tokens (checked for layer 0's q/k/v, whose input numpy computes directly:
    input_layernorm of the token embeddings), written as static per-tensor activations."""
    m = tmp_path / "m"
    os.makedirs(m)
    tok = make_tokenizer(m)
    cfg, W = make_model(m, **SHAPE, vocab_size=tok.get_vocab_size(), bos_token_id=0, eos_token_id=1, seed=13)
    lines = ["the quick brown fox jumps over the lazy dog", "a stitch in time saves nine"]
    with open(tmp_path / "calib.txt", "w") as f:
        f.write("\n".join(lines) + "\n")
    quantize(m, tmp_path / "q", "--scheme", "fp8", "--calibration", tmp_path / "calib.txt")
    grp = json.load(open(tmp_path / "q" / "config.json"))["quantization_config"]["config_groups"]["group_0"]
    assert grp["input_activations"]["dynamic"] is False and grp["input_activations"]["strategy"] == "tensor"
    T, _ = st_read(tmp_path / "q" / "model.safetensors")
    from test_llm_generate import rms
    ids = np.concatenate([tok.encode(s).ids for s in lines])
    h = rms(W["model.embed_tokens.weight"][ids], W["model.layers.0.input_layernorm.weight"], cfg["rms_norm_eps"])
    want = np.max(np.abs(h)) / 448
    for n in "qkv":
        got = T[f"model.layers.0.self_attn.{n}_proj.input_scale"]
        assert got.shape == (1,) and abs(got[0] - want) <= 1e-5 * want, (got, want)
    assert T["model.layers.1.mlp.down_proj.input_scale"][0] > 0
    _, Wq = folder_weights(tmp_path / "q", cfg, fp8_weight)
    check_folder_runs_as_numpy(tmp_path / "q", tmp_path, cfg, Wq)
    # int4/int8 take no calibration: refused as a usage error rather than ignored.
    r = gpuopt("quantize", m, "-o", tmp_path / "q4", "--scheme", "int4", "--group-size", "32",
               "--calibration", tmp_path / "calib.txt")
    assert r.returncode == 2 and "--calibration is used by --scheme awq and fp8" in r.stderr, r.stderr


def test_awq_folds_o_proj_into_v_proj_without_gqa(tmp_path):
    """With as many KV heads as heads, o_proj gets AWQ scales too and v_proj's rows carry 1/s:
    still the same model as numpy reads it, within the quantization's error of the float one."""
    m = tmp_path / "m"
    os.makedirs(m)
    tok = make_tokenizer(m)
    cfg, W = make_model(m, **SHAPE, num_key_value_heads=4, vocab_size=tok.get_vocab_size(), bos_token_id=0,
                        eos_token_id=1, seed=14)
    with open(tmp_path / "calib.txt", "w") as f:
        f.write("the quick brown fox jumps over the lazy dog\na stitch in time saves nine\n")
    rep = quantize(m, tmp_path / "q", "--scheme", "awq", "--group-size", "32", "--calibration", tmp_path / "calib.txt")
    assert all("awq_ratio" in x for x in rep["layers"])  # o_proj included
    _, Wq = folder_weights(tmp_path / "q", cfg, lambda T, b: awq_weight(T, b, 32))
    check_folder_runs_as_numpy(tmp_path / "q", tmp_path, cfg, Wq)
    check_logit_error(cfg, W, Wq, rep)
