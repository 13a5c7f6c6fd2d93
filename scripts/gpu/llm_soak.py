#!/usr/bin/env python3
"""Issue 38's soak on the H200: `gpuopt serve --llm-model` (7B-shaped, fp16) under Poisson load at a
fixed rate (80% of the best measured) for --duration seconds, loaded by `gpuopt perf --service-kind
openai --request-rate`; every 5 s the server's RSS (/proc) and its KV-cache usage, running and
waiting requests (/metrics). Prints the samples and a verdict line (every request answered, RSS and
KV usage flat: the last window's mean within 10% of the first's after warm-up), writes a record.

  python3 scripts/gpu/llm_soak.py --gpuopt G --rate 90 --duration 480 --out $OUT/llm_soak.json
"""
import argparse, datetime, json, os, subprocess, sys, threading, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llm_serve import free_port, metric_sum, metrics, stop_server, wait_ready, write_tokenizer  # noqa: E402


def rss_mb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return -1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuopt", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/llama7b")
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--duration", type=float, default=480)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--commit", default="")
    ap.add_argument("--vocab", type=int, default=32000, help="prompt ids are drawn below this")
    ap.add_argument("--device", default="cuda", help="--llm-device of the server (cpu: a tiny model's soak here)")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.work, "config.json")):
        from llm import build_model
        os.makedirs(a.work, exist_ok=True)
        build_model(a.work, seed=0)
    write_tokenizer(a.work)
    port, mport = free_port(), free_port()
    out_dir = os.path.dirname(os.path.abspath(a.out))
    log = open(os.path.join(out_dir, "soak_serve.log"), "w")
    srv = subprocess.Popen([a.gpuopt, "serve", "--llm-model", a.work, "--llm-device", a.device] +
                           (["--dtype", "fp16"] if a.device != "cpu" else []) + ["--http-port", str(port), "--metrics-port", str(mport), "--grpc-port", str(free_port()),
                            "--max-num-seqs", "512"], stdout=log, stderr=subprocess.STDOUT)
    try:
        print(f"serve: ready in {wait_ready(port, srv):.1f} s", flush=True)
        name = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models"))["data"][0]["id"]
        n = int(a.rate * a.duration)
        perf = subprocess.Popen([a.gpuopt, "perf", "--service-kind", "openai", "--endpoint-type", "completions",
                                 "-u", f"127.0.0.1:{port}", "-m", name, "--request-rate", str(a.rate),
                                 "--num-prompts", str(n), "--ignore-eos", "--json", "--quiet", "--seed", "2",
                                 "--vocab-size", str(a.vocab), "--synthetic-input-tokens-mean", str(a.prompt),
                                 "--synthetic-input-tokens-stddev", "0", "--output-tokens-mean", str(a.new),
                                 "--output-tokens-stddev", "0", "--max-concurrency", "2048"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        samples = []
        t0 = time.time()
        while perf.poll() is None:
            time.sleep(5)
            m = metrics(mport)
            s = {"t": round(time.time() - t0), "rss_mb": round(rss_mb(srv.pid), 1),
                 "kv": round(metric_sum(m, "gpuopt:kv_cache_usage_perc"), 3),
                 "running": metric_sum(m, "gpuopt:num_requests_running"),
                 "waiting": metric_sum(m, "gpuopt:num_requests_waiting")}
            samples.append(s)
            print(json.dumps(s), flush=True)
        out, err = perf.communicate()
        j = json.loads(out)["levels"][0] if perf.returncode == 0 else {}
        if perf.returncode != 0:
            print("perf failed:", err[-1500:], flush=True)
        # After a warm-up (a quarter, at most a minute), the first and the last quarter (at most a
        # minute each) of the time arrivals last.
        win = min(60.0, a.duration / 4)
        body = [s for s in samples if win <= s["t"] <= a.duration]
        first = [s for s in body if s["t"] < 2 * win] or body[:3]
        last = [s for s in body if s["t"] > a.duration - win] or body[-3:]
        mean = lambda xs, k: sum(x[k] for x in xs) / max(1, len(xs))
        rec = {"model": "llama2_7b_shape_random", "precision": "fp16", "runner": "gpuopt_serve_soak",
               "batch": 0, "prompt_tokens": a.prompt, "new_tokens": a.new, "rate_req_s": a.rate,
               "duration_s": a.duration, "date": datetime.date.today().isoformat(), "commit": a.commit,
               "requests": j.get("completed", 0), "failed": j.get("failed", n), "sent": n,
               "tok_s": round(j.get("output_throughput", 0), 1),
               "ttft_p99_ms": round(j.get("ttft_ms", {}).get("p99", -1), 1),
               "itl_p50_ms": round(j.get("itl_ms", {}).get("p50", -1), 3),
               "rss_mb_first_min": round(mean(first, "rss_mb"), 1), "rss_mb_last_min": round(mean(last, "rss_mb"), 1),
               "rss_mb_max": max((s["rss_mb"] for s in samples), default=-1),
               "kv_first_min": round(mean(first, "kv"), 3), "kv_last_min": round(mean(last, "kv"), 3),
               "samples": samples,
               "source": "scripts/gpu/llm_soak.py: gpuopt serve --llm-model under gpuopt perf --request-rate"}
        flat = rec["rss_mb_last_min"] <= 1.1 * rec["rss_mb_first_min"] and rec["kv_last_min"] <= rec["kv_first_min"] * 1.1 + 0.02
        print(f"soak: {rec['requests']}/{n} answered, {rec['failed']} failed; RSS {rec['rss_mb_first_min']} -> "
              f"{rec['rss_mb_last_min']} MB (max {rec['rss_mb_max']}); KV {rec['kv_first_min']} -> {rec['kv_last_min']}; "
              f"{rec['tok_s']} out tok/s; {'flat' if flat else 'NOT flat'}", flush=True)
        json.dump([rec], open(a.out, "w"), indent=1)
    finally:
        stop_server(srv)
        print(f"serve: rc {srv.returncode}", flush=True)


if __name__ == "__main__":
    main()
