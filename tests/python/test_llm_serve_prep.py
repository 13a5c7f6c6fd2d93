"""Requests to generation models are prepared (chat template, tokenizer, submission) off the HTTP
I/O threads: with one I/O thread, a chat request whose template loops until its 2-second render
limit does not hold up a health check or a completion sent while it renders. Oracle: the numpy
forward pass of test_llm_generate (the completion's greedy text) and wall-clock order."""
import os
import sys
import threading
import time

import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as H  # noqa: E402
from test_llm_generate import greedy  # noqa: E402
from test_llm_serve import LOOPING, ZEPHYR, error_of, http, llm_folder  # noqa: E402


def test_a_slow_template_does_not_hold_the_io_thread(tmp_path):
    hf, cfg, W = llm_folder(tmp_path / "tiny", ZEPHYR)
    llm_folder(tmp_path / "loopy", LOOPING)
    cmd = [H.gpuopt_bin(), "serve", "--http-address", "127.0.0.1", "--http-port", "0", "--metrics-port", "0",
           "--grpc-port", "0", "--http-thread-count", "1", "--model-repository", str(tmp_path), "--llm-device", "cpu",
           "--num-kv-blocks", "64"]
    with H.Server([], timeout=120, command=cmd) as s:
        done = {}

        def slow():
            done["slow"] = error_of(http(s.url, "POST", "/v1/chat/completions",
                                         {"model": "loopy", "messages": [{"role": "user", "content": "hi"}]}))
            done["slow_t"] = time.time()

        t = threading.Thread(target=slow)
        t0 = time.time()
        t.start()
        time.sleep(0.3)  # the template is rendering now
        assert http(s.url, "GET", "/v2/health/ready")[0] == 200
        client = openai.OpenAI(base_url=f"http://{s.url}/v1", api_key="none", max_retries=0, timeout=30)
        r = client.completions.create(model="tiny", prompt="the fox", max_tokens=4, temperature=0,
                                      extra_body={"ignore_eos": True})
        fast_t = time.time()
        t.join(30)
        want, _ = greedy(cfg, W, hf.encode("the fox").ids, 4)
        assert r.choices[0].text == hf.decode(want, skip_special_tokens=True)
        code, e = done["slow"]
        assert code == 400 and "limit" in e["message"], e
        # The render takes its whole 2-second limit; the other requests were answered inside it.
        assert done["slow_t"] - t0 > 1.5
        assert fast_t < done["slow_t"] - 0.5, (fast_t - t0, done["slow_t"] - t0)
        code, _, out = s.stop()
        assert code == 0, out
