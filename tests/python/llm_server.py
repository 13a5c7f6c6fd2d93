"""Shared by the tests that need a real `gpuopt serve` with a language model (the Grafana LLM
panels, `gpuopt perf` in OpenAI mode): a model repository holding one tiny Llama checkpoint with a
`tokenizers`-trained tokenizer, and the server started on it; a server that does not come up
with the model on /v1/models fails the test, naming why."""
import json
import os
import sys
import urllib.error
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "server"))

MODEL = "tiny-llama"


def make_llm_repository(root):
    """<root>/tiny-llama: config.json, model.safetensors, tokenizer.json (a byte-level BPE) and a
    tokenizer_config.json with a chat template. Returns (cfg, weights, tokenizer)."""
    from test_llm_generate import make_model, make_tokenizer
    import pathlib
    m = pathlib.Path(root) / MODEL
    os.makedirs(m, exist_ok=True)
    tok = make_tokenizer(m)
    cfg, W = make_model(m, vocab_size=tok.get_vocab_size(), bos_token_id=0, eos_token_id=1, seed=7,
                        max_position_embeddings=256)
    with open(m / "tokenizer_config.json", "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>",
                   "chat_template": "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"}, f)
    return cfg, W, tok


def start_llm_server(root, *extra):
    """A Server (tests/server/server_harness.py) on the repository, once /v1/models lists the
    model."""
    import server_harness as H
    make_llm_repository(root)
    try:
        s = H.Server(["--model-repository", str(root), *extra])
    except RuntimeError as e:
        pytest.fail(f"gpuopt serve did not start on a repository with a language model: {str(e)[-300:]}")
    try:
        with urllib.request.urlopen(f"http://{s.url}/v1/models", timeout=10) as r:
            models = [m["id"] for m in json.loads(r.read())["data"]]
    except (urllib.error.URLError, ValueError, KeyError) as e:
        s.stop()
        pytest.fail(f"gpuopt serve answered no /v1/models ({e})")
    if MODEL not in models:
        s.stop()
        pytest.fail(f"gpuopt serve does not serve {MODEL} over /v1 (models: {models})")
    return s
