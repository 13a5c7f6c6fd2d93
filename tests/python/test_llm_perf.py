"""`gpuopt perf --service-kind openai`: the figures it prints against numpy, its schedule and
prompt lengths against numpy's RandomState, and its handling of failures.

Most cases load a small streaming server written here (Python's http.server on loopback,
answering /v1/completions and /v1/chat/completions with server-sent events at known delays): it
records what it received and when, and its timing is controlled, which a real model's is not.
The last case loads a real `gpuopt serve` with a tiny language model (tests/python/llm_server.py)
and fails, naming why, where serve does not come up with it.

Oracles: every percentile, mean and standard deviation in --json recomputed with numpy from the
per-request timings of --export-requests; throughputs and goodput recomputed from the same
records; the measured times bounded by the server's own sleeps; the Poisson arrival offsets, the
sampled lengths and the token-id prompts redrawn with numpy.random.RandomState(seed) (the
generator perf documents) and compared with what the server received."""
import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from gpuopt_cli import gpuopt_bin  # noqa: E402

TOKEN_GAP = 0.004  # seconds between streamed tokens
FIRST_DELAY = 0.010  # before the first token


class FakeOpenAI(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    requests = []  # (arrival time, path, body)
    lock = threading.Lock()
    fail_every = 0  # every Nth request answers 500
    counter = 0
    tokenizer = None  # counts a text prompt's tokens for the usage (set by the fixture)

    def log_message(self, *a):
        pass

    connections = 0  # accepted so far

    def setup(self):
        super().setup()
        with FakeOpenAI.lock:
            FakeOpenAI.connections += 1
        # Each event goes out when written, as a streaming server sends it (no Nagle delay).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _chunk(self, data):
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with FakeOpenAI.lock:
            FakeOpenAI.requests.append((time.monotonic(), self.path, body))
            FakeOpenAI.counter += 1
            n = FakeOpenAI.counter
        if FakeOpenAI.fail_every and n % FakeOpenAI.fail_every == 0:
            msg = json.dumps({"error": {"message": "overloaded", "type": "server_error", "code": 500}}).encode()
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            self.wfile.write(msg)
            return
        chat = self.path.endswith("/chat/completions")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        n_out = body["max_tokens"]
        text = body["messages"][-1]["content"] if chat else body["prompt"]
        prompt_tokens = len(text) if isinstance(text, list) else len(FakeOpenAI.tokenizer.encode(text).ids)
        time.sleep(FIRST_DELAY)
        for i in range(n_out):
            if i:
                time.sleep(TOKEN_GAP)
            piece = f"t{i} "
            choice = {"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece}
            self._chunk(f"data: {json.dumps({'choices': [choice]})}\n\n".encode())
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n_out, "total_tokens": prompt_tokens + n_out}
        self._chunk(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")


class FakeServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # socketserver's 5 would drop concurrent connects (a 1 s SYN retry)


@pytest.fixture()
def fake(tmp_path_factory):
    from test_llm_generate import make_tokenizer
    FakeOpenAI.tokenizer = make_tokenizer(tmp_path_factory.mktemp("tok"))
    FakeOpenAI.requests = []
    FakeOpenAI.counter = 0
    FakeOpenAI.connections = 0
    FakeOpenAI.fail_every = 0
    srv = FakeServer(("127.0.0.1", 0), FakeOpenAI)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def perf(url, *args, tmp=None, timeout=120):
    argv = [gpuopt_bin(), "perf", "--service-kind", "openai", "-m", "fake", "-u", url, "--json", *map(str, args)]
    export = None
    if tmp is not None:
        export = os.path.join(tmp, "requests.jsonl")
        argv += ["--export-requests", export]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    recs = None
    if export and os.path.exists(export):
        with open(export) as f:
            recs = [json.loads(l) for l in f]
    return r, recs


def np_stat(v):
    v = np.asarray(v, dtype=np.float64)
    return {"mean": v.mean(), "stddev": v.std(), "min": v.min(), "max": v.max(), "p50": np.percentile(v, 50),
            "p90": np.percentile(v, 90), "p99": np.percentile(v, 99), "count": len(v)}


def check_level(level, recs, slo=None):
    ok = [r for r in recs if not r["error"]]
    assert level["completed"] == len(ok) and level["failed"] == len(recs) - len(ok)
    ms = lambda a, b: (np.asarray(a) - np.asarray(b)) * 1e3  # noqa: E731
    want = {
        "ttft_ms": ms([r["first_token"] for r in ok], [r["sent"] for r in ok]),
        "e2e_ms": ms([r["done"] for r in ok], [r["sent"] for r in ok]),
        "itl_ms": np.concatenate([np.diff(r["chunk_times"]) * 1e3 for r in ok]),
        "tpot_ms": [(r["done"] - r["first_token"]) * 1e3 / (r["output_tokens"] - 1) for r in ok if r["output_tokens"] > 1],
    }
    for k, v in want.items():
        got, exp = level[k], np_stat(v)
        for f in exp:
            assert got[f] == pytest.approx(exp[f], rel=1e-9, abs=1e-9), (k, f, got[f], exp[f])
    duration = max(r["done"] for r in recs) - min(r["sent"] for r in recs)
    assert level["duration_s"] == pytest.approx(duration, rel=1e-9)
    out_tokens = sum(r["output_tokens"] for r in ok)
    assert level["output_tokens"] == out_tokens
    assert level["output_throughput"] == pytest.approx(out_tokens / duration, rel=1e-9)
    assert level["request_throughput"] == pytest.approx(len(ok) / duration, rel=1e-9)
    if slo:
        good = [r for r in ok if (r["first_token"] - r["sent"]) * 1e3 <= slo["ttft"]
                and (r["output_tokens"] < 2 or (r["done"] - r["first_token"]) * 1e3 / (r["output_tokens"] - 1) <= slo["itl"])]
        assert level["good_requests"] == len(good)
        assert level["goodput"] == pytest.approx(len(good) / duration, rel=1e-9)


def test_concurrency_levels_figures_equal_numpy(fake, tmp_path):
    r, recs = perf(fake, "--endpoint-type", "completions", "--concurrency", "1,4", "--num-prompts", 12,
                   "--synthetic-input-tokens-mean", 16, "--output-tokens-mean", 6, "--output-tokens-stddev", 2,
                   "--goodput", "ttft:15", "itl:6", tmp=tmp_path)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert [l["concurrency"] for l in j["levels"]] == [1, 4]
    assert j["endpoint"] == "/v1/completions"
    for level in j["levels"]:
        mine = [x for x in recs if x["concurrency"] == level["concurrency"]]
        assert len(mine) == 12 and level["failed"] == 0
        check_level(level, mine, slo={"ttft": 15, "itl": 6})
        for x in mine:
            # The server's own sleeps bound what the client measured.
            assert x["first_token"] - x["sent"] >= FIRST_DELAY
            # (single gaps may shrink on the wire, when one chunk is late: the whole stream cannot)
            assert x["done"] - x["sent"] >= FIRST_DELAY + (x["max_tokens"] - 1) * TOKEN_GAP
            # Streaming seen as it streams: the first token was read no later than the server's
            # last sleep before the end (a client that buffered the body would see it at `done`).
            assert x["first_token"] <= x["done"] - (x["max_tokens"] - 1) * TOKEN_GAP
            assert x["output_tokens"] == x["max_tokens"] == len(x["chunk_times"])
            assert x["text"] == "".join(f"t{i} " for i in range(x["max_tokens"]))
    # Concurrency 1: one request at a time (each sent after the previous one ended).
    c1 = sorted((x for x in recs if x["concurrency"] == 1), key=lambda x: x["sent"])
    assert all(b["sent"] >= a["done"] for a, b in zip(c1, c1[1:]))
    # Concurrency 4: at some moment four requests were in flight, never five.
    c4 = [x for x in recs if x["concurrency"] == 4]
    inflight = max(sum(1 for y in c4 if y["sent"] <= x["sent"] < y["done"]) for x in c4)
    assert inflight == 4


def test_closed_loop_warm_up_flows_into_the_measured_requests(fake, tmp_path):
    """--warmup-request-count at a concurrency: the warm-up requests are the first of one continuous
    run, so no measured request starts in a burst at time 0; the server saw warm-up + measured."""
    before = len(FakeOpenAI.requests)
    r, recs = perf(fake, "--endpoint-type", "completions", "--concurrency", 4, "--num-prompts", 8,
                   "--warmup-request-count", 4, "--synthetic-input-tokens-mean", 8, "--output-tokens-mean", 4,
                   "--output-tokens-stddev", 0, tmp=tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(FakeOpenAI.requests) - before == 12
    assert json.loads(r.stdout)["levels"][0]["num_prompts"] == 8 and len(recs) == 8
    # Times are from the start of the run: each measured request went out when a warm-up one (or an
    # earlier measured one) ended, at least one whole request (first delay + 3 gaps) after the start.
    assert min(x["sent"] for x in recs) >= FIRST_DELAY + 3 * TOKEN_GAP
    inflight = max(sum(1 for y in recs if y["sent"] <= x["sent"] < y["done"]) for x in recs)
    assert inflight <= 4


def test_poisson_schedule_lengths_and_prompts_equal_numpy(fake, tmp_path):
    seed, n, rate, vocab = 1234, 40, 200.0, 50
    r, recs = perf(fake, "--endpoint-type", "completions", "--request-rate", rate, "--num-prompts", n, "--seed", seed,
                   "--synthetic-input-tokens-mean", 8, "--synthetic-input-tokens-stddev", 3, "--output-tokens-mean", 3,
                   "--output-tokens-stddev", 1, "--vocab-size", vocab, tmp=tmp_path)
    assert r.returncode == 0, r.stderr
    rs = np.random.RandomState(seed)
    rnd = lambda x: max(1, int(math.floor(x + 0.5)))  # noqa: E731 - half away from zero (all positive here)
    in_len = [rnd(x) for x in rs.normal(8, 3, n)]
    out_len = [rnd(x) for x in rs.normal(3, 1, n)]
    prompts = [rs.randint(0, vocab, size=k).tolist() for k in in_len]
    arrivals = np.cumsum(rs.standard_exponential(n) / rate)
    recs.sort(key=lambda x: x["index"])
    assert [x["scheduled"] for x in recs] == pytest.approx(arrivals.tolist(), rel=1e-12, abs=1e-12)
    assert [x["max_tokens"] for x in recs] == out_len
    assert [x["request"]["prompt"] for x in recs] == prompts
    # What the server received (requests sent close together may arrive in either order).
    got = [b for _, _, b in FakeOpenAI.requests]
    assert sorted(map(json.dumps, (b["prompt"] for b in got))) == sorted(map(json.dumps, prompts))
    assert all(b["stream"] is True and b["stream_options"] == {"include_usage": True} for b in got)
    # Sent on schedule: no earlier than planned, and (16-way pool, idle server) soon after.
    late = [x["sent"] - x["scheduled"] for x in recs]
    assert min(late) >= 0 and np.median(late) < 0.05, late
    check_level(json.loads(r.stdout)["levels"][0], recs)
    # The input tokens are the server's usage (the ids it received).
    assert [x["input_tokens"] for x in recs] == in_len


def test_open_loop_holds_no_more_connections_than_requests_in_flight(fake, tmp_path):
    """Many waiting workers (--max-concurrency 64) but few requests in flight: the connections are
    pooled, so the server sees about as many as the peak of requests overlapping in time (a
    connection per worker would be 64, past a per-client cap)."""
    r, recs = perf(fake, "--endpoint-type", "completions", "--request-rate", 100, "--num-prompts", 60, "--seed", 5,
                   "--max-concurrency", 64, "--synthetic-input-tokens-mean", 4, "--output-tokens-mean", 2,
                   "--vocab-size", 50, tmp=tmp_path)
    assert r.returncode == 0, r.stderr
    events = sorted([(x["sent"], 1) for x in recs] + [(x["done"], -1) for x in recs])
    peak = max(np.cumsum([e for _, e in events]))
    # A connection goes back to the pool just after its request's end is recorded, so on a loaded
    # machine a few more than the peak may open; one per worker would be 60.
    assert FakeOpenAI.connections <= max(2 * peak, peak + 8), (FakeOpenAI.connections, peak)
    assert FakeOpenAI.connections < 40 and peak < 20  # far fewer than the workers


def test_chat_with_a_tokenizer_and_failures_counted(fake, tmp_path):
    from test_llm_generate import make_tokenizer
    hf = make_tokenizer(tmp_path)
    FakeOpenAI.fail_every = 3
    r, recs = perf(fake, "--endpoint-type", "chat", "--tokenizer", tmp_path, "--concurrency", 2, "--num-prompts", 9,
                   "--synthetic-input-tokens-mean", 12, "--output-tokens-mean", 4, tmp=tmp_path)
    assert r.returncode == 0, r.stderr
    level = json.loads(r.stdout)["levels"][0]
    assert level["failed"] == 3 and level["completed"] == 6
    assert "HTTP 500" in level["first_error"] and "overloaded" in level["first_error"]
    assert "3 of 9 requests failed" in r.stderr
    check_level(level, recs)
    bodies = [b for _, p, b in FakeOpenAI.requests]
    assert all(p == "/v1/chat/completions" for _, p, _ in FakeOpenAI.requests)
    for b in bodies:
        (msg,) = b["messages"]
        assert msg["role"] == "user"
        # Synthetic text of the asked length, as `tokenizers` counts it, and printable.
        assert len(hf.encode(msg["content"], add_special_tokens=False).ids) == 12, msg
        assert msg["content"].isprintable(), msg
    # The input tokens are the server's usage (the fake counts with `tokenizers`, BOS included).
    assert sorted(x["input_tokens"] for x in recs if not x["error"]) == [13] * 6


def test_input_file_prompts(fake, tmp_path):
    f = tmp_path / "prompts.jsonl"
    f.write_text('{"text": "hello there", "max_tokens": 2}\n\n{"prompt": [5, 6, 7]}\n')
    r, recs = perf(fake, "--endpoint-type", "completions", "--input-file", f, "--num-prompts", 4,
                   "--output-tokens-mean", 3, tmp=tmp_path)
    assert r.returncode == 0, r.stderr
    got = [b for _, _, b in sorted(FakeOpenAI.requests, key=lambda x: x[0])]
    assert sorted(json.dumps(b["prompt"]) for b in got) == sorted(['"hello there"', "[5, 6, 7]"] * 2)
    assert sorted(b["max_tokens"] for b in got) == [2, 2, 3, 3]


def one_line(r):
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


@pytest.mark.parametrize("args, code, wants", [
    (["--concurrency", "2", "--request-rate", "5"], 2, ["--concurrency and --request-rate"]),
    (["--goodput", "ttft:fast"], 2, ["--goodput 'ttft:fast'"]),
    (["--endpoint-type", "chat"], 2, ["--tokenizer"]),
    (["--max-concurrency", "4"], 2, ["--max-concurrency goes with --request-rate"]),
    (["--endpoint-type", "completions", "--input-file", "/nonexistent-gpuopt-dir/p.jsonl"], 1, ["/nonexistent-gpuopt-dir/p.jsonl"]),
    (["--endpoint-type", "completions", "--tokenizer", "/nonexistent-gpuopt-dir"], 1, ["/nonexistent-gpuopt-dir"]),
])
def test_bad_input_is_one_line(fake, args, code, wants):
    r, _ = perf(fake, "--num-prompts", 2, *args)
    assert r.returncode == code, (r.returncode, r.stderr)
    line = one_line(r)
    for w in wants:
        assert w in line, line
    assert not FakeOpenAI.requests


def test_bad_input_file_lines_name_the_line(fake, tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text('{"text": "ok"}\n{"text": 5}\n')
    r, _ = perf(fake, "--endpoint-type", "completions", "--input-file", f)
    assert r.returncode == 2 and "line 2" in one_line(r), r.stderr


def test_unreachable_server_exits_1_with_one_line():
    r, _ = perf("127.0.0.1:1", "--endpoint-type", "completions", "--num-prompts", 3)
    assert r.returncode == 1
    line = one_line(r)
    assert "no request succeeded" in line and "127.0.0.1:1" in line, line


def test_against_gpuopt_serve(tmp_path):
    """A real server with a tiny Llama: every request completes, the tokens perf counted are the
    ones the server's own counter says it generated, and each streamed text equals the text
    of the same request made without streaming."""
    from llm_server import MODEL, start_llm_server
    server = start_llm_server(tmp_path / "repo")
    try:
        def generated():
            import urllib.request
            with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as m:
                for line in m.read().decode().splitlines():
                    if line.startswith("gpuopt:generation_tokens_total{") and f'model_name="{MODEL}"' in line:
                        return float(line.split()[-1])
            return 0.0

        before = generated()
        argv = [gpuopt_bin(), "perf", "--service-kind", "openai", "-m", MODEL, "-u", server.url, "--json",
                "--endpoint-type", "completions", "--tokenizer", str(tmp_path / "repo" / MODEL), "--concurrency", "4",
                "--num-prompts", "8", "--synthetic-input-tokens-mean", "12", "--output-tokens-mean", "6",
                "--export-requests", str(tmp_path / "r.jsonl")]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        level = json.loads(r.stdout)["levels"][0]
        assert level["completed"] == 8 and level["failed"] == 0, level
        assert generated() - before == level["output_tokens"]
        with open(tmp_path / "r.jsonl") as f:
            recs = [json.loads(l) for l in f]
        check_level(level, recs)
        assert all(0 < x["output_tokens"] <= x["max_tokens"] for x in recs)
        import urllib.request
        for x in recs[:3]:
            body = dict(x["request"], stream=False)
            body.pop("stream_options")
            req = urllib.request.Request(f"http://{server.url}/v1/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as resp:
                assert json.loads(resp.read())["choices"][0]["text"] == x["text"]
    finally:
        server.stop()
