"""Quantized language models on the H200 (issue 40), two modes, each one device call:

speed: the Llama-2-7B shape (random fp16 weights, scripts/gpu/llm.py's folder) quantized by
  `gpuopt quantize` to int8 (GPTQ per channel), int4 (GPTQ group 128) and fp8 (compressed-tensors,
  per channel, dynamic per-token activations), then tools/llm_bench on each with the packed kernels
  (--quant-kernels) beside fp16 and transformers fp16 at batch 1: tok/s at batch 1/16/64, the
  roofline of each (weight bytes over the copy bandwidth), and on a text: each scheme's top-1
  agreement with fp16 and its perplexity against fp16's (`gpuopt perplexity --predictions`).

  python3 scripts/gpu/llm_quant.py speed --prepare --gpuopt build-h200/gpuopt --out $OUT/x.json  # folders
  python3 scripts/gpu/llm_quant.py speed --gpuopt build-h200/gpuopt --bench build-h200/llm_bench \\
      --out $OUT/quant_speed.json

accuracy: a small Llama (about 14M parameters, byte-level BPE of 4,096 tokens) trained here for a
  few minutes on the repository's own text (docs, sources; every 10th file held out), saved as
  fp16 safetensors, quantized with int8, int4 (round to nearest), awq (calibrated on training
  lines) and fp8; `gpuopt perplexity` of each on the held-out text (CUDA, packed kernels and
  dequantized) and the fp32 CPU runner on the fp16 folder as the oracle.

  python3 scripts/gpu/llm_quant.py accuracy --gpuopt build-h200/gpuopt --out $OUT/quant_acc.json

Records in docs/perf/h200.json's format go to --out (merge with tools/perf_table.py --merge).
"""
import argparse, datetime, glob, json, os, subprocess, sys, time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMES = {"int8": "int8 W8A16", "int4": "int4 g128 W4A16", "awq": "awq int4 g128 W4A16", "fp8": "fp8 W8A8",
           "fp8-deq": "fp8 weights, f16 activations", "fp16+kv8": "fp16, fp8 KV cache",
           "fp8+kv8": "fp8 W8A8, fp8 KV cache"}


def sh(cmd, timeout, log=None):
    t = time.time()
    try:
        p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = "timeout", "", ""
    if log:
        with open(log, "a") as f:
            f.write(f"$ {' '.join(map(str, cmd))}\n{err}\n")
    if rc != 0:
        print(f"FAILED ({rc}): {' '.join(map(str, cmd))}\n{err[-2000:]}", flush=True)
    return rc, out, time.time() - t


def quantize_all(gpuopt, src, schemes, calib, log):
    """gpuopt quantize per scheme, in parallel (each reads one linear at a time; awq holds f32);
    a folder already written (an earlier --prepare call) is kept."""
    procs, out = {}, {}
    for s in schemes:
        dst = f"{src}-{s}"
        if os.path.exists(os.path.join(dst, "config.json")):
            out[s] = {"dir": dst}
            continue
        cmd = [gpuopt, "quantize", src, "-o", dst, "--scheme", s, "--json"]
        if s == "awq":
            cmd += ["--calibration", calib]
        procs[s] = (subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
                    time.time())
    for s, (p, t) in procs.items():
        so, se = p.communicate(timeout=400)
        if p.returncode != 0:
            print(f"quantize {s} failed: {se[-1500:]}", flush=True)
            continue
        rep = json.loads(so)
        out[s] = {"dir": f"{src}-{s}", "seconds": round(time.time() - t, 1), "bytes_out": rep.get("bytes_out"),
                  "bytes_in": rep.get("bytes_in")}
        print(f"quantize {s}: {out[s]['seconds']} s, {rep.get('bytes_in', 0) / 1e9:.2f} -> "
              f"{rep.get('bytes_out', 0) / 1e9:.2f} GB", flush=True)
        with open(log, "a") as f:
            f.write(se)
    return out


def perplexity(gpuopt, folder, text, extra, timeout=240, preds=None, ctx=512, batch=16, max_tokens=None):
    cmd = [gpuopt, "perplexity", folder, "--text", text, "--context", ctx, "--batch", batch, "--json", *extra]
    if preds:
        cmd += ["--predictions", preds]
    if max_tokens:
        cmd += ["--max-tokens", max_tokens]
    rc, out, secs = sh(cmd, timeout)
    return json.loads(out) if rc == 0 else None


def agreement(a, b):
    x, y = np.loadtxt(a, dtype=np.int64), np.loadtxt(b, dtype=np.int64)
    return float((x == y).mean()) if x.shape == y.shape else None


def train_tokenizer(files, folder, vocab):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<s>", "</s>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train(files, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    return tok


def corpus(work):
    """The repository's text: train files and held-out files (every 10th), written to work/."""
    files = sorted(f for pat in ("docs/**/*.md", "src/**/*.cpp", "src/**/*.h", "src/**/*.cu", "tests/**/*.py",
                                 "scripts/**/*.py", "README.md", "../shared/seeds/*.md")
                   for f in glob.glob(os.path.join(ROOT, pat), recursive=True))
    train, held = [], []
    for i, f in enumerate(files):
        (held if i % 10 == 5 else train).append(open(f, encoding="utf-8", errors="replace").read())
    os.makedirs(work, exist_ok=True)
    paths = {}
    for name, parts in (("train", train), ("heldout", held)):
        paths[name] = os.path.join(work, f"{name}.txt")
        open(paths[name], "w").write("\n".join(parts))
    lines = [l for l in "\n".join(train).splitlines() if len(l) > 40][::50][:200]
    paths["calib"] = os.path.join(work, "calib.txt")
    open(paths["calib"], "w").write("\n".join(lines) + "\n")
    print(f"corpus: {len(files)} files, train {sum(map(len, train)) / 1e6:.2f} MB, "
          f"held out {sum(map(len, held)) / 1e6:.2f} MB", flush=True)
    return paths


def train_small(paths, folder, seconds, seed=0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    tok = train_tokenizer([paths["train"]], folder, 4096)
    ids = np.array(tok.encode(open(paths["train"]).read(), add_special_tokens=False).ids, dtype=np.int64)
    print(f"train tokens: {len(ids)}", flush=True)
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=4096, hidden_size=384, intermediate_size=1024, num_hidden_layers=6,
                      num_attention_heads=6, num_key_value_heads=6, max_position_embeddings=1024, rms_norm_eps=1e-5,
                      rope_theta=10000.0, tie_word_embeddings=False, bos_token_id=0, eos_token_id=1)
    model = LlamaForCausalLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.1, betas=(0.9, 0.95))
    data = torch.from_numpy(ids).cuda()
    B, T = 32, 511  # + BOS: the 512-token windows perplexity scores
    t0, step, losses = time.time(), 0, []
    while time.time() - t0 < seconds:
        frac = (time.time() - t0) / seconds
        for g in opt.param_groups:
            g["lr"] = 2e-3 * min(1.0, step / 200) * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * frac)))
        start = torch.randint(0, len(ids) - T - 1, (B,), device="cuda")
        x = torch.stack([data[s:s + T] for s in start])
        x = torch.cat([torch.zeros(B, 1, dtype=torch.long, device="cuda"), x], 1)  # BOS first, as perplexity does
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0:
            losses.append(loss.item())
        step += 1
    print(f"trained {step} steps in {time.time() - t0:.0f} s, loss {losses[0]:.2f} -> {losses[-1]:.2f}", flush=True)
    model.half().save_pretrained(folder, safe_serialization=True)
    cfg_path = os.path.join(folder, "config.json")
    c = json.load(open(cfg_path))
    c.setdefault("rope_theta", 10000.0)
    c["torch_dtype"] = "float16"
    json.dump(c, open(cfg_path, "w"), indent=1)
    n = sum(p.numel() for p in model.parameters())
    del model
    torch.cuda.empty_cache()
    return {"parameters": n, "steps": step, "final_loss": round(losses[-1], 3), "train_tokens": int(len(ids))}


def accuracy(a):
    work = a.work or "/tmp/qacc"
    paths = corpus(work)
    folder = os.path.join(work, "small")
    info = train_small(paths, folder, a.train_seconds)
    q = quantize_all(a.gpuopt, folder, ["int8", "int4", "awq", "fp8"], paths["calib"], os.path.join(a.log_dir, "quantize.log"))
    rows = []
    # The fp32 CPU runner (the oracle) against CUDA fp16 on the first 2048 tokens, windows of 256.
    short = dict(max_tokens=2048, ctx=256, batch=8)
    cpu = perplexity(a.gpuopt, folder, paths["heldout"], ["--device", "cpu"], timeout=200, **short)
    cuda_short = perplexity(a.gpuopt, folder, paths["heldout"], ["--device", "cuda"], **short)
    if cpu and cuda_short:
        print(f"oracle: CPU fp32 {cpu['perplexity']:.4f} vs CUDA fp16 {cuda_short['perplexity']:.4f} on the first "
              "2048 tokens", flush=True)
    held = dict(max_tokens=a.eval_tokens, batch=64)
    base = perplexity(a.gpuopt, folder, paths["heldout"], ["--device", "cuda"], preds=os.path.join(work, "p_fp16.txt"),
                      **held)
    rows.append(("fp16", "", base, 1.0))
    for s in ["int8", "int4", "awq", "fp8"]:
        if s not in q:
            continue
        for kernels in ([True, False] if s == "fp8" else [True]):
            pf = os.path.join(work, f"p_{s}_{kernels}.txt")
            r = perplexity(a.gpuopt, q[s]["dir"], paths["heldout"],
                           ["--device", "cuda"] + (["--quant-kernels"] if kernels else []), preds=pf, **held)
            rows.append((s if kernels else "fp8-deq", "packed kernels" if kernels else "dequantized at load", r,
                         agreement(pf, os.path.join(work, "p_fp16.txt")) if r else None))
    date = datetime.date.today().isoformat()
    recs = []
    print(f"\n{'weights':22} {'path':20} {'perplexity':>10} {'vs fp16':>8} {'top-1':>6} {'agree':>6}")
    for s, path, r, agree in rows:
        if not r or agree is None:
            print(f"{s:22} {path:20} failed")
            continue
        rel = r["perplexity"] / base["perplexity"] - 1 if base else float("nan")
        print(f"{SCHEMES.get(s, s):22} {path:20} {r['perplexity']:>10.4f} {100 * rel:>7.2f}% {100 * r['top1']:>5.1f}% "
              f"{100 * agree:>5.1f}%")
        recs.append({"model": "llama_small_trained", "runner": "gpuopt_perplexity", "precision": SCHEMES.get(s, s),
                     "kernels": path or "fp16", "perplexity": round(r["perplexity"], 4),
                     "perplexity_vs_fp16": round(rel, 5), "top1": round(r["top1"], 4),
                     "agreement_vs_fp16": round(agree, 4), "scored_tokens": r["scored_tokens"], "context": 512,
                     "date": date, "commit": a.commit,
                     "source": "scripts/gpu/llm_quant.py accuracy: gpuopt perplexity on held-out repository text"})
    if recs:
        recs[0].update(info, cpu_fp32_perplexity_2k=cpu and round(cpu["perplexity"], 4),
                       cuda_fp16_perplexity_2k=cuda_short and round(cuda_short["perplexity"], 4))
    json.dump(recs, open(a.out, "w"), indent=1)


def peak_memory(cmd, timeout=240):
    """Runs cmd and polls nvidia-smi for its process's GPU memory; (rc, peak MiB, stdout)."""
    p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    peak, t0 = 0, time.time()
    while p.poll() is None and time.time() - t0 < timeout:
        q = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True).stdout
        for line in q.splitlines():
            pid, _, mib = line.partition(",")
            if pid.strip() == str(p.pid) and mib.strip().isdigit():
                peak = max(peak, int(mib))
        time.sleep(0.2)
    if p.poll() is None:
        p.kill()
    out = p.communicate()[0]
    return p.returncode, peak, out


def footprint(a, q, commit):
    """Issue 40's memory goal: a 4-bit 7B with its cache for one 4k sequence (FP8 and f16 caches),
    the process's GPU memory as nvidia-smi reports it (weights, cache, workspace, CUDA context)."""
    recs = []
    if "int4" not in q:
        return recs
    for kv in ("fp8", "fp16"):
        cmd = [a.bench, "--model", q["int4"]["dir"], "--quant-kernels", "--kv-cache-dtype", kv, "--num-kv-blocks",
               4096 // 16, "--max-batch", 1, "--max-step-tokens", 512, "--runs", "1x3968x128"]
        rc, peak, out = peak_memory(cmd)
        w = json.loads(out).get("weights_bytes", 0) if rc == 0 else 0
        print(f"int4 7B, one 4096-token sequence, {kv} cache: peak {peak} MiB (rc {rc}, weights {w / 1e9:.2f} GB)",
              flush=True)
        if rc == 0:
            recs.append({"model": "llama2_7b_shape_random", "runner": "gpuopt_memory", "precision": "int4 g128 W4A16",
                         "kv_cache_dtype": kv, "batch": 1, "context_tokens": 4096, "peak_gpu_mib": peak,
                         "weights_bytes": w, "date": datetime.date.today().isoformat(), "commit": commit,
                         "source": "scripts/gpu/llm_quant.py speed: llm_bench, nvidia-smi per-process memory"})
    return recs


def speed(a):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import llm  # scripts/gpu/llm.py: the 7B folder, copy bandwidth, transformers timing
    import torch
    work = a.work or "/tmp/llama7b"
    bw = llm.copy_bandwidth()
    print(f"D2D copy: {bw / 1e12:.2f} TB/s", flush=True)
    if not os.path.exists(os.path.join(work, "config.json")):
        llm.build_model(work, seed=0)
    # A tokenizer for the perplexity runs (its ids all fall inside the 7B shape's 32000).
    paths = corpus("/tmp/qspeed")
    train_tokenizer([paths["train"]], work, 8000)
    schemes = ["int8", "int4", "fp8"]
    q = quantize_all(a.gpuopt, work, schemes, paths["calib"], os.path.join(a.log_dir, "quantize.log"))
    if a.prepare:
        return
    variants = [("fp16", work, [])] + [(s, q[s]["dir"], ["--quant-kernels"]) for s in schemes if s in q]
    # The FP8 KV cache beside the same weights with the f16 cache; its runs add a long context, where
    # the cache's bytes count (the plain fp16 and fp8 runs get the long context too, as the baseline).
    kv8 = ["--kv-cache-dtype", "fp8"]
    variants += [("fp16+kv8", work, kv8)] + ([("fp8+kv8", q["fp8"]["dir"], ["--quant-kernels", *kv8])] if "fp8" in q else [])
    long_runs = a.runs + "," + a.long_runs
    res = {}
    for name, folder, extra in variants:
        runs = long_runs if name in ("fp16", "fp8", "fp16+kv8", "fp8+kv8") else a.runs
        rc, out, secs = sh([a.bench, "--model", folder, "--dtype", "f16", "--runs", runs, *extra], 200,
                           os.path.join(a.log_dir, "llm_bench.log"))
        if rc == 0:
            res[name] = json.loads(out)
            for r in res[name]["runs"]:
                print(f"{name:5} b{r['batch']:<3} {r['tok_s']:8.1f} tok/s, decode {r['decode_tok_s']:8.1f}, "
                      f"ITL p50 {r['itl_p50_ms']:.3f} ms", flush=True)
    # Accuracy on the 7B shape: top-1 agreement with fp16 and the perplexity ratio, 2 windows.
    acc = {}
    pf = {"fp16": "/tmp/qspeed/p_fp16.txt"}
    for name, folder, extra in variants:
        pf[name] = f"/tmp/qspeed/p_{name}.txt"
        r = perplexity(a.gpuopt, folder, paths["heldout"], ["--device", "cuda", *extra], preds=pf[name],
                       max_tokens=4096, batch=8, timeout=120)
        if r:
            acc[name] = {"perplexity": r["perplexity"],
                         "agreement_vs_fp16": agreement(pf[name], pf["fp16"]) if name != "fp16" else 1.0}
            print(f"{name}: perplexity {r['perplexity']:.3f}, agreement {acc[name]['agreement_vs_fp16']}", flush=True)
    # transformers fp16 at batch 1 in the same call.
    hf = None
    try:
        from transformers import LlamaForCausalLM
        model = LlamaForCausalLM.from_pretrained(work, dtype=torch.float16, attn_implementation="eager").cuda().eval()
        llm.hf_generate(model, 1, 64, 4, seed=0)
        hf = llm.hf_generate(model, 1, 128, 128, seed=1)
        print(f"hf b1: {hf['tok_s']:.1f} tok/s", flush=True)
        del model
        torch.cuda.empty_cache()
    except Exception as e:  # noqa: BLE001 - the gpuopt figures stand without it
        print(f"hf: {e}", flush=True)
    date = datetime.date.today().isoformat()
    recs = []
    for name, r in res.items():
        wbytes = r.get("weights_bytes", 0)
        for x in r["runs"]:
            floor_ms = x["decode_bytes"] / bw * 1e3
            rec = {"model": "llama2_7b_shape_random", "runner": "gpuopt", "precision": SCHEMES.get(name, name),
                   "batch": x["batch"], "prompt_tokens": x["prompt"], "new_tokens": x["new_tokens"],
                   "tok_s": round(x["tok_s"], 1), "decode_tok_s": round(x["decode_tok_s"], 1),
                   "ttft_ms": round(x["ttft_ms"], 2), "itl_p50_ms": round(x["itl_p50_ms"], 3),
                   "itl_p99_ms": round(x["itl_p99_ms"], 3), "roofline_frac": round(floor_ms / x["itl_mean_ms"], 3),
                   "weights_bytes": wbytes, "execution": "cuda_graphs", "date": date, "commit": a.commit,
                   "quant_kernels": name != "fp16",
                   "source": "scripts/gpu/llm_quant.py speed: tools/llm_bench, greedy, random prompt ids"}
            if x["batch"] == 1 and name in acc:
                rec.update({k: round(v, 4) for k, v in acc[name].items() if v is not None})
            recs.append(rec)
    if hf:
        recs.append({"model": "llama2_7b_shape_random", "runner": "hf_eager", "precision": "fp16", "batch": 1,
                     "prompt_tokens": 128, "new_tokens": 128, "tok_s": round(hf["tok_s"], 1),
                     "decode_tok_s": round(hf["decode_tok_s"], 1), "ttft_ms": round(hf["ttft_ms"], 2),
                     "itl_p50_ms": round(hf["itl_p50_ms"], 3), "itl_p99_ms": round(hf["itl_p99_ms"], 3),
                     "execution": "eager", "date": date, "commit": a.commit,
                     "source": "scripts/gpu/llm_quant.py speed: transformers generate (eager, greedy, fp16)"})
    if recs:
        recs[0]["copy_bw_tb_s"] = round(bw / 1e12, 3)
    recs += footprint(a, q, a.commit)
    json.dump(recs, open(a.out, "w"), indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["speed", "accuracy"])
    ap.add_argument("--gpuopt", required=True)
    ap.add_argument("--bench", help="tools/llm_bench (speed)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--work")
    ap.add_argument("--runs", default="1x128x128,16x128x128,64x128x128")
    ap.add_argument("--long-runs", default="1x2048x128,64x2048x128", help="speed: the KV-cache comparison's runs")
    ap.add_argument("--train-seconds", type=float, default=100)
    ap.add_argument("--eval-tokens", type=int, default=65536, help="accuracy: held-out tokens scored")
    ap.add_argument("--prepare", action="store_true", help="speed: build and quantize the folders, time nothing")
    ap.add_argument("--commit", default="")
    a = ap.parse_args()
    a.log_dir = os.path.dirname(os.path.abspath(a.out))
    (speed if a.mode == "speed" else accuracy)(a)


if __name__ == "__main__":
    main()
