#!/usr/bin/env python3
"""Issue 38 on the H200: a Llama-2-7B-shaped model (random weights, fp16, saved with transformers'
save_pretrained) served by `gpuopt serve --llm-model`, loaded by `gpuopt perf --service-kind openai`
(streaming /v1/completions, token-id prompts, ignore_eos): 128 in / 128 out at concurrency 1, 64,
256 and 512; 512 in / 256 out at 64; a shared 1,024-token system prompt (+128 own tokens) at 64.
Writes one record per level (runner gpuopt_serve) and the server's metrics after each level.

  python3 scripts/gpu/llm_serve.py --gpuopt build-h200/bin/gpuopt --out $OUT/llm_serve_records.json
"""
import argparse, datetime, json, os, socket, subprocess, sys, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def stop_server(proc):
    """SIGTERM (serve drains), SIGKILL after 30 s."""
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_ready(port, proc, timeout=300):
    t = time.time()
    while time.time() - t < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"serve exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
                if r.status == 200:
                    return time.time() - t
        except Exception:
            pass
        time.sleep(0.5)
    raise SystemExit("serve not ready")


def metrics(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            return r.read().decode()
    except Exception as e:
        return f"# metrics unavailable: {e}"


def metric_sum(text, name):
    tot = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            tot += float(line.rsplit(" ", 1)[1])
    return tot


def write_tokenizer(folder, vocab_size=32000):
    """A byte-level BPE tokenizer.json covering every id of the random model (the 256 byte symbols,
    then pairs of them, each with its merge), so served text decodes like a real model's."""
    if os.path.exists(os.path.join(folder, "tokenizer.json")):
        return
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    alpha = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(alpha)}
    merges = []
    for a in alpha:
        for b in alpha:
            if len(vocab) >= vocab_size:
                break
            if a + b not in vocab:
                vocab[a + b] = len(vocab)
                merges.append((a, b))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.save(os.path.join(folder, "tokenizer.json"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuopt", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/llama7b")
    ap.add_argument("--commit", default="")
    ap.add_argument("--levels", default="128x128@1,128x128@64,128x128@256,128x128@512,512x256@64,shared1024x128@64")
    ap.add_argument("--serve-args", default="")
    a = ap.parse_args()
    out_dir = os.path.dirname(os.path.abspath(a.out))
    if not os.path.exists(os.path.join(a.work, "config.json")):
        from llm import build_model
        os.makedirs(a.work, exist_ok=True)
        build_model(a.work, seed=0)
    write_tokenizer(a.work)
    port, mport = free_port(), free_port()
    log = open(os.path.join(out_dir, "serve.log"), "w")
    cmd = [a.gpuopt, "serve", "--llm-model", a.work, "--llm-device", "cuda", "--dtype", "fp16", "--http-port",
           str(port), "--metrics-port", str(mport), "--grpc-port", str(free_port()), "--max-num-seqs", "512"] + \
        a.serve_args.split()
    print(" ".join(cmd), flush=True)
    t0 = time.time()
    srv = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    recs = []
    try:
        ready = wait_ready(port, srv)
        print(f"serve: ready in {ready:.1f} s", flush=True)
        name = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models"))["data"][0]["id"]
        date = datetime.date.today().isoformat()
        for li, lv in enumerate(a.levels.split(",")):
            shape, conc = lv.split("@")
            conc = int(conc)
            n_req = max(8, min(4 * conc, 1024)) if conc > 1 else 16
            args = [a.gpuopt, "perf", "--service-kind", "openai", "--endpoint-type", "completions",
                    "-u", f"127.0.0.1:{port}", "-m", name, "--concurrency", str(conc), "--num-prompts", str(n_req),
                    # A warm-up of one full concurrency (the measured requests start in the steady state);
                    # a seed per level, so no level's prompts are in the prefix cache from an earlier one.
                    "--warmup-request-count", str(conc), "--ignore-eos", "--json", "--quiet", "--seed", str(1 + li)]
            if shape.startswith("shared"):
                shared, own_out = shape[len("shared"):].split("x")
                shared, new = int(shared), int(own_out)
                import random
                rng = random.Random(3)
                system = [rng.randrange(3, 32000) for _ in range(shared)]
                path = os.path.join("/tmp", "shared_prompts.jsonl")
                with open(path, "w") as f:
                    for _ in range(n_req + min(conc, 64)):
                        f.write(json.dumps({"prompt": system + [rng.randrange(3, 32000) for _ in range(128)],
                                            "max_tokens": new}) + "\n")
                args += ["--input-file", path]
                prompt = shared + 128
            else:
                prompt, new = map(int, shape.split("x"))
                args += ["--vocab-size", "32000", "--synthetic-input-tokens-mean", str(prompt),
                         "--synthetic-input-tokens-stddev", "0", "--output-tokens-mean", str(new),
                         "--output-tokens-stddev", "0"]
            m0 = metrics(mport)
            t = time.time()
            p = subprocess.run(args, capture_output=True, text=True, timeout=300)
            m1 = metrics(mport)
            with open(os.path.join(out_dir, "serve_metrics.txt"), "a") as f:
                f.write(f"### after {lv}\n{m1}\n")
            if p.returncode != 0:
                print(f"{lv}: perf rc {p.returncode}: {p.stderr[-800:]}", flush=True)
                continue
            j = json.loads(p.stdout)["levels"][0]
            hits = metric_sum(m1, "gpuopt:prefix_cache_hits_total") - metric_sum(m0, "gpuopt:prefix_cache_hits_total")
            queries = metric_sum(m1, "gpuopt:prefix_cache_queries_total") - metric_sum(m0, "gpuopt:prefix_cache_queries_total")
            pre = metric_sum(m1, "gpuopt:num_preemptions_total") - metric_sum(m0, "gpuopt:num_preemptions_total")
            rec = {"model": "llama2_7b_shape_random", "precision": "fp16", "runner": "gpuopt_serve", "batch": conc,
                   "concurrency": conc, "prompt_tokens": prompt, "new_tokens": new, "date": date, "commit": a.commit,
                   "requests": j["completed"], "failed": j["failed"], "tok_s": round(j["output_throughput"], 1),
                   "request_s": round(j["request_throughput"], 2),
                   "ttft_ms": round(j["ttft_ms"]["p50"], 2), "ttft_p99_ms": round(j["ttft_ms"]["p99"], 2),
                   "itl_p50_ms": round(j["itl_ms"]["p50"], 3), "itl_p99_ms": round(j["itl_ms"]["p99"], 3),
                   "tpot_p50_ms": round(j["tpot_ms"]["p50"], 3),
                   "e2e_p50_ms": round(j["e2e_ms"]["p50"], 1), "prefix_hit_rate": round(hits / queries, 3) if queries else 0,
                   "preemptions": int(pre), "shared_prefix_tokens": prompt - 128 if shape.startswith("shared") else 0,
                   "source": "scripts/gpu/llm_serve.py: gpuopt serve --llm-model (CUDA, fp16) loaded by gpuopt perf "
                             "--service-kind openai (streaming completions, token-id prompts, ignore_eos)"}
            recs.append(rec)
            print(f"{lv:>22}: {rec['requests']} ok {rec['failed']} failed  {rec['tok_s']:9.1f} out tok/s  "
                  f"TTFT p50 {rec['ttft_ms']:8.1f} p99 {rec['ttft_p99_ms']:8.1f} ms  ITL p50 {rec['itl_p50_ms']:6.2f} "
                  f"p99 {rec['itl_p99_ms']:6.2f} ms  prefix hits {rec['prefix_hit_rate']:.2f}  preempted {pre:.0f}  "
                  f"({time.time() - t:.0f} s)", flush=True)
            json.dump(recs, open(a.out, "w"), indent=1)
    finally:
        stop_server(srv)
        print(f"serve: rc {srv.returncode}; {time.time() - t0:.0f} s in all", flush=True)
        print(open(os.path.join(out_dir, "serve.log")).read()[-1500:], flush=True)


if __name__ == "__main__":
    main()
