"""docs/performance.md's tables and the README's figures, generated from docs/perf/h200.json.

- The model table (scripts/gpu/compare.py's records): one row per model x exporter x batch, one
  column per runner (device ms, median), the best torch figure and gpuopt's speed-up over it, and
  gpuopt's accuracy beside PyTorch fp16's.
- The language-model table (scripts/gpu/llm.py's records, the ones with `tok_s`): one row per
  model x batch x prompt x new tokens x precision, gpuopt beside transformers (`hf_eager`).
- The quantized language-model tables (scripts/gpu/llm_quant.py's records): tok/s of the packed
  kernels beside fp16 from one device call (`speed`), and perplexity on held-out text of a small
  model trained on the GPU machine (`accuracy`, runner `gpuopt_perplexity`).
- The serving table (scripts/gpu/llm_serve.py's records, runner `gpuopt_serve`; the soak's,
  `gpuopt_serve_soak`): one row per load level.
- The KServe serving table (scripts/gpu/serve_scale.sh's records, runner `gpuopt_serve` with
  `infer_per_s`): one row per model x GPUs x protocol x perf client x concurrency.
- The CPU table (docs/perf/cpu.json, tools/cpu_bench.py's records): per host and thread count,
  gpuopt's fast CPU backend beside ONNX Runtime's CPU provider and gpuopt's reference kernels.
- The README's headline figures (ResNet-50 and BERT-base fp16 at batch 1/32/256, the language
  model's decode rate), between the README's readme-figures markers.

  python3 tools/perf_table.py            # rewrite the table between the markers in place
  python3 tools/perf_table.py --check    # exit 1 if the document is not what the JSON gives
  python3 tools/perf_table.py --merge NEW.json   # a later compare run's records into the JSON:
      for each (model, batch, precision) it measured, its records replace every earlier record
      of that key except stored ones (torch.compile from a stored run), so each row's gpuopt and
      eager figures still come from one device call; a file of stored records only (each with
      `source`) replaces just those runners' records; then the table is rewritten
"""
import argparse, json, os, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- perf-table:begin (tools/perf_table.py) -->", "<!-- perf-table:end -->"
LLM_BEGIN, LLM_END = "<!-- llm-table:begin (tools/perf_table.py) -->", "<!-- llm-table:end -->"
QUANT_BEGIN, QUANT_END = "<!-- llm-quant-table:begin (tools/perf_table.py) -->", "<!-- llm-quant-table:end -->"
SERVE_BEGIN, SERVE_END = "<!-- llm-serve-table:begin (tools/perf_table.py) -->", "<!-- llm-serve-table:end -->"
KSERVE_BEGIN, KSERVE_END = "<!-- serve-table:begin (tools/perf_table.py) -->", "<!-- serve-table:end -->"
CPU_BEGIN, CPU_END = "<!-- cpu-table:begin (tools/perf_table.py) -->", "<!-- cpu-table:end -->"
README_BEGIN, README_END = "<!-- readme-figures:begin (tools/perf_table.py) -->", "<!-- readme-figures:end -->"
RUNNERS = [("torch_eager", "eager"), ("torch_eager_channels_last", "eager CL"),
           ("torch_compile", "compile"), ("torch_compile_max_autotune", "compile max-autotune")]
ORDER = ["resnet50", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny", "vit_b_16", "bert_base", "gpt2"]


def fmt_ms(r):
    if r is None:
        return ""
    if r.get("error"):
        return "fails"
    s = f"{r['ms']:.2f}"
    return s + "*" if r.get("source") else s


def is_llm(r):
    return "tok_s" in r or r.get("runner") == "hf_eager"


def is_kserve(r):
    """scripts/gpu/serve_scale.sh's records: the server's front ends, and the engine figure beside them."""
    return r.get("source") == "serve_scale.sh" or (r.get("runner") == "gpuopt_serve" and "infer_per_s" in r)


def render(records):
    recs = [r for r in records if r.get("batch") and not is_llm(r) and not is_kserve(r)]
    keys = sorted({(r["model"], r["batch"], r.get("precision", "fp16")) for r in recs},
                  key=lambda k: (ORDER.index(k[0]) if k[0] in ORDER else 99, k[0], k[1], k[2]))
    head = ["model", "exporter", "batch", "precision", "gpuopt ms", "items/s"] + [n for _, n in RUNNERS] + \
           ["gpuopt vs best torch", "rel L2 gpuopt / torch fp16", "gpuopt execution", "commit"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    stored = set()
    for model, batch, prec in keys:
        same = [r for r in recs if (r["model"], r["batch"], r.get("precision", "fp16")) == (model, batch, prec)]
        torch_r = {r["runner"]: r for r in same if r["runner"] in dict(RUNNERS)}
        stored |= {r["source"] for r in torch_r.values() if r.get("source")}
        best = min((r["ms"] for r in torch_r.values() if r.get("ms")), default=None)
        eager_err = torch_r.get("torch_eager", {}).get("rel_l2_vs_fp32")
        for g in sorted((r for r in same if r["runner"] == "gpuopt"), key=lambda r: r.get("exporter", "")):
            ok = g.get("ms") and not g.get("error")
            speed = f"{best / g['ms']:.2f}x" if ok and best else ""
            acc = ""
            if g.get("rel_l2_vs_fp32") is not None:
                acc = f"{g['rel_l2_vs_fp32']:.1e}" + (f" / {eager_err:.1e}" if eager_err is not None else "")
            lines.append("| " + " | ".join([
                model, g.get("exporter", ""), str(batch), prec, f"**{g['ms']:.2f}**" if ok else "fails",
                f"{g['items_per_s']:.0f}" if ok else "", *[fmt_ms(torch_r.get(k)) for k, _ in RUNNERS], speed, acc,
                (g.get("execution", "") if ok else g.get("error", ""))[:80].replace("|", "/"),
                g.get("commit", "")]) + " |")
    dates = sorted({r.get("date", "") for r in recs if not r.get("source")})
    commits = sorted({r.get("commit", "") for r in recs if r.get("runner") == "gpuopt" and r.get("commit")})
    foot = [f"Device time in ms, median, {', '.join(d for d in dates if d)}; gpuopt at commit "
            f"{', '.join(commits) or '?'}; torch runners in fp16. int8 and fp8 rows are gpuopt alone: "
            "compare them with the model's fp16 row."]
    if stored:
        foot.append("`*`: from a stored run, not this run (torch.compile takes minutes per model): "
                    + "; ".join(sorted(stored)) + ".")
    return "\n".join(lines + [""] + foot)


LLM_KEY = ("model", "batch", "prompt_tokens", "new_tokens", "precision")


def render_llm(records):
    """The language-model table: gpuopt and transformers per (model, batch, prompt, output, precision)."""
    recs = [r for r in records if is_llm(r) and r.get("runner") in ("gpuopt", "hf_eager") and not r.get("quant_kernels")]
    if not recs:
        return "No language-model records yet."
    keys = sorted({tuple(r.get(k) or 0 for k in LLM_KEY) for r in recs}, key=lambda k: tuple(map(str, k[:1])) + k[1:])
    head = ["model", "batch", "prompt", "new tokens", "precision", "gpuopt tok/s", "gpuopt decode tok/s",
            "transformers tok/s", "ratio", "gpuopt TTFT ms", "transformers TTFT ms", "gpuopt ITL p50 / p99 ms",
            "decode HBM roofline", "commit"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k in keys:
        same = {r["runner"]: r for r in recs if tuple(r.get(f) or 0 for f in LLM_KEY) == k}
        g, h = same.get("gpuopt"), same.get("hf_eager")
        def tok(r, f="tok_s"):
            return "" if r is None else ("fails" if r.get("error") else f"{r[f]:.0f}" if r.get(f) else "")
        ratio = f"{g['tok_s'] / h['tok_s']:.1f}x" if g and h and g.get("tok_s") and h.get("tok_s") else ""
        itl = f"{g['itl_p50_ms']:.2f} / {g['itl_p99_ms']:.2f}" if g and g.get("itl_p50_ms") is not None else ""
        roof = f"{100 * g['roofline_frac']:.0f}%" if g and g.get("roofline_frac") is not None else ""
        lines.append("| " + " | ".join([
            k[0], str(k[1]), str(k[2]), str(k[3]), k[4], f"**{tok(g)}**" if g else "", tok(g, "decode_tok_s"), tok(h),
            ratio,
            f"{g['ttft_ms']:.1f}" if g and g.get("ttft_ms") is not None else "",
            f"{h['ttft_ms']:.1f}" if h and h.get("ttft_ms") is not None else "", itl, roof,
            (g or {}).get("commit", "")]) + " |")
    dates = sorted({r.get("date", "") for r in recs})
    return "\n".join(lines + ["", f"Greedy, random prompt ids, measured {', '.join(d for d in dates if d)} "
                              "(`scripts/gpu/llm.py`, one device call). *tok/s*: output tokens per second over "
                              "all sequences from the request to the last token (prefill included); *decode "
                              "tok/s*: the decode steps alone; *ratio*: gpuopt's tok/s over transformers'; "
                              "*TTFT*: time to first token; *ITL*: inter-token latency; *decode HBM roofline*: "
                              "the bytes a decode step must read (weights and KV cache) over its time, against "
                              "the copy bandwidth measured in the same call."])


def is_quant_speed(r):
    return str(r.get("source", "")).startswith("scripts/gpu/llm_quant.py speed")


def render_llm_quant(records):
    """Quantized weights beside fp16 (one llm_quant.py speed call) and the trained model's perplexity."""
    speed_all = [r for r in records if is_quant_speed(r) and r.get("runner") == "gpuopt"]
    short = min((r["prompt_tokens"] for r in speed_all), default=0)
    speed = [r for r in speed_all if r["prompt_tokens"] == short and "KV cache" not in r["precision"]]
    long_ctx = [r for r in speed_all if r not in speed]
    acc = [r for r in records if r.get("runner") == "gpuopt_perplexity"]
    mem = [r for r in records if r.get("runner") == "gpuopt_memory"]
    out = []
    if speed:
        batches = sorted({r["batch"] for r in speed})
        precs = list(dict.fromkeys(r["precision"] for r in speed))
        fp16 = {r["batch"]: r for r in speed if r["precision"] == "fp16"}
        head = ["model", "weights", "weight GB"] + [f"batch {b} tok/s (vs fp16)" for b in batches] + \
               ["batch 1 decode roofline", "top-1 agreement with fp16", "commit"]
        out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for p in precs:
            row = {r["batch"]: r for r in speed if r["precision"] == p}
            any_r = next(iter(row.values()))
            cells = [any_r["model"], p, f"{any_r.get('weights_bytes', 0) / 1e9:.2f}"]
            for b in batches:
                r = row.get(b)
                if not r:
                    cells.append("")
                    continue
                ratio = f" ({r['tok_s'] / fp16[b]['tok_s']:.2f}x)" if b in fp16 and p != "fp16" else ""
                cells.append(f"**{r['tok_s']:.0f}**{ratio}")
            r1 = row.get(1, {})
            cells.append(f"{100 * r1['roofline_frac']:.0f}%" if r1.get("roofline_frac") is not None else "")
            cells.append(f"{100 * r1['agreement_vs_fp16']:.1f}%" if r1.get("agreement_vs_fp16") is not None else "")
            cells.append(any_r.get("commit", ""))
            out.append("| " + " | ".join(cells) + " |")
        prompt = speed[0]["prompt_tokens"], speed[0]["new_tokens"]
        out += ["", f"{prompt[0]}-token random prompts, {prompt[1]} new tokens, greedy, `--quant-kernels` for the "
                "quantized folders (made by `gpuopt quantize` from the fp16 folder), measured "
                f"{', '.join(sorted({r['date'] for r in speed}))} (`scripts/gpu/llm_quant.py speed`, one device call). "
                "*decode roofline*: the bytes a decode step reads (packed weights and KV cache) over its time, "
                "against the measured copy bandwidth. *top-1 agreement*: the share of positions of a text where "
                "the quantized model's most probable token is fp16's (`gpuopt perplexity --predictions`); on random "
                "weights the top logits are near ties, so this measures perturbation, not quality."]
    if long_ctx:
        base = {(r["batch"], r["prompt_tokens"]): r for r in speed_all if r["precision"] == "fp16"}
        head = ["weights, cache", "batch", "prompt tokens", "tok/s (with prefill)", "decode tok/s",
                "decode vs fp16 weights and cache", "decode roofline", "commit"]
        out += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in sorted(long_ctx, key=lambda r: (r["prompt_tokens"], r["batch"])):
            b = base.get((r["batch"], r["prompt_tokens"]))
            ratio = f"{r['decode_tok_s'] / b['decode_tok_s']:.2f}x" if b and r is not b else ""
            out.append("| " + " | ".join([r["precision"], str(r["batch"]), str(r["prompt_tokens"]),
                                          f"{r['tok_s']:.0f}", f"**{r['decode_tok_s']:.0f}**", ratio,
                                          f"{100 * r['roofline_frac']:.0f}%" if r.get("roofline_frac") else "",
                                          r.get("commit", "")]) + " |")
        out += ["", "The KV cache in fp16 and in FP8 (e4m3, `--kv-cache-dtype fp8`), and 2,048-token prompts, where "
                "a decode step reads the cache as much as the weights; same call and method as the table above. "
                "*tok/s (with prefill)*: new tokens over the whole run, prompt processing included; *decode tok/s*: "
                "the decode steps alone."]
    if mem:
        out += ["", "GPU memory of one process (nvidia-smi, peak while generating) for the 4-bit 7B with its cache for "
                "one sequence: " + "; ".join(f"{r['kv_cache_dtype']} cache of {r['context_tokens']} tokens "
                                            f"**{r['peak_gpu_mib'] / 1024:.2f} GiB** (weights "
                                            f"{r['weights_bytes'] / 2**30:.2f} GiB)" for r in mem) + "."]
    if acc:
        a0 = acc[0]
        head = ["weights", "path", "perplexity", "vs fp16", "top-1", "top-1 agreement with fp16", "commit"]
        out += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in acc:
            out.append("| " + " | ".join([r["precision"], r["kernels"], f"{r['perplexity']:.3f}",
                                          f"{100 * r['perplexity_vs_fp16']:+.2f}%", f"{100 * r['top1']:.1f}%",
                                          f"{100 * r['agreement_vs_fp16']:.1f}%", r.get("commit", "")]) + " |")
        out += ["", f"A Llama of {a0.get('parameters', 0) / 1e6:.1f} M parameters (6 layers, hidden 384, vocabulary "
                f"4,096) trained on the GPU machine for {a0.get('steps', 0)} steps on the repository's own text "
                f"({a0.get('train_tokens', 0):,} tokens), saved in fp16, quantized by `gpuopt quantize`; perplexity "
                f"of `gpuopt perplexity --device cuda` on {a0['scored_tokens']:,} held-out tokens in windows of "
                f"{a0['context']}, measured {a0['date']} (`scripts/gpu/llm_quant.py accuracy`). On its first 2,048 "
                f"tokens the fp32 CPU runner gives {a0.get('cpu_fp32_perplexity_2k')} and CUDA fp16 "
                f"{a0.get('cuda_fp16_perplexity_2k')} (windows of 256)."]
    return "\n".join(out) if out else "No quantized language-model records yet."


def render_llm_serve(records):
    """The serving table (scripts/gpu/llm_serve.py's and llm_soak.py's records): one row per load level."""
    recs = sorted((r for r in records if r.get("runner") == "gpuopt_serve" and "tok_s" in r),
                  key=lambda r: (r["model"], r.get("shared_prefix_tokens", 0), r["prompt_tokens"], r["new_tokens"],
                                 r["concurrency"]))
    if not recs:
        return "No serving records yet."
    head = ["model", "prompt / new tokens", "concurrency", "output tok/s", "requests/s", "TTFT p50 / p99 ms",
            "ITL p50 / p99 ms", "prefix-cache hits", "preempted", "failed", "commit"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in recs:
        shape = f"{r['prompt_tokens']} / {r['new_tokens']}"
        if r.get("shared_prefix_tokens"):
            shape += f" ({r['shared_prefix_tokens']} shared)"
        lines.append("| " + " | ".join([
            r["model"], shape, str(r["concurrency"]), f"**{r['tok_s']:.0f}**", f"{r['request_s']:.1f}",
            f"{r['ttft_ms']:.1f} / {r['ttft_p99_ms']:.1f}", f"{r['itl_p50_ms']:.2f} / {r['itl_p99_ms']:.2f}",
            f"{100 * r['prefix_hit_rate']:.0f}%", str(r.get("preemptions", 0)), str(r.get("failed", 0)),
            r.get("commit", "")]) + " |")
    for r in (x for x in records if x.get("runner") == "gpuopt_serve_soak"):
        lines += ["", f"Soak ({r['model']}, {r['prompt_tokens']} / {r['new_tokens']} tokens, Poisson arrivals at "
                      f"{r['rate_req_s']:g} requests/s for {r['duration_s'] / 60:.0f} min, {r.get('commit', '')}): "
                      f"{r['requests']} of {r['sent']} requests answered, {r['failed']} failed; server RSS "
                      f"{r['rss_mb_first_min']:.0f} MB in the first minute, {r['rss_mb_last_min']:.0f} MB in the last; "
                      f"KV-cache usage {100 * r['kv_first_min']:.0f}% then {100 * r['kv_last_min']:.0f}%; "
                      f"{r['tok_s']:.0f} output tok/s."]
    dates = sorted({r.get("date", "") for r in recs})
    return "\n".join(lines + ["", f"`gpuopt serve --llm-model` on the CUDA runner, loaded by `gpuopt perf --service-kind "
                              f"openai` (streaming `/v1/completions`, token-id prompts, `ignore_eos`, greedy), measured "
                              f"{', '.join(d for d in dates if d)} (`scripts/gpu/llm_serve.sh`, one device call). "
                              "*TTFT* and *ITL* as the client sees them; *prefix-cache hits*: prompt tokens found in "
                              "the cache over those looked up (`gpuopt:prefix_cache_*`)."])


def render_kserve_serve(records):
    """scripts/gpu/serve_scale.sh's records: one row per model x GPUs x protocol x client x concurrency."""
    recs = sorted((r for r in records if r.get("runner") == "gpuopt_serve" and "infer_per_s" in r),
                  key=lambda r: (r["model"], r["gpus"], r["instances"], r["protocol"], r["client"], r["concurrency"]))
    if not recs:
        return "No serving records yet."
    head = ["model", "GPUs", "instances", "protocol", "perf client", "concurrency", "infer/s", "p50 / p99 ms",
            "server's own us", "server CPU us / request", "perf's cores", "mean batch", "commit"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in recs:
        lines.append("| " + " | ".join([
            r["model"], str(r["gpus"]), r["instances"], r["protocol"], r["client"], str(r["concurrency"]),
            f"**{r['infer_per_s']:,.0f}**", f"{r['p50_ms']:.2f} / {r['p99_ms']:.2f}", f"{r['server_overhead_us']:.0f}",
            f"{r['server_cpu_us_per_request']:.0f}", f"{r['client_cpu_cores']:.1f}",
            f"{r['mean_batch']:.1f}" if r.get("batches") else "", r.get("commit", "")]) + " |")
    eng = [r for r in records if r.get("source") == "serve_scale.sh" and r.get("runner") == "gpuopt"]
    foot = [f"Engine alone in the same call: {r['model']} batch {r['batch']} {r['precision']} {r['ms']:.2f} ms, "
            f"{r['items_per_s']:,.0f} sequences/s (`gpuopt run`)." for r in eng]
    dates = sorted({r.get("date", "") for r in recs})
    return "\n".join(lines + [""] + foot + [
        f"`scripts/gpu/serve_scale.sh`, {', '.join(d for d in dates if d)}: batch-1 requests from `gpuopt perf` on "
        "the same host (2 s windows); *server's own*: request time minus queue and compute from the statistics "
        "endpoint; *server CPU*: the server process's CPU time over the requests answered; *perf's cores*: the "
        "client's own CPU use (`-a`: gRPC calls through completion queues); *mean batch*: rows per execution the "
        "server formed during the run (its batch-size histogram is in the record)."])


def render_readme(records):
    """The README's figures: a short table of the headline points."""
    def get(model, batch, runner, prec="fp16"):
        rs = [r for r in records if r.get("model") == model and r.get("batch") == batch and r.get("runner") == runner
              and r.get("precision", "fp16") == prec and r.get("ms") and not r.get("error") and not is_llm(r)]
        return min(rs, key=lambda r: r["ms"]) if rs else None
    rows = ["| model (fp16, device time) | batch | gpuopt ms | best PyTorch ms | gpuopt vs best PyTorch |",
            "|---|---|---|---|---|"]
    for model, name in (("resnet50", "ResNet-50"), ("bert_base", "BERT-base, seq 128")):
        for b in (1, 32, 256):
            g = get(model, b, "gpuopt")
            if not g:
                continue
            torch = [get(model, b, k) for k, _ in RUNNERS]
            best = min((t["ms"] for t in torch if t), default=None)
            rows.append(f"| {name} | {b} | {g['ms']:.2f} | {best:.2f} | {best / g['ms']:.2f}x |" if best else
                        f"| {name} | {b} | {g['ms']:.2f} | | |")
    llm = [r for r in records if is_llm(r) and r.get("runner") == "gpuopt" and r.get("batch") == 1 and r.get("tok_s")]
    for r in sorted(llm, key=lambda r: (r.get("prompt_tokens") or 0, r.get("new_tokens") or 0))[:1]:
        h = [x for x in records if is_llm(x) and x.get("runner") == "hf_eager" and x.get("batch") == 1 and x.get("tok_s")
             and x.get("prompt_tokens") == r.get("prompt_tokens") and x.get("new_tokens") == r.get("new_tokens")]
        rows.append("")
        rows.append(f"Text generation ({r['model']}, {r.get('precision', 'fp16')}, batch 1, "
                    f"{r.get('prompt_tokens')}-token prompt): **{r.get('decode_tok_s') or r['tok_s']:.0f} tok/s** decode, "
                    f"first token in {r['ttft_ms']:.1f} ms"
                    + (f" ({100 * r['roofline_frac']:.0f}% of the HBM roofline)" if r.get("roofline_frac") else "")
                    + (f"; transformers' `generate` {h[0].get('decode_tok_s') or h[0]['tok_s']:.1f} tok/s and "
                       f"{h[0]['ttft_ms']:.1f} ms" if h else "") + " ([docs/llm.md](docs/llm.md)).")
    # Unique prompts only: a run whose random prompts hit the prefix cache (levels that repeated an
    # earlier level's prompts) measured the cache, not the engine.
    serve = [r for r in records if r.get("runner") == "gpuopt_serve" and "tok_s" in r and not r.get("shared_prefix_tokens")
             and (r.get("prefix_hit_rate") or 0) < 0.05]
    if serve:
        best = max(serve, key=lambda r: r["tok_s"])
        rows.append("")
        rows.append(f"Serving it (`gpuopt serve --llm-model`, {best['prompt_tokens']}/{best['new_tokens']} tokens, "
                    f"{best['concurrency']} concurrent streams): **{best['tok_s']:,.0f} output tok/s**, TTFT p50 "
                    f"{best['ttft_ms']:.0f} ms ([docs/performance.md](docs/performance.md)).")
    return "\n".join(rows)


CPU_NAMES = {"resnet50": "ResNet-50 (224x224)", "bert_base": "BERT-base (seq 128)", "matmul_1024": "MatMul 1024^3"}


def render_cpu(records):
    """tools/cpu_bench.py's records: one row per host x threads x model x batch."""
    keys = sorted({(r["host"], r["threads"], r["model"], r["batch"]) for r in records},
                  key=lambda k: (k[0], k[1], list(CPU_NAMES).index(k[2]) if k[2] in CPU_NAMES else 99, k[3]))
    head = ["host", "threads", "model", "batch", "gpuopt cpu ms", "ONNX Runtime ms", "gpuopt / ORT",
            "gpuopt cpu-ref ms", "cpu vs cpu-ref", "load", "date", "commit"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for host, threads, model, batch in keys:
        by = {r["runner"]: r for r in records if (r["host"], r["threads"], r["model"], r["batch"]) == (host, threads, model, batch)}
        fast, ort, ref = by.get("gpuopt_cpu"), by.get("onnxruntime_cpu"), by.get("gpuopt_cpu_ref")

        def ms(r):  # median (fastest)
            if not r:
                return ""
            return f"{r['ms']:,.1f}" + (f" ({r['min_ms']:,.1f})" if r.get("min_ms") else "")
        ratio = ""
        if fast and ort:
            ratio = f"{fast['ms'] / ort['ms']:.2f}x"
            if fast.get("min_ms") and ort.get("min_ms"):
                ratio += f" ({fast['min_ms'] / ort['min_ms']:.2f}x)"
        gain = f"{ref['ms'] / fast['ms']:.0f}x" if fast and ref else ""
        any_r = fast or ort or ref
        loads = [r["load_avg_1m"] for r in (fast, ort) if r and "load_avg_1m" in r]
        load = f"{max(loads):.1f}" if loads else ""
        lines.append("| " + " | ".join([host, str(threads), CPU_NAMES.get(model, model), str(batch), ms(fast), ms(ort),
                                        ratio, ms(ref), gain, load, any_r.get("date", ""), any_r.get("commit", "")]) + " |")
    return "\n".join(lines)


def splice(doc, begin, end, body, path):
    if begin not in doc or end not in doc:
        raise SystemExit(f"perf_table: {path} has no {begin} ... {end} markers")
    pre, rest = doc.split(begin, 1)
    return pre + begin + "\n" + body + "\n" + end + rest.split(end, 1)[1]


def merge(records, new):
    """records with `new` merged in (see the module docstring)."""
    def key(r):
        if is_llm(r):
            return tuple(r.get(k) for k in LLM_KEY)
        return r["model"], r.get("batch"), r.get("precision", "fp16")
    keys = {key(r) for r in new if r.get("batch") and not r.get("source")}  # measured by this run
    runners = {(key(r), r["runner"]) for r in new if r.get("batch")}
    kept = [r for r in records
            if (key(r) not in keys or r.get("source")) and (key(r), r["runner"]) not in runners]
    return kept + new


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default=os.path.join(ROOT, "docs/perf/h200.json"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs/performance.md"))
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    ap.add_argument("--cpu-json", default=os.path.join(ROOT, "docs/perf/cpu.json"))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--merge", metavar="NEW.json", help="merge a later compare run's records into --json first")
    a = ap.parse_args()
    records = json.load(open(a.json))
    if a.merge:
        records = merge(records, json.load(open(a.merge)))
        with open(a.json, "w") as f:
            json.dump(records, f, indent=1)
    doc = open(a.doc).read()
    new = splice(doc, BEGIN, END, render(records), a.doc)
    new = splice(new, LLM_BEGIN, LLM_END, render_llm(records), a.doc)
    new = splice(new, QUANT_BEGIN, QUANT_END, render_llm_quant(records), a.doc)
    new = splice(new, SERVE_BEGIN, SERVE_END, render_llm_serve(records), a.doc)
    new = splice(new, KSERVE_BEGIN, KSERVE_END, render_kserve_serve(records), a.doc)
    if os.path.exists(a.cpu_json):
        new = splice(new, CPU_BEGIN, CPU_END, render_cpu(json.load(open(a.cpu_json))), a.doc)
    readme = open(a.readme).read()
    new_readme = splice(readme, README_BEGIN, README_END, render_readme(records), a.readme)
    if a.check:
        bad = [p for p, old, fresh in ((a.doc, doc, new), (a.readme, readme, new_readme)) if old != fresh]
        if bad:
            print(f"perf_table: {', '.join(bad)} not what {a.json} gives; run python3 tools/perf_table.py",
                  file=sys.stderr)
            return 1
        print("perf_table: docs/performance.md and README.md match docs/perf/h200.json and docs/perf/cpu.json")
        return 0
    open(a.doc, "w").write(new)
    open(a.readme, "w").write(new_readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
