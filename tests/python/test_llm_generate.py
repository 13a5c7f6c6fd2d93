"""`gpuopt generate --device cpu` against an independent numpy forward pass of the Llama family.

The oracle below is written from the architectures' description (transformers' modeling_llama /
modeling_mistral / modeling_qwen2: RMSNorm, RoPE with rotate_half, grouped-query causal attention,
Mistral's sliding window, SiLU-gated MLP, Qwen2's q/k/v biases, tied embeddings; rope_scaling as
transformers' _compute_default/_linear/_llama3 parameters), in float64, recomputing the whole
sequence at every step: nothing is shared with the C++ runner but the file format. Tiny random
models are written with the `safetensors` package (fp32, fp16 and a sharded index).

Checked: greedy tokens equal numpy's, the first generated position's logits (--dump-logits)
within 1e-5 of the largest logit (f32 arithmetic against float64), chunked prefill and batches give
the same, EOS / stop ids end a sequence, a prompt longer than the context and corrupt folders
(missing shard, truncated file, lying header, wrong dtype, unknown architecture) exit 1 with one
line naming the file or tensor; `inspect MODEL_DIR` reports the shape and memory.
"""
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

safetensors_numpy = pytest.importorskip("safetensors.numpy")

sys.path.insert(0, os.path.dirname(__file__))
from gpuopt_cli import gpuopt_bin  # noqa: E402

BASE = {"vocab_size": 96, "hidden_size": 64, "intermediate_size": 112, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 48,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2}


# ---- the oracle -----------------------------------------------------------------------------

def inv_freq(cfg):
    d = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    f = 1.0 / (cfg["rope_theta"] ** (np.arange(0, d, 2, dtype=np.float64) / d))
    rs = cfg.get("rope_scaling")
    if not rs:
        return f
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "linear":
        return f / rs["factor"]
    assert kind == "llama3"
    factor, lo, hi, old = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
    wavelen = 2 * math.pi / f
    out = np.where(wavelen > old / lo, f / factor, f)
    smooth = (old / wavelen - lo) / (hi - lo)
    mid = (wavelen >= old / hi) & (wavelen <= old / lo)
    return np.where(mid, (1 - smooth) * out / factor + smooth * out, out)


def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def forward(cfg, W, ids, kv_round=None):
    """Logits [len(ids), vocab] of the whole sequence, float64. kv_round(layer, k, v) -> (k, v):
    what a narrow KV cache stores, applied to the rotated keys and the values before attention."""
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim") or cfg["hidden_size"] // H
    eps, T = cfg["rms_norm_eps"], len(ids)
    window = cfg.get("sliding_window") if cfg["architectures"][0] == "MistralForCausalLM" else None
    ang = np.arange(T, dtype=np.float64)[:, None] * inv_freq(cfg)[None, :]
    cos = np.cos(np.concatenate([ang, ang], -1))[:, None, :]
    sin = np.sin(np.concatenate([ang, ang], -1))[:, None, :]
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    allowed = j <= i
    if window:
        allowed &= (i - j) < window
    x = W["model.embed_tokens.weight"][ids]
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = rms(x, W[p + "input_layernorm.weight"], eps)
        proj = {}
        for n in "qkv":
            proj[n] = h @ W[p + f"self_attn.{n}_proj.weight"].T
            if p + f"self_attn.{n}_proj.bias" in W:
                proj[n] = proj[n] + W[p + f"self_attn.{n}_proj.bias"]
        q = proj["q"].reshape(T, H, D)
        k = proj["k"].reshape(T, KV, D)
        v = proj["v"].reshape(T, KV, D)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if kv_round:
            k, v = kv_round(layer, k, v)
        k = np.repeat(k, H // KV, axis=1)
        v = np.repeat(v, H // KV, axis=1)
        s = np.einsum("thd,shd->hts", q, k) / math.sqrt(D)
        s = np.where(allowed[None], s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        o = np.einsum("hts,shd->thd", s, v).reshape(T, H * D)
        x = x + o @ W[p + "self_attn.o_proj.weight"].T
        h = rms(x, W[p + "post_attention_layernorm.weight"], eps)
        g = h @ W[p + "mlp.gate_proj.weight"].T
        u = h @ W[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ W[p + "mlp.down_proj.weight"].T
    x = rms(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else W["lm_head.weight"]
    return x @ head.T


def greedy(cfg, W, prompt, n, stop=(), kv_round=None):
    ids, first = list(prompt), None
    out = []
    for _ in range(n):
        logits = forward(cfg, W, ids, kv_round)[-1]
        if first is None:
            first = logits
        top = np.sort(logits)[-2:]
        assert top[1] - top[0] > 1e-4, "a near-tie: pick another seed for this model"
        t = int(np.argmax(logits))
        out.append(t)
        if t in stop:
            break
        ids.append(t)
    return out, first


# ---- tiny models ----------------------------------------------------------------------------

def make_model(path, arch="LlamaForCausalLM", dtype=np.float32, shards=1, seed=0, **over):
    cfg = {**BASE, "architectures": [arch], **over}
    cfg["torch_dtype"] = {np.float32: "float32", np.float16: "float16"}[dtype]
    H, KV, hid, inter = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"], cfg["intermediate_size"]
    D = cfg.get("head_dim") or hid // H
    rng = np.random.default_rng(seed)

    def mat(o, i):  # scaled so activations stay O(1) and logits spread over a few units
        return rng.normal(0, 1.0 / math.sqrt(i), (o, i))

    W = {"model.embed_tokens.weight": rng.normal(0, 1.0, (cfg["vocab_size"], hid))}
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        W[p + "input_layernorm.weight"] = 1 + 0.1 * rng.normal(size=hid)
        W[p + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.normal(size=hid)
        W[p + "self_attn.q_proj.weight"] = mat(H * D, hid)
        W[p + "self_attn.k_proj.weight"] = mat(KV * D, hid)
        W[p + "self_attn.v_proj.weight"] = mat(KV * D, hid)
        W[p + "self_attn.o_proj.weight"] = mat(hid, H * D)
        if arch == "Qwen2ForCausalLM":
            for n, size in (("q", H * D), ("k", KV * D), ("v", KV * D)):
                W[p + f"self_attn.{n}_proj.bias"] = 0.3 * rng.normal(size=size)
        W[p + "mlp.gate_proj.weight"] = mat(inter, hid)
        W[p + "mlp.up_proj.weight"] = mat(inter, hid)
        W[p + "mlp.down_proj.weight"] = mat(hid, inter)
    W["model.norm.weight"] = 1 + 0.1 * rng.normal(size=hid)
    if not cfg.get("tie_word_embeddings"):
        W["lm_head.weight"] = mat(cfg["vocab_size"], hid) * 4
    stored = {k: v.astype(dtype) for k, v in W.items()}
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    if shards == 1:
        safetensors_numpy.save_file(stored, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    else:
        names = sorted(stored)
        wmap = {}
        for s in range(shards):
            fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = {n: stored[n] for n in names[s::shards]}
            safetensors_numpy.save_file(part, os.path.join(path, fname), metadata={"format": "pt"})
            wmap.update({n: fname for n in part})
        with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": sum(v.nbytes for v in stored.values())}, "weight_map": wmap}, f)
    # The oracle sees exactly the stored values.
    return cfg, {k: v.astype(np.float64) for k, v in stored.items()}


def gpuopt(*args, timeout=120):
    return subprocess.run([gpuopt_bin(), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def generate(path, prompt, n, *extra, tmp=None):
    args = ["generate", path, "--device", "cpu", "--prompt-ids", ",".join(map(str, prompt)), "--max-new-tokens", n,
            "--temperature", "0", "--json", *extra]
    dump = None
    if tmp is not None:
        dump = os.path.join(tmp, "logits.npy")
        args += ["--dump-logits", dump]
    r = gpuopt(*args)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    return out, (np.load(dump) if dump else None)


def check_against_numpy(tmp_path, cfg, W, prompt, n=8, *extra):
    out, logits = generate(tmp_path / "m", prompt, n, "--ignore-eos", *extra, tmp=tmp_path)
    want, first = greedy(cfg, W, prompt, n)
    seq = out["sequences"][0]
    assert seq["prompt_ids"] == list(prompt)
    assert seq["token_ids"] == want
    assert seq["finish_reason"] == "length"
    assert logits.shape == (1, cfg["vocab_size"])
    err = np.max(np.abs(logits[0] - first)) / np.max(np.abs(first))
    assert err < 1e-5, err
    return out


PROMPT = [1, 17, 33, 5, 60, 61, 9, 40, 77, 12, 3]


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_llama_matches_numpy(tmp_path, dtype):
    cfg, W = make_model(tmp_path / "m", dtype=dtype)
    out = check_against_numpy(tmp_path, cfg, W, PROMPT)
    for k in ("ttft_ms", "tok_s", "itl_p50_ms", "itl_p99_ms"):
        assert out[k] > 0, (k, out)
    assert out["roofline_frac"] is None  # the CPU path has no bandwidth figure unless given one
    assert out["generated_tokens"] == 8 and out["prompt_tokens"] == len(PROMPT)


@pytest.mark.parametrize("scaling", [{"rope_type": "linear", "factor": 2.0},
                                     {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 64}],
                         ids=["linear", "llama3"])
def test_rope_scaling_matches_numpy(tmp_path, scaling):
    # head_dim 16, theta 10000: wavelengths 6.3 ... 19869, so llama3's three regimes all occur.
    cfg, W = make_model(tmp_path / "m", rope_scaling=scaling, max_position_embeddings=64)
    check_against_numpy(tmp_path, cfg, W, PROMPT * 2, 6)


def test_mistral_sliding_window_matches_numpy(tmp_path):
    cfg, W = make_model(tmp_path / "m", arch="MistralForCausalLM", sliding_window=4, seed=1)
    check_against_numpy(tmp_path, cfg, W, PROMPT, 8)
    # The window matters here: without it the oracle picks differently somewhere.
    nowin = dict(cfg)
    nowin["sliding_window"] = None
    assert greedy(nowin, W, PROMPT, 8)[1].tolist() != greedy(cfg, W, PROMPT, 8)[1].tolist()


def test_qwen2_bias_tied_matches_numpy(tmp_path):
    cfg, W = make_model(tmp_path / "m", arch="Qwen2ForCausalLM", tie_word_embeddings=True, head_dim=24, seed=2)
    assert "lm_head.weight" not in W
    check_against_numpy(tmp_path, cfg, W, PROMPT, 8)


def test_sharded_checkpoint_and_chunked_prefill(tmp_path):
    cfg, W = make_model(tmp_path / "m", shards=3, seed=3)
    a = check_against_numpy(tmp_path, cfg, W, PROMPT, 6)
    b = check_against_numpy(tmp_path, cfg, W, PROMPT, 6, "--max-step-tokens", "3")
    assert a["sequences"][0]["token_ids"] == b["sequences"][0]["token_ids"]


def test_batch_of_prompts_each_matches_numpy(tmp_path):
    cfg, W = make_model(tmp_path / "m", seed=4)
    prompts = [PROMPT, [1, 50, 51, 52], [1, 7] * 9]
    with open(tmp_path / "prompts.txt", "w") as f:
        for p in prompts:
            f.write(json.dumps(p) + "\n")
    r = gpuopt("generate", tmp_path / "m", "--prompts", tmp_path / "prompts.txt", "--batch", 3, "--max-new-tokens", 5,
               "--temperature", 0, "--ignore-eos", "--json", "--max-step-tokens", 7)
    assert r.returncode == 0, r.stderr
    seqs = json.loads(r.stdout)["sequences"]
    assert [s["token_ids"] for s in seqs] == [greedy(cfg, W, p, 5)[0] for p in prompts]


def test_eos_and_stop_ids_end_the_sequence(tmp_path):
    cfg, W = make_model(tmp_path / "m", seed=5)
    want, _ = greedy(cfg, W, PROMPT, 8)
    stop = want[3]
    k = want.index(stop)  # the first time it appears
    out, _ = generate(tmp_path / "m", PROMPT, 8, "--stop-id", stop, "--ignore-eos")
    seq = out["sequences"][0]
    assert seq["token_ids"] == want[:k + 1] and seq["finish_reason"] == "stop"
    # The same token as the model's EOS (config.json eos_token_id) stops too, unless ignored.
    cfg["eos_token_id"] = [stop]
    with open(tmp_path / "m" / "config.json", "w") as f:
        json.dump(cfg, f)
    out, _ = generate(tmp_path / "m", PROMPT, 8)
    assert out["sequences"][0]["token_ids"] == want[:k + 1]
    out, _ = generate(tmp_path / "m", PROMPT, 8, "--ignore-eos")
    assert out["sequences"][0]["token_ids"] == want


def test_sampling_is_seeded(tmp_path):
    make_model(tmp_path / "m", seed=6)
    args = ["generate", tmp_path / "m", "--prompt-ids", "1,2,3", "--max-new-tokens", 12, "--temperature", 1.5,
            "--top-k", 20, "--seed", 7, "--json", "--ignore-eos", "--logprobs", 2]
    a, b = gpuopt(*args), gpuopt(*args)
    assert a.returncode == 0, a.stderr
    ta = json.loads(a.stdout)["sequences"][0]
    assert ta["token_ids"] == json.loads(b.stdout)["sequences"][0]["token_ids"]
    assert len(ta["logprobs"]) == 12 and all(len(x["top"]) == 2 for x in ta["logprobs"])
    c = gpuopt(*args[:-6], "--seed", 8, "--json", "--ignore-eos")
    assert json.loads(c.stdout)["sequences"][0]["token_ids"] != ta["token_ids"]


def test_random_weights_and_bench(tmp_path):
    os.makedirs(tmp_path / "m")
    with open(tmp_path / "m" / "config.json", "w") as f:
        json.dump({**BASE, "architectures": ["LlamaForCausalLM"]}, f)
    r = gpuopt("generate", tmp_path / "m", "--random-weights", "--prompt-ids", "1,2", "--max-new-tokens", 4,
               "--temperature", 0, "--ignore-eos", "--json", "--bandwidth-gbs", 10)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert len(out["sequences"][0]["token_ids"]) == 4
    assert 0 < out["roofline_frac"] < 10  # bytes / step time / 10 GB/s: a share, CPU-sized
    r = gpuopt("generate", tmp_path / "m", "--random-weights", "--bench", "--bench-prompt", "4,100", "--bench-gen", 3,
               "--bench-batch", "1,2", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert [(x["prompt_len"], x["batch"]) for x in rows] == [(4, 1), (4, 2), (100, 1), (100, 2)]
    assert all(x["tok_s"] > 0 for x in rows[:2])
    assert all("longer than the context" in x["skipped"] for x in rows[2:])
    r = gpuopt("generate", tmp_path / "m", "--random-weights", "--bench", "--bench-prompt", 4, "--bench-gen", 2)
    assert r.returncode == 0 and "decode tok/s" in r.stdout, r.stdout + r.stderr


def one_line_error(r):
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("gpuopt: error: "), r.stderr
    return lines[0]


def test_prompt_longer_than_the_context_is_refused(tmp_path):
    make_model(tmp_path / "m")
    line = one_line_error(gpuopt("generate", tmp_path / "m", "--prompt-ids", ",".join(["5"] * 49)))
    assert "49 tokens, longer than the model's context of 48" in line, line
    line = one_line_error(gpuopt("generate", tmp_path / "m", "--prompt-ids", "1,96"))
    assert "token id 96" in line, line


def rewrite_header(path, edit):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    edit(header)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data[8 + n:])


def test_corrupt_folders_exit_1_naming_the_file(tmp_path):
    m = tmp_path / "m"
    make_model(m, shards=2)
    shard2 = m / "model-00002-of-00002.safetensors"
    good = shard2.read_bytes()
    run = lambda: gpuopt("generate", m, "--prompt-ids", "1,2", "--max-new-tokens", 2)  # noqa: E731

    shard2.unlink()
    line = one_line_error(run())
    assert "model-00002-of-00002.safetensors" in line and "does not exist" in line, line

    shard2.write_bytes(good[:-100])  # truncated
    line = one_line_error(run())
    assert "model-00002-of-00002.safetensors" in line and "lie outside" in line, line

    shard2.write_bytes(good)
    victim = "model.layers.0.mlp.down_proj.weight"
    def lie_offsets(h):  # noqa: E306
        name = next(k for k in h if k != "__metadata__")
        h[name]["data_offsets"][1] += 4
    rewrite_header(shard2, lie_offsets)
    line = one_line_error(run())
    assert "model-00002-of-00002.safetensors" in line and "data_offsets" in line, line

    shard2.write_bytes(good)
    def lie_dtype(h):  # noqa: E306
        for k, v in h.items():
            if k != "__metadata__":
                v["dtype"] = "F16"  # half the bytes the offsets hold
    rewrite_header(shard2, lie_dtype)
    line = one_line_error(run())
    assert "model-00002-of-00002.safetensors" in line and "F16" in line, line

    shard2.write_bytes(good)
    def int_dtype(h):  # noqa: E306
        for k, v in h.items():
            if k != "__metadata__":
                v["dtype"] = "I32"  # same size as F32: valid file, not weights
    rewrite_header(shard2, int_dtype)
    line = one_line_error(run())
    assert "model-00002-of-00002.safetensors" in line and "dtype i32" in line, line
    shard2.write_bytes(good)
    assert run().returncode == 0

    cfg = json.loads((m / "config.json").read_text())
    cfg["architectures"] = ["GPTNeoXForCausalLM"]
    (m / "config.json").write_text(json.dumps(cfg))
    line = one_line_error(run())
    assert "'GPTNeoXForCausalLM' is not supported" in line and "LlamaForCausalLM" in line and "config.json" in line, line
    assert victim  # (named for the reader: shard 2 holds every other tensor, the down projections among them)

    line = one_line_error(gpuopt("generate", tmp_path / "nothing-here", "--prompt-ids", "1"))
    assert "nothing-here" in line, line


def test_inspect_model_dir(tmp_path):
    cfg, W = make_model(tmp_path / "m", dtype=np.float16, arch="Qwen2ForCausalLM", tie_word_embeddings=True)
    r = gpuopt("inspect", tmp_path / "m", "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["architecture"] == "Qwen2ForCausalLM"
    assert j["parameters"] == sum(v.size for v in W.values())
    assert j["weight_bytes"] == 2 * sum(v.size for v in W.values())
    assert j["weights"] == {"f16": len(W)}
    assert (j["layers"], j["heads"], j["kv_heads"], j["head_dim"]) == (2, 4, 2, 16)
    kv = 2 * 2 * 2 * 16 * 2  # layers x (K, V) x kv heads x head_dim x 2 bytes
    assert j["kv_bytes_per_token"] == kv
    row = next(x for x in j["memory"] if x["context"] == 48 and x["batch"] == 8)
    assert row["kv_bytes"] == kv * 48 * 8 and row["total_bytes"] == j["weight_bytes"] + kv * 48 * 8
    r = gpuopt("inspect", tmp_path / "m")
    assert r.returncode == 0 and "Qwen2ForCausalLM" in r.stdout and "KV cache" in r.stdout, r.stdout + r.stderr


def make_tokenizer(path):
    """A byte-level BPE trained here with `tokenizers`, BOS added by its post-processor."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=["<s>", "</s>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = ["the quick brown fox jumps over the lazy dog", "a stitch in time saves nine", "über naïve café"] * 20
    tok.train_from_iterator(corpus, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    tok.save(str(path / "tokenizer.json"))
    return tok


def test_text_prompt_and_stop_string(tmp_path):
    """--prompt through tokenizer.json (ids as `tokenizers` encodes them), the text as it decodes
    the greedy tokens, and a stop string that ends the text where it begins."""
    m = tmp_path / "m"
    os.makedirs(m)
    hf = make_tokenizer(m)
    vocab = hf.get_vocab_size()
    cfg, W = make_model(m, vocab_size=vocab, bos_token_id=0, eos_token_id=1, seed=7)
    text = "the lazy fox"
    ids = hf.encode(text).ids
    assert ids[0] == 0
    want, _ = greedy(cfg, W, ids, 12)
    r = gpuopt("generate", m, "--prompt", text, "--max-new-tokens", 12, "--temperature", 0, "--ignore-eos", "--json")
    assert r.returncode == 0, r.stderr
    seq = json.loads(r.stdout)["sequences"][0]
    assert seq["prompt_ids"] == ids
    assert seq["token_ids"] == want
    full = hf.decode(want, skip_special_tokens=True)
    assert seq["text"] == full
    # Streamed to stdout without --json: the same text, then a newline.
    r = gpuopt("generate", m, "--prompt", text, "--max-new-tokens", 12, "--temperature", 0, "--ignore-eos")
    assert r.returncode == 0 and r.stdout == full + "\n", (r.stdout, full)
    # A stop string from the middle of that text (two characters that first occur past its start).
    k = next(i for i in range(2, len(full) - 2)
             if full.find(full[i:i + 2]) == i and full[i:i + 2].isascii() and full[i:i + 2].isalpha())
    stop = full[k:k + 2]
    r = gpuopt("generate", m, "--prompt", text, "--max-new-tokens", 12, "--temperature", 0, "--ignore-eos",
               "--stop", stop, "--json")
    assert r.returncode == 0, r.stderr
    seq = json.loads(r.stdout)["sequences"][0]
    assert seq["text"] == full[:k] and seq["finish_reason"] == "stop", (seq, stop)
    assert want[:len(seq["token_ids"])] == seq["token_ids"] and len(seq["token_ids"]) < 12
    r = gpuopt("generate", m, "--prompt", text, "--max-new-tokens", 12, "--temperature", 0, "--ignore-eos",
               "--stop", stop)
    assert r.stdout == full[:k] + "\n", (r.stdout, full[:k])
