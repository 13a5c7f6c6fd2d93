"""`gpuopt perplexity MODEL_DIR --text FILE` against the numpy forward pass of test_llm_generate.

The text is tokenized by Hugging Face `tokenizers` (the same tokenizer.json), cut into windows of
--context tokens each starting with the tokenizer's BOS, and every token after a window's first is
scored by the float64 oracle: perplexity = exp(mean -log p), top-1 = share of tokens that were the
most probable, the predictions the argmax at each position. Checked on the CPU runner, for several
batches and --max-tokens; bad input exits with one line.
"""
import json
import math
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_llm_generate import forward, gpuopt, make_model, make_tokenizer, one_line_error  # noqa: E402

pytest.importorskip("tokenizers")

TEXT = ("the quick brown fox jumps over the lazy dog. a stitch in time saves nine. "
        "über naïve café, the dog sleeps and the fox runs over the hill in time.\n") * 3


def oracle(cfg, W, ids, bos, context, max_tokens=None):
    if max_tokens:
        ids = ids[:max_tokens]
    per = context - 1
    nll, hits, preds, margins, n = 0.0, 0, [], [], 0
    for i in range(0, len(ids), per):
        w = [bos] + ids[i:i + per]
        if len(w) < 2:
            continue
        logits = forward(cfg, W, w)
        for t in range(len(w) - 1):
            row = logits[t]
            m = row.max()
            lse = m + math.log(np.exp(row - m).sum())
            nll += lse - row[w[t + 1]]
            best = int(np.argmax(row))
            hits += best == w[t + 1]
            preds.append(best)
            top = np.sort(row)[-2:]
            margins.append(top[1] - top[0])
            n += 1
    return math.exp(nll / n), hits / n, n, preds, margins


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("ppl")
    m = d / "m"
    os.makedirs(m)
    hf = make_tokenizer(m)
    cfg, W = make_model(m, vocab_size=hf.get_vocab_size(), bos_token_id=0, eos_token_id=1, seed=3)
    text = d / "text.txt"
    text.write_text(TEXT, encoding="utf-8")
    return m, hf, cfg, W, text


@pytest.mark.parametrize("context,batch,max_tokens", [(40, 3, None), (48, 1, None), (17, 4, 50)])
def test_perplexity_matches_numpy(model, tmp_path, context, batch, max_tokens):
    m, hf, cfg, W, text = model
    ids = hf.encode(TEXT, add_special_tokens=False).ids
    ppl, top1, n, preds, margins = oracle(cfg, W, ids, 0, context, max_tokens)
    pred_file = tmp_path / "pred.txt"
    args = ["perplexity", m, "--text", text, "--context", context, "--batch", batch, "--json",
            "--predictions", pred_file]
    if max_tokens:
        args += ["--max-tokens", max_tokens]
    r = gpuopt(*args)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["scored_tokens"] == n
    # f32 logits against float64: ~1e-6 relative per token's log-probability.
    assert j["perplexity"] == pytest.approx(ppl, rel=1e-4), (j, ppl)
    assert j["top1"] == pytest.approx(top1, abs=1e-12)
    got = [int(x) for x in pred_file.read_text().split()]
    assert len(got) == n
    clear = [i for i in range(n) if margins[i] > 1e-3]
    assert len(clear) > 0.9 * n
    assert [got[i] for i in clear] == [preds[i] for i in clear]


def test_text_output_and_progress(model):
    m, _, _, _, text = model
    r = gpuopt("perplexity", m, "--text", text, "--context", 40)
    assert r.returncode == 0, r.stderr
    assert "perplexity " in r.stdout and "windows of 40" in r.stdout, r.stdout
    assert "perplexity:" in r.stderr  # the progress lines (stderr is not a terminal here)


def test_bad_input_is_one_line(model, tmp_path):
    m, _, _, _, text = model
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    cases = [
        (["perplexity", m, "--text", tmp_path / "missing.txt"], 1, "cannot be read"),
        (["perplexity", m, "--text", empty], 1, "fewer than 2 tokens"),
        (["perplexity", m, "--text", text, "--context", 49], 1, "longer than the model's 48"),
        (["perplexity", tmp_path, "--text", text], 1, "config.json"),
        (["perplexity", m, "--text", text, "--context", 1], 2, "--context"),
        (["perplexity", m, "--text", text, "--precision", "fp16"], 2, "needs --device cuda"),
    ]
    for argv, code, words in cases:
        r = gpuopt(*argv)
        assert r.returncode == code, (argv, r.returncode, r.stderr)
        assert words in one_line_error(r) if code == 1 else words in r.stderr, (argv, r.stderr)


def test_a_folder_without_tokenizer_is_refused(tmp_path):
    make_model(tmp_path / "m", seed=1)
    t = tmp_path / "t.txt"
    t.write_text("hello")
    r = gpuopt("perplexity", tmp_path / "m", "--text", t)
    assert r.returncode == 1 and "tokenizer.json" in one_line_error(r), r.stderr
