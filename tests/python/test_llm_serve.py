"""`gpuopt serve` with a language model beside an ONNX model: the real `openai` client against the
OpenAI endpoints, Triton's generate extension, metrics, and hostile clients.

The model is a tiny random Llama written here (test_llm_generate's writer) with a byte-level BPE
trained with `tokenizers` and Zephyr's chat template. Oracles: the numpy forward pass of
test_llm_generate (greedy tokens, log-probabilities), Hugging Face `tokenizers` (prompt ids, decoded
text), the template's output written out by hand as transformers renders it, and the server's own
non-streamed answer for the streamed one. Runs on the CPU (--llm-device cpu)."""
import asyncio
import json
import os
import re
import socket
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as H  # noqa: E402
from test_llm_generate import forward, greedy, make_model, make_tokenizer  # noqa: E402

ZEPHYR = ("{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + message['content'] + "
          "eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\\n' + message['content'] + eos_token }}\n"
          "{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n"
          "{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}")
LOOPING = "{% for i in range(1000000) %}{% for j in range(1000000) %}{{ i }}{% endfor %}{% endfor %}"
CONTEXT = 160


def llm_folder(path, template, seed=7):
    os.makedirs(path)
    hf = make_tokenizer(path)  # a pathlib.Path
    cfg, W = make_model(path, vocab_size=hf.get_vocab_size(), bos_token_id=0, eos_token_id=1, seed=seed,
                        max_position_embeddings=CONTEXT)
    with open(path / "tokenizer_config.json", "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "chat_template": template}, f)
    return hf, cfg, W


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    hf, cfg, W = llm_folder(root / "tiny", ZEPHYR)
    llm_folder(root / "loopy", LOOPING)
    H.add_sub_model(str(root / "simple" / "1" / "model.onnx"))
    s = H.Server(["--model-repository", str(root), "--llm-device", "cpu", "--num-kv-blocks", "256",
                  "--max-num-seqs", "64", "--max-waiting", "2000", "--http-max-connections-per-client", "0"],
                 timeout=120)
    s.hf, s.cfg, s.W = hf, cfg, W
    s.client = openai.OpenAI(base_url=f"http://{s.url}/v1", api_key="none", max_retries=0, timeout=60)
    yield s
    code, _, out = s.stop()
    assert code == 0, out


def http(url, method, path, body=None, timeout=60):
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(f"http://{url}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def metrics(s):
    with urllib.request.urlopen(f"http://127.0.0.1:{s.metrics_port}/metrics", timeout=10) as r:
        return r.read().decode()


def metric(s, name, model="tiny"):
    m = re.search(rf'^{re.escape(name)}{{model_name="{model}"}} (\S+)$', metrics(s), re.M)
    assert m, name
    return float(m.group(1))


def wait_for(pred, secs=20):
    deadline = time.time() + secs
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def log_softmax(x):
    x = x - x.max()
    return x - np.log(np.exp(x).sum())


# ---- OpenAI endpoints ---------------------------------------------------------------------------

def test_models_and_repository_index_list_both_kinds(srv):
    ids = [m.id for m in srv.client.models.list().data]
    assert "tiny" in ids and "loopy" in ids and "simple" not in ids
    code, body = http(srv.url, "POST", "/v2/repository/index", {})
    names = {e["name"]: e["state"] for e in json.loads(body)}
    assert names.get("tiny") == "READY" and names.get("simple") == "READY", names
    assert http(srv.url, "GET", "/v2/models/tiny/ready")[0] == 200
    assert http(srv.url, "GET", "/v2/health/ready")[0] == 200
    # The ONNX model answers beside it.
    x = np.arange(16, dtype=np.float32)[None]
    code, body = http(srv.url, "POST", "/v2/models/simple/infer",
                      {"inputs": [{"name": n, "shape": [1, 16], "datatype": "FP32", "data": x.ravel().tolist()}
                                  for n in ("INPUT0", "INPUT1")]})
    assert code == 200, body
    out = {o["name"]: o["data"] for o in json.loads(body)["outputs"]}
    assert out["OUTPUT0"] == (2 * x).ravel().tolist()


def test_completion_greedy_tokens_and_logprobs_match_numpy(srv):
    text = "the lazy fox"
    ids = srv.hf.encode(text).ids
    want, _ = greedy(srv.cfg, srv.W, ids, 10)
    r = srv.client.completions.create(model="tiny", prompt=text, max_tokens=10, temperature=0, logprobs=3,
                                      extra_body={"ignore_eos": True})
    c = r.choices[0]
    assert c.text == srv.hf.decode(want, skip_special_tokens=True)
    assert c.finish_reason == "length"
    assert r.usage.prompt_tokens == len(ids) and r.usage.completion_tokens == 10
    assert r.object == "text_completion" and r.model == "tiny" and r.id.startswith("cmpl-")
    # Each token's log-probability from the numpy logits of the sequence so far.
    seq = list(ids)
    for k, t in enumerate(want):
        lp = log_softmax(forward(srv.cfg, srv.W, seq)[-1])
        assert abs(c.logprobs.token_logprobs[k] - lp[t]) < 1e-3, (k, c.logprobs.token_logprobs[k], lp[t])
        # OpenAI's top_logprobs is keyed by token text: ids that decode alike share one entry.
        best3 = np.argsort(lp)[::-1][:3]
        want_top = {}
        for i in best3:
            want_top.setdefault(srv.hf.decode([int(i)]), lp[i])
        got_top = c.logprobs.top_logprobs[k]
        assert set(got_top) == set(want_top), (got_top, want_top)
        for key, v in got_top.items():
            assert abs(v - want_top[key]) < 1e-3, (key, v, want_top[key])
        seq.append(t)
    # Token-id prompts, several at once.
    r2 = srv.client.completions.create(model="tiny", prompt=[ids, ids[:2]], max_tokens=4, temperature=0,
                                       extra_body={"ignore_eos": True})
    assert [c.index for c in r2.choices] == [0, 1]
    assert r2.choices[0].text == srv.hf.decode(want[:4], skip_special_tokens=True)
    assert r2.choices[1].text == srv.hf.decode(greedy(srv.cfg, srv.W, ids[:2], 4)[0], skip_special_tokens=True)


def test_streamed_text_equals_the_whole_answer(srv):
    args = dict(model="tiny", prompt="a stitch in time", max_tokens=12, temperature=0.8, seed=11,
                extra_body={"ignore_eos": True})
    whole = srv.client.completions.create(**args).choices[0].text
    chunks = list(srv.client.completions.create(stream=True, stream_options={"include_usage": True}, **args))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == whole
    assert chunks[-1].usage.completion_tokens == 12 and chunks[-1].choices == []
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"


def test_chat_uses_the_template_and_streams_the_same(srv):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "the quick fox"}]
    prompt = "<|system|>\nBe brief.</s>\n<|user|>\nthe quick fox</s>\n<|assistant|>\n"  # as transformers renders it
    ids = srv.hf.encode(prompt, add_special_tokens=False).ids
    want, _ = greedy(srv.cfg, srv.W, ids, 8)
    r = srv.client.chat.completions.create(model="tiny", messages=msgs, max_tokens=8, temperature=0,
                                           extra_body={"ignore_eos": True}, logprobs=True, top_logprobs=2)
    assert r.object == "chat.completion" and r.choices[0].message.role == "assistant"
    assert r.usage.prompt_tokens == len(ids)
    assert r.choices[0].message.content == srv.hf.decode(want, skip_special_tokens=True)
    assert len(r.choices[0].logprobs.content) == 8 and len(r.choices[0].logprobs.content[0].top_logprobs) == 2
    streamed = srv.client.chat.completions.create(model="tiny", messages=msgs, max_tokens=8, temperature=0,
                                                  extra_body={"ignore_eos": True}, stream=True)
    parts = list(streamed)
    assert parts[0].choices[0].delta.role == "assistant"
    assert "".join(p.choices[0].delta.content or "" for p in parts) == r.choices[0].message.content


def test_n_choices_are_the_seeded_single_requests(srv):
    r = srv.client.completions.create(model="tiny", prompt="the lazy", max_tokens=6, temperature=1.0, seed=100, n=3,
                                      extra_body={"ignore_eos": True})
    assert [c.index for c in r.choices] == [0, 1, 2]
    for i, c in enumerate(r.choices):
        one = srv.client.completions.create(model="tiny", prompt="the lazy", max_tokens=6, temperature=1.0,
                                            seed=100 + i, extra_body={"ignore_eos": True})
        assert one.choices[0].text == c.text
    assert r.usage.completion_tokens == 18


def test_stop_string_ends_the_text(srv):
    text = "the lazy fox"
    want, _ = greedy(srv.cfg, srv.W, srv.hf.encode(text).ids, 12)
    full = srv.hf.decode(want, skip_special_tokens=True)
    k = next(i for i in range(2, len(full) - 2)
             if full.find(full[i:i + 2]) == i and full[i:i + 2].isascii() and full[i:i + 2].isalpha())
    r = srv.client.completions.create(model="tiny", prompt=text, max_tokens=12, temperature=0, stop=[full[k:k + 2]],
                                      extra_body={"ignore_eos": True})
    assert r.choices[0].text == full[:k] and r.choices[0].finish_reason == "stop"


def test_triton_generate_and_generate_stream(srv):
    want = srv.client.completions.create(model="tiny", prompt="über naïve", max_tokens=8, temperature=0,
                                         extra_body={"ignore_eos": True}).choices[0].text
    code, body = http(srv.url, "POST", "/v2/models/tiny/generate",
                      {"text_input": "über naïve", "parameters": {"max_tokens": 8, "temperature": 0, "ignore_eos": True}})
    assert code == 200, body
    j = json.loads(body)
    assert j["model_name"] == "tiny" and j["text_output"] == want
    code, body = http(srv.url, "POST", "/v2/models/tiny/generate_stream",
                      {"text_input": "über naïve", "parameters": {"max_tokens": 8, "temperature": 0, "ignore_eos": True}})
    assert code == 200
    events = [json.loads(line[6:]) for line in body.decode().split("\n\n") if line.startswith("data: ")]
    assert "".join(e["text_output"] for e in events) == want
    code, body = http(srv.url, "POST", "/v2/models/nope/generate", {"text_input": "x"})
    assert code == 404 and "nope" in json.loads(body)["error"]


def test_metrics_move(srv):
    before = metric(srv, "gpuopt:generation_tokens_total")
    prompt_before = metric(srv, "gpuopt:prompt_tokens_total")
    srv.client.completions.create(model="tiny", prompt="the fox", max_tokens=5, temperature=0,
                                  extra_body={"ignore_eos": True})
    assert metric(srv, "gpuopt:generation_tokens_total") == before + 5
    assert metric(srv, "gpuopt:prompt_tokens_total") > prompt_before
    text = metrics(srv)
    for name in ("gpuopt:num_requests_running", "gpuopt:num_requests_waiting", "gpuopt:kv_cache_usage_perc",
                 "gpuopt:num_preemptions_total", "gpuopt:prefix_cache_queries_total", "gpuopt:prefix_cache_hits_total",
                 "gpuopt:time_to_first_token_seconds_bucket", "gpuopt:inter_token_latency_seconds_count",
                 "gpuopt:e2e_request_latency_seconds_sum", "gpuopt:request_queue_time_seconds_count",
                 "gpuopt:requests_finished_total"):
        assert f'{name}{{model_name="tiny"' in text, name
    assert metric(srv, "gpuopt:e2e_request_latency_seconds_count") > 0
    # 5 tokens took at least 5 steps; the runner's time is part of the engine thread's.
    assert metric(srv, "gpuopt:engine_steps_total") >= 5
    assert 0 < metric(srv, "gpuopt:engine_runner_seconds_total") <= metric(srv, "gpuopt:engine_step_seconds_total")
    # A repeated prompt of more than two 16-token blocks: its full blocks come from the prefix cache.
    long_prompt = "the quick brown fox jumps over the lazy dog, a stitch in time saves nine " * 3
    assert len(srv.hf.encode(long_prompt).ids) > 33
    first = srv.client.completions.create(model="tiny", prompt=long_prompt, max_tokens=3, temperature=0)
    hits = metric(srv, "gpuopt:prefix_cache_hits_total")
    again = srv.client.completions.create(model="tiny", prompt=long_prompt, max_tokens=3, temperature=0)
    assert metric(srv, "gpuopt:prefix_cache_hits_total") >= hits + 16
    assert again.choices[0].text == first.choices[0].text


# ---- hostile clients ----------------------------------------------------------------------------

def error_of(code_body):
    code, body = code_body
    e = json.loads(body)["error"]
    assert set(e) == {"message", "type", "param", "code"}, e
    return code, e


def test_bad_requests_get_openai_errors(srv):
    code, e = error_of(http(srv.url, "POST", "/v1/completions", b"{not json"))
    assert code == 400 and e["type"] == "invalid_request_error"
    code, e = error_of(http(srv.url, "POST", "/v1/completions", {"model": "nope", "prompt": "x"}))
    assert code == 404 and e["code"] == "model_not_found"
    code, e = error_of(http(srv.url, "POST", "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 1e9}))
    assert code == 400 and "maximum context length is 160" in e["message"] and e["param"] == "max_tokens"
    t0 = time.time()
    code, e = error_of(http(srv.url, "POST", "/v1/completions", {"model": "tiny", "prompt": "the fox " * 131072}))
    assert code == 400 and "maximum context length" in e["message"], e
    assert time.time() - t0 < 30
    code, e = error_of(http(srv.url, "POST", "/v1/chat/completions", {"model": "tiny", "messages": "hi"}))
    assert code == 400 and e["param"] == "messages"
    with pytest.raises(openai.BadRequestError):
        srv.client.completions.create(model="tiny", prompt="x", temperature=7)


def test_a_looping_template_is_a_400_and_the_server_is_unharmed(srv):
    t0 = time.time()
    code, e = error_of(http(srv.url, "POST", "/v1/chat/completions",
                            {"model": "loopy", "messages": [{"role": "user", "content": "hi"}]}))
    assert code == 400 and "limit" in e["message"], e
    assert time.time() - t0 < 15
    r = srv.client.completions.create(model="tiny", prompt="the", max_tokens=2, temperature=0)
    assert r.choices[0].finish_reason in ("length", "stop")


def stream_request(port, body):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    return s


def test_disconnects_and_slow_readers_free_their_kv_blocks(srv):
    body = {"model": "tiny", "prompt": "the quick brown fox", "max_tokens": 140, "temperature": 1.0, "stream": True,
            "extra": "x", "ignore_eos": True}
    socks = [stream_request(srv.http_port, body) for _ in range(8)]
    for s in socks:
        assert s.recv(4096).startswith(b"HTTP/1.1 200")  # streaming has begun
    for s in socks[:4]:
        s.close()  # gone mid-stream
    # The other four never read again: slow readers. Their streams stay bounded; close them later.
    time.sleep(0.5)
    for s in socks[4:]:
        s.close()
    assert wait_for(lambda: metric(srv, "gpuopt:kv_cache_usage_perc") == 0.0
                    and metric(srv, "gpuopt:num_requests_running") == 0), metrics(srv)
    r = srv.client.completions.create(model="tiny", prompt="the", max_tokens=3, temperature=0)
    assert r.usage.completion_tokens >= 1


def test_a_thousand_concurrent_streams(srv):
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:  # this process holds the 1000 client sockets
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 1200:
        pytest.skip("needs 1200 file descriptors (ulimit -n)")
    async def one(i):
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.http_port)
        data = json.dumps({"model": "tiny", "prompt": f"the fox {i % 7}", "max_tokens": 3, "temperature": 0,
                           "stream": True, "ignore_eos": True}).encode()
        writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                     b"Content-Type: application/json\r\nContent-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(-1), 120)
        writer.close()
        return raw

    async def all_of():
        return await asyncio.gather(*(one(i) for i in range(1000)))

    answers = asyncio.run(all_of())
    ok = [a for a in answers if a.startswith(b"HTTP/1.1 200")]
    busy = [a for a in answers if a.startswith(b"HTTP/1.1 429") or a.startswith(b"HTTP/1.1 503")]
    assert len(ok) + len(busy) == 1000, [a[:40] for a in answers if a not in ok and a not in busy][:3]
    assert len(ok) > 0
    print(f"1000 streams: {len(ok)} answered, {len(busy)} refused at once")
    for a in ok:
        assert a.rstrip().endswith(b"data: [DONE]") or b"data: [DONE]" in a, a[-200:]
    assert wait_for(lambda: metric(srv, "gpuopt:kv_cache_usage_perc") == 0.0)
    r = srv.client.completions.create(model="tiny", prompt="the", max_tokens=2, temperature=0)
    assert r.choices


def test_a_full_queue_answers_429_at_once_and_the_rest_complete(tmp_path):
    """A server of the language model alone (--llm-model), one sequence at a time, two waiting: a
    burst gets 429s in OpenAI's body (RateLimitError in the client); every accepted request
    completes in full."""
    llm_folder(tmp_path / "m", ZEPHYR)
    with H.Server(["--llm-model", f"small={tmp_path / 'm'}", "--llm-device", "cpu", "--max-num-seqs", "1",
                   "--max-waiting", "2", "--num-kv-blocks", "64"], timeout=120) as s:
        client = openai.OpenAI(base_url=f"http://{s.url}/v1", api_key="none", max_retries=0, timeout=120)
        results = [None] * 64

        def one(i):
            try:
                r = client.completions.create(model="small", prompt="the lazy fox", max_tokens=100, temperature=0,
                                              extra_body={"ignore_eos": True})
                results[i] = r.usage.completion_tokens
            except openai.RateLimitError as e:
                results[i] = e.status_code

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(results))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert all(r in (100, 429) for r in results), results
        assert results.count(429) > 0 and results.count(100) >= 3, results
        code, body = http(s.url, "POST", "/v1/completions", {"model": "small", "prompt": "x", "max_tokens": 2})
        assert code == 200, body
        assert [m.id for m in client.models.list().data] == ["small"]
        code, _, out = s.stop()
        assert code == 0, out


def test_a_reader_that_stops_reading_is_cut_off_and_its_blocks_freed(srv):
    """128 choices with top-5 logprobs produce megabytes of events; a client that sends the request
    and never reads fills the socket and then the stream's 1 MiB buffer: the server cancels the
    request (KV usage back to 0) while the connection is still open, and serves others meanwhile."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", srv.http_port))
    data = json.dumps({"model": "tiny", "prompt": "the quick brown fox", "max_tokens": 140, "n": 128, "logprobs": 5,
                       "temperature": 1.0, "seed": 3, "stream": True, "ignore_eos": True}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    try:
        assert wait_for(lambda: metric(srv, "gpuopt:num_requests_running") > 0, 20)
        r = srv.client.completions.create(model="tiny", prompt="the", max_tokens=2, temperature=0)
        assert r.choices
        assert wait_for(lambda: metric(srv, "gpuopt:kv_cache_usage_perc") == 0.0
                        and metric(srv, "gpuopt:num_requests_running") == 0
                        and metric(srv, "gpuopt:num_requests_waiting") == 0, 60), metrics(srv)
        # Cut off before the end: what was sent does not hold the last event.
        s.setblocking(False)
        got = b""
        try:
            while True:
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                got += chunk
        except BlockingIOError:
            pass
        assert b"data: [DONE]" not in got
        assert any("the client reads too slowly" in line for line in srv.log), "".join(srv.log[-20:])
    finally:
        s.close()


def test_concurrent_greedy_requests_give_what_each_gives_alone(srv):
    """32 requests at once are batched by the engine; each answer equals numpy's greedy tokens."""
    words = ["the", "quick", "brown", "fox", "lazy", "dog", "stitch", "time"]
    prompts = [" ".join(words[(i + k) % 8] for k in range(1 + i % 5)) for i in range(32)]
    results = [None] * 32

    def one(i):
        results[i] = srv.client.completions.create(model="tiny", prompt=prompts[i], max_tokens=6, temperature=0,
                                                   extra_body={"ignore_eos": True}).choices[0].text

    threads = [threading.Thread(target=one, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for i, p in enumerate(prompts):
        want, _ = greedy(srv.cfg, srv.W, srv.hf.encode(p).ids, 6)
        assert results[i] == srv.hf.decode(want, skip_special_tokens=True), (i, p)


def test_a_tiny_kv_cache_preempts_and_every_request_completes(tmp_path):
    """12 KV blocks (192 tokens) for 8 sequences that grow to ~70 tokens each: the engine preempts
    (recomputes later) instead of failing, and every answer is still numpy's greedy text."""
    hf, cfg, W = llm_folder(tmp_path / "m", ZEPHYR)
    with H.Server(["--llm-model", str(tmp_path / "m"), "--llm-device", "cpu", "--max-num-seqs", "8",
                   "--num-kv-blocks", "12"], timeout=120) as s:
        client = openai.OpenAI(base_url=f"http://{s.url}/v1", api_key="none", max_retries=0, timeout=120)
        prompts = ["the fox", "a stitch", "the lazy dog", "über", "the quick", "time saves", "brown", "nine"]
        results = [None] * len(prompts)

        def one(i):
            results[i] = client.completions.create(model="m", prompt=prompts[i], max_tokens=64, temperature=0,
                                                   extra_body={"ignore_eos": True}).choices[0].text

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        m = re.search(r'^gpuopt:num_preemptions_total{model_name="m"} (\S+)$', metrics(s), re.M)
        assert m and float(m.group(1)) > 0, metrics(s)
        for i, p in enumerate(prompts):
            want, _ = greedy(cfg, W, hf.encode(p).ids, 64)
            assert results[i] == hf.decode(want, skip_special_tokens=True), (i, p)
        code, _, out = s.stop()
        assert code == 0, out


def test_a_non_streamed_request_whose_client_left_is_cancelled(srv):
    """64 choices of 140 tokens, then the client closes without reading: the engine stops them
    (KV usage back to 0) well before all 8,960 tokens are generated."""
    before = metric(srv, "gpuopt:generation_tokens_total")
    s = socket.create_connection(("127.0.0.1", srv.http_port), timeout=30)
    data = json.dumps({"model": "tiny", "prompt": "the quick brown fox", "max_tokens": 140, "n": 64,
                       "temperature": 1.0, "seed": 5, "ignore_eos": True}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    assert wait_for(lambda: metric(srv, "gpuopt:generation_tokens_total") > before, 20)
    s.close()
    assert wait_for(lambda: metric(srv, "gpuopt:kv_cache_usage_perc") == 0.0
                    and metric(srv, "gpuopt:num_requests_running") == 0
                    and metric(srv, "gpuopt:num_requests_waiting") == 0, 60), metrics(srv)
    assert metric(srv, "gpuopt:generation_tokens_total") - before < 64 * 140


def test_a_model_name_with_quotes_is_escaped_in_the_metrics(tmp_path):
    """--llm-model NAME=DIR takes any name: /metrics escapes it (Prometheus text format), so the
    exposition still parses and the label reads back as given."""
    llm_folder(tmp_path / "m", ZEPHYR)
    name = 'we"ird\\name'
    with H.Server(["--llm-model", f"{name}={tmp_path / 'm'}", "--llm-device", "cpu", "--num-kv-blocks", "64"],
                  timeout=120) as s:
        client = openai.OpenAI(base_url=f"http://{s.url}/v1", api_key="none", max_retries=0, timeout=60)
        client.completions.create(model=name, prompt="the", max_tokens=2, temperature=0)
        text = metrics(s)
        assert 'gpuopt:generation_tokens_total{model_name="we\\"ird\\\\name"} 2' in text, text[:2000]
