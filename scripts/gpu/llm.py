"""Llama-2-7B-shaped decoding on the H200 (issue 37): gpuopt's CUDA runner beside transformers.

One run, on the GPU machine (about 5 minutes):
  1. measure the device-to-device copy bandwidth (the roofline's ceiling);
  2. build LlamaForCausalLM(config) of the 7B shape (32 layers, hidden 4096, FFN 11008, 32 heads,
     vocab 32000) with random weights in fp16 under a fixed seed, save_pretrained (safetensors);
  3. time gpuopt (tools/llm_bench: the runner itself, greedy, device sampling, CUDA graphs) on
     the folder: start-up (checkpoint open + weights on the GPU from the warm page cache + KV
     cache), then the grid batch x prompt x new tokens, and batch-1 decode at a 4k context; it
     also writes the logits of the first generated position of a short prompt;
  4. time transformers' generate (eager attention, greedy, fp16, 128 new tokens: HF eager runs
     ~14 tok/s at batch 1) on the same folder, TTFT and per-step latency from a logits processor
     that synchronizes;
  5. compare the short prompt's first-position logits: gpuopt fp16 and HF fp16 against HF fp32.
Records in docs/perf/h200.json's format (runners gpuopt and hf_eager) go to --out.

  python3 scripts/gpu/llm.py --bench build-h200/llm_bench --out $OUT/llm_records.json
"""
import argparse, datetime, json, os, subprocess, sys, time

import numpy as np

# HF eager attention at batch 64 x 2048 needs one 32 GiB block for the scores: without expandable
# segments the caching allocator's fragments refuse it.
os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
import torch  # noqa: E402


def copy_bandwidth():
    """Device-to-device copy, bytes read + written per second (METHOD.md's ceiling)."""
    a = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(10):
        b.copy_(a)
    e1.record()
    torch.cuda.synchronize()
    bw = 2 * a.numel() * 10 / (e0.elapsed_time(e1) / 1e3)
    del a, b
    torch.cuda.empty_cache()
    return bw


def llama7b_config():
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=4096,
                       rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                       bos_token_id=1, eos_token_id=2)


def build_model(folder, seed):
    from transformers import LlamaForCausalLM
    torch.manual_seed(seed)
    torch.set_default_dtype(torch.float16)
    t = time.time()
    with torch.device("cuda"):
        model = LlamaForCausalLM(llama7b_config())
    torch.set_default_dtype(torch.float32)
    model.eval()
    model.save_pretrained(folder, safe_serialization=True)
    cfg_path = os.path.join(folder, "config.json")
    cfg = json.load(open(cfg_path))
    cfg.setdefault("rope_theta", 10000.0)  # transformers 5 may keep it under rope_parameters only
    cfg.setdefault("torch_dtype", "float16")
    json.dump(cfg, open(cfg_path, "w"), indent=1)
    n = sum(p.numel() for p in model.parameters())
    print(f"model: {n / 1e9:.2f} B parameters built and saved in {time.time() - t:.1f} s", flush=True)
    del model
    torch.cuda.empty_cache()


def run_gpuopt(bench, folder, runs, logits_prompt, logits_out, log, timeout):
    """llm_bench's runs; its stderr (one JSON line per finished run) goes straight to `log`, so a
    run cut off by the timeout still leaves the runs before it."""
    cmd = [bench, "--model", folder, "--dtype", "f16", "--runs", ",".join(runs),
           "--logits-prompt", ",".join(map(str, logits_prompt)), "--logits-out", logits_out]
    t = time.time()
    with open(log, "w") as err:
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    out = {"runs": []}
    for line in open(log):
        line = line.strip()
        if line.startswith("llm_bench: {"):
            out["runs"].append(json.loads(line[len("llm_bench: "):]))
        elif line.startswith("llm_bench: ready in"):
            out["start_s"] = float(line.split()[3])
        elif line.startswith("llm_bench: weights"):
            out.update(json.loads(line[len("llm_bench: weights "):]))
    print(f"gpuopt: rc {rc}, {len(out['runs'])} runs in {time.time() - t:.0f} s", flush=True)
    if rc != 0:
        print(open(log).read()[-3000:], flush=True)
    return out


def profile_gpuopt(bench, folder, log):
    """Per-op decode times (GPUOPT_LLM_PROFILE=1, eager steps: graphs off) at batch 1 (context 128
    and 4k) and batch 64: where the time over the roofline goes."""
    env = dict(os.environ, GPUOPT_LLM_PROFILE="1")
    with open(log, "w") as f:
        for run in ["1x128x64", "1x3968x64", "64x128x32"]:
            f.write(f"== {run}, eager ==\n")
            f.flush()
            try:
                subprocess.run([bench, "--model", folder, "--dtype", "f16", "--no-graphs", "--runs", run],
                               stdout=subprocess.DEVNULL, stderr=f, env=env, timeout=60)
            except subprocess.TimeoutExpired:
                f.write("timeout\n")
    for line in open(log):
        if line.startswith("==") or line.startswith("llm profile") or line.startswith("  "):
            print(line.rstrip())


class StepClock:
    """A logits processor: called once per generated token, after that step's forward; the
    synchronize makes each stamp the step's end."""

    def __init__(self):
        self.stamps = []

    def __call__(self, input_ids, scores):
        torch.cuda.synchronize()
        self.stamps.append(time.perf_counter())
        return scores


def hf_generate(model, batch, prompt, new, seed):
    from transformers import LogitsProcessorList
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 32000, (batch, prompt), generator=g).cuda()
    clock = StepClock()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.no_grad():
        model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=new,
                       min_new_tokens=new, eos_token_id=None, pad_token_id=0,
                       logits_processor=LogitsProcessorList([clock]))
    torch.cuda.synchronize()
    total = time.perf_counter() - t0
    itl = np.diff(np.array(clock.stamps)) * 1e3
    return {"batch": batch, "prompt": prompt, "new_tokens": new, "ttft_ms": (clock.stamps[0] - t0) * 1e3,
            "itl_p50_ms": float(np.percentile(itl, 50)), "itl_p99_ms": float(np.percentile(itl, 99)),
            "itl_mean_ms": float(itl.mean()), "decode_tok_s": batch * 1e3 / float(itl.mean()),
            "tok_s": batch * new / total, "total_ms": total * 1e3}


def first_logits(model, prompt):
    with torch.no_grad():
        return model(torch.tensor([prompt]).cuda()).logits[0, -1].float().cpu().numpy()


def rel(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="tools/llm_bench binary")
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/llama7b")
    ap.add_argument("--batches", default="1,8,64")
    ap.add_argument("--prompts", default="128,2048")
    ap.add_argument("--new", default="128,1024")
    ap.add_argument("--hf-new", type=int, default=128)
    ap.add_argument("--commit", default="")
    ap.add_argument("--gpuopt-timeout", type=int, default=200)
    a = ap.parse_args()
    batches = [int(x) for x in a.batches.split(",")]
    prompts = [int(x) for x in a.prompts.split(",")]
    news = [int(x) for x in a.new.split(",")]
    out_dir = os.path.dirname(os.path.abspath(a.out))
    date = datetime.date.today().isoformat()

    bw = copy_bandwidth()
    print(f"D2D copy: {bw / 1e12:.2f} TB/s (read + write)", flush=True)
    os.makedirs(a.work, exist_ok=True)
    build_model(a.work, seed=0)

    rng = np.random.default_rng(7)
    short = [1] + [int(x) for x in rng.integers(3, 32000, 31)]
    # The headline figures first, the long 1024-token runs last (a timeout cuts those).
    runs = [f"{b}x{p}x{news[0]}" for p in prompts for b in batches]
    runs.insert(1, "1x3968x128")  # batch-1 decode at a 4k context
    runs += [f"{b}x{p}x{n}" for n in news[1:] for p in prompts for b in batches]
    g = run_gpuopt(a.bench, a.work, runs, short, "/tmp/gpuopt_first.f32", os.path.join(out_dir, "llm_bench.log"),
                   a.gpuopt_timeout)
    profile_gpuopt(a.bench, a.work, os.path.join(out_dir, "llm_profile.log"))
    g_logits = np.fromfile("/tmp/gpuopt_first.f32", dtype=np.float32) if os.path.exists("/tmp/gpuopt_first.f32") \
        else np.full(32000, np.nan, dtype=np.float32)

    from transformers import LlamaForCausalLM
    t = time.time()
    try:
        model = LlamaForCausalLM.from_pretrained(a.work, dtype=torch.float16, attn_implementation="eager").cuda()
    except TypeError:
        model = LlamaForCausalLM.from_pretrained(a.work, torch_dtype=torch.float16, attn_implementation="eager").cuda()
    model.eval()
    torch.cuda.synchronize()
    hf_start = time.time() - t
    print(f"hf: loaded in {hf_start:.1f} s", flush=True)
    hf = []
    for b in batches:
        for p in prompts:
            try:
                hf_generate(model, b, min(p, 64), 4, seed=0)  # warm-up: kernels, allocator
                r = hf_generate(model, b, p, a.hf_new, seed=1)
            except torch.OutOfMemoryError as e:
                print(f"hf b{b} p{p}: out of memory ({str(e).splitlines()[0]})", flush=True)
                torch.cuda.empty_cache()
                continue
            print(f"hf b{b} p{p} n{a.hf_new}: {r['tok_s']:.1f} tok/s, TTFT {r['ttft_ms']:.1f} ms, "
                  f"ITL p50 {r['itl_p50_ms']:.2f} ms", flush=True)
            hf.append(r)
    h16 = first_logits(model, short)
    model.float()
    h32 = first_logits(model, short)
    del model
    torch.cuda.empty_cache()
    acc = {"gpuopt_fp16_rel_l2_vs_hf_fp32": rel(g_logits, h32), "hf_fp16_rel_l2_vs_hf_fp32": rel(h16, h32),
           "gpuopt_fp16_max_abs_vs_hf_fp32": float(np.abs(g_logits - h32).max()),
           "hf_fp16_max_abs_vs_hf_fp32": float(np.abs(h16 - h32).max()),
           "argmax_gpuopt_hf32": [int(g_logits.argmax()), int(h32.argmax())]}
    print("first-position logits:", json.dumps(acc), flush=True)

    recs = []
    base = {"model": "llama2_7b_shape_random", "precision": "fp16", "date": date, "commit": a.commit}
    weights = g.get("weights_bytes", 13.0e9)
    for r in g["runs"]:
        # Roofline: the bytes a decode step must read (weights + KV at the mean context) over the
        # measured copy bandwidth, against the measured mean inter-token latency.
        floor_ms = r["decode_bytes"] / bw * 1e3
        rec = dict(base, runner="gpuopt", batch=r["batch"], prompt_tokens=r["prompt"], new_tokens=r["new_tokens"],
                   tok_s=round(r["tok_s"], 1), decode_tok_s=round(r["decode_tok_s"], 1),
                   ttft_ms=round(r["ttft_ms"], 2), itl_p50_ms=round(r["itl_p50_ms"], 3),
                   itl_p99_ms=round(r["itl_p99_ms"], 3),
                   roofline_frac=round(floor_ms / r["itl_mean_ms"], 3), start_s=round(g.get("start_s", -1), 2),
                   execution="cuda_graphs", kv_cache_tokens=g.get("kv_tokens", -1),
                   source="scripts/gpu/llm.py: tools/llm_bench (CUDA runner, greedy, device argmax), random prompt ids")
        recs.append(rec)
    for r in hf:
        floor_ms = (weights + r["batch"] * (r["prompt"] + r["new_tokens"] / 2) * 2 * 32 * 4096 * 2) / bw * 1e3
        recs.append(dict(base, runner="hf_eager", batch=r["batch"], prompt_tokens=r["prompt"], new_tokens=r["new_tokens"],
                          tok_s=round(r["tok_s"], 1), decode_tok_s=round(r["decode_tok_s"], 1),
                          ttft_ms=round(r["ttft_ms"], 2), itl_p50_ms=round(r["itl_p50_ms"], 3),
                          itl_p99_ms=round(r["itl_p99_ms"], 3), roofline_frac=round(floor_ms / r["itl_mean_ms"], 3),
                          start_s=round(hf_start, 2), execution="eager",
                          source="scripts/gpu/llm.py: transformers generate (eager attention, greedy, fp16), same folder"))
    recs[0].update(acc)  # the accuracy figures ride on the first gpuopt record
    recs[0]["copy_bw_tb_s"] = round(bw / 1e12, 3)
    json.dump(recs, open(a.out, "w"), indent=1)

    print(f"\n{'runner':9} {'b':>3} {'prompt':>6} {'new':>5} {'tok/s':>9} {'dec tok/s':>9} {'TTFT ms':>8} "
          f"{'ITL p50':>8} {'ITL p99':>8} {'roofline':>8}")
    for r in recs:
        print(f"{r['runner']:9} {r['batch']:>3} {r['prompt_tokens']:>6} {r['new_tokens']:>5} {r['tok_s']:>9.1f} "
              f"{r['decode_tok_s']:>9.1f} {r['ttft_ms']:>8.2f} {r['itl_p50_ms']:>8.3f} {r['itl_p99_ms']:>8.3f} "
              f"{r['roofline_frac']:>8.3f}")
    print(f"gpuopt start {g.get('start_s', -1):.2f} s (weights {weights / 1e9:.2f} GB); hf load {hf_start:.1f} s; "
          f"copy BW {bw / 1e12:.2f} TB/s")
    print("accuracy:", json.dumps(acc))


if __name__ == "__main__":
    main()
