"""gpuopt beside PyTorch on the same GPU, same inputs, one run: writes one record per
model x exporter x batch x precision x runner (docs/perf/h200.json's format) and a table.

Runs on the GPU machine (PyTorch, torchvision, transformers there), over a gpuopt binary:

  python3 scripts/gpu/compare.py --gpuopt build-h200/bin/gpuopt --out $OUT/perf.json \
      --models resnet50,bert_base --batches 1,32,256 --runners gpuopt,torch_eager

Models come from torchvision / transformers with random weights, exported by torch.onnx
(`legacy`: the TorchScript exporter; `dynamo`: torch.export) with a dynamic batch. Each runner
gets the same random inputs; gpuopt's fp16 output is checked against PyTorch fp32 beside
PyTorch's own fp16 (rel L2). Times are device time, median, CUDA events (gpuopt: `run --json`
device_ms, graph replay when captured). torch.compile runners take minutes per model: leave
them out and pass --stored FILE to merge a same-day stored run (records keep `source`).
"""
import argparse, datetime, json, os, statistics, subprocess, sys, tempfile, time

import numpy as np
import torch

CNN = {"resnet50", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny", "swin_t"}
SEQ = 128
TORCH_RUNNERS = ("torch_eager", "torch_eager_channels_last", "torch_compile", "torch_compile_max_autotune")


def build_model(name):
    """(module, make_inputs(batch) -> dict name -> CPU tensor)."""
    if name in CNN or name == "vit_b_16":
        import torchvision
        m = getattr(torchvision.models, name)(weights=None)
        if name == "vit_b_16":  # torchvision zeroes the head: every output would be 0
            torch.nn.init.normal_(m.heads.head.weight, std=0.02)
        if name in ("mobilenet_v3_large", "efficientnet_b0"):
            # torchvision draws depthwise weights with fan_out = C*k*k, which shrinks activations by
            # ~sqrt(C) per block: by the logits the fp32 values are ~1e-9 and every fp16 run (torch's
            # and ours) underflows to 0 (rel L2 1.0). fan_in (k*k) keeps them in range; speed is the same.
            for c in m.modules():
                if isinstance(c, torch.nn.Conv2d) and c.groups > 1 and c.groups == c.in_channels:
                    torch.nn.init.kaiming_normal_(c.weight, mode="fan_in", nonlinearity="relu")
        return m, lambda b: {"input": torch.randn(b, 3, 224, 224)}
    import transformers as tf
    if name == "bert_base":
        m = tf.BertModel(tf.BertConfig())
        def inputs(b):
            g = torch.Generator().manual_seed(b)
            mask = torch.ones(b, SEQ, dtype=torch.int64)
            mask[:, SEQ - SEQ // 8:] = 0  # a padded tail, as real batches have
            return {"input_ids": torch.randint(0, 30522, (b, SEQ), generator=g), "attention_mask": mask}
        return m, inputs
    if name == "whisper_base_encoder":  # Whisper-base's shape: Conv1d stem (80 mels x 3000 frames) + 6 layers
        cfg = tf.WhisperConfig(d_model=512, encoder_layers=6, encoder_attention_heads=8, encoder_ffn_dim=2048, decoder_attention_heads=8, decoder_layers=1,
                               num_mel_bins=80, max_source_positions=1500)
        m = tf.WhisperModel(cfg).encoder
        return m, lambda b: {"input_features": torch.randn(b, 80, 3000, generator=torch.Generator().manual_seed(b))}
    if name == "gpt2":
        m = tf.GPT2Model(tf.GPT2Config())
        return m, lambda b: {"input_ids": torch.randint(0, 50257, (b, SEQ), generator=torch.Generator().manual_seed(b))}
    raise SystemExit(f"compare: unknown model {name}")


class Wrapped(torch.nn.Module):
    """Positional inputs in a fixed order, first output only (last_hidden_state / logits).
    torch.export wants named parameters, not *args: one input, or two (ids and mask)."""

    def __init__(self, m, names):
        super().__init__()
        self.m, self.names = m, names

    def run(self, xs):
        out = self.m(**dict(zip(self.names, xs))) if self.names[0] != "input" else self.m(xs[0])
        return out if torch.is_tensor(out) else out[0]


class Wrapped1(Wrapped):
    def forward(self, a):
        return self.run([a])


class Wrapped2(Wrapped):
    def forward(self, a, b):
        return self.run([a, b])


def wrap(m, names):
    return (Wrapped1 if len(names) == 1 else Wrapped2)(m, names)


def export(model, sample, path, exporter):
    names = list(sample)
    args = tuple(sample[n] for n in names)
    w = wrap(model, names).eval()
    if exporter == "legacy":
        torch.onnx.export(w, args, path, input_names=names, output_names=["output"], opset_version=17,
                          dynamic_axes={n: {0: "batch"} for n in names + ["output"]}, dynamo=False)
    else:  # torch.export; dynamic_axes is turned into its dynamic shapes
        torch.onnx.export(w, args, path, input_names=names, output_names=["output"], dynamo=True,
                          dynamic_axes={n: {0: "batch"} for n in names + ["output"]}, external_data=False)


def time_ms(fn, warm=5, reps=30):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def rel_l2(x, ref):
    x, ref = np.asarray(x, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(x - ref) / max(np.linalg.norm(ref), 1e-30))


def run_torch(model, inputs, runner, dtype):
    """(ms, peak bytes, first-result seconds, output as numpy)."""
    torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
    m = model.to("cuda", dtype).eval()
    xs = [v.to("cuda") if v.dtype == torch.int64 else v.to("cuda", dtype) for v in inputs.values()]
    if runner == "torch_eager_channels_last":
        m = m.to(memory_format=torch.channels_last)
        xs = [x.contiguous(memory_format=torch.channels_last) for x in xs]
    names = list(inputs)
    w = wrap(m, names)
    if runner.startswith("torch_compile"):
        # Static shapes, compiled afresh per batch: the best case for torch.compile (no dynamic-shape
        # recompile after the second batch size, no cache-size limit across models).
        torch._dynamo.reset()
        w = torch.compile(w, mode="max-autotune" if runner.endswith("max_autotune") else None, dynamic=False)
    with torch.inference_mode():
        t0 = time.time()
        out = w(*xs); torch.cuda.synchronize()
        first = time.time() - t0
        out = out.float().cpu().numpy()  # now: a CUDA-graph runner (max-autotune) overwrites it on the next call
        ms = time_ms(lambda: w(*xs))
    return ms, torch.cuda.max_memory_allocated(), first, out


def run_gpuopt(binary, onnx_path, inputs, precision, iters, workdir):
    args = [binary, "run", onnx_path, "--device", "cuda", "--precision", precision, "--iterations", str(iters),
            "--warmup", "3", "--json", "--output-dir", os.path.join(workdir, "out")]
    for n, v in inputs.items():
        f = os.path.join(workdir, n + ".npy")
        np.save(f, v.numpy())
        args += ["--input", f"{n}={f}"]
    t0 = time.time()
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError((p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1])
    j = json.loads(p.stdout)
    out = np.load(os.path.join(workdir, "out", sorted(os.listdir(os.path.join(workdir, "out")))[0]))
    first = j.get("load_s", 0) + j.get("first_run_ms", 0) / 1e3
    note = j.get("execution", "") + (f" ({j['execution_note']})" if j.get("execution_note") else "")
    return j["device_ms"]["median"], j.get("peak_device_bytes"), first, out, note, time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpuopt", default="build-h200/bin/gpuopt")
    ap.add_argument("--out", required=True, help="records JSON to write (appended to as each record comes)")
    ap.add_argument("--models", default="resnet50,mobilenet_v3_large,efficientnet_b0,convnext_tiny,vit_b_16,bert_base,gpt2")
    ap.add_argument("--exporters", default="legacy,dynamo")
    ap.add_argument("--batches", default="1,8,32,256")
    ap.add_argument("--max-batch", default="gpt2=64", help="MODEL=N caps, comma separated")
    ap.add_argument("--runners", default="gpuopt,torch_eager,torch_eager_channels_last")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--stored", help="records JSON of a same-day stored run to merge (torch.compile)")
    ap.add_argument("--time-budget", type=float, default=1e9, help="seconds; later points are recorded as skipped")
    ap.add_argument("--commit", default=os.environ.get("GPUOPT_COMMIT", ""))
    ap.add_argument("--model-dir", help="keep the exported models here (reused when present)")
    a = ap.parse_args()
    end = time.time() + a.time_budget
    caps = dict((k, int(v)) for k, v in (kv.split("=") for kv in a.max_batch.split(",") if kv))
    date = datetime.date.today().isoformat()
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[a.precision]
    records = []
    if a.stored:
        records += [dict(r, source=r.get("source", f"stored run {r.get('date', '')}")) for r in json.load(open(a.stored))]

    def emit(**r):
        r.update(precision=a.precision, date=date, commit=a.commit)
        if r.get("ms"):
            r["items_per_s"] = round(r["batch"] / r["ms"] * 1e3, 1)
        records.append(r)
        print(json.dumps(r), flush=True)
        with open(a.out, "w") as f:
            json.dump(records, f, indent=1)

    for name in a.models.split(","):
        # Seeded per model: the weights must not depend on which models came before, nor on
        # whether an earlier run's export in --model-dir was reused (an export draws random
        # inputs, so a reused file and a fresh model would otherwise disagree).
        torch.manual_seed(0)
        model, make_inputs = build_model(name)
        model.eval()
        batches = [b for b in map(int, a.batches.split(",")) if b <= caps.get(name, 1 << 30)]
        with tempfile.TemporaryDirectory() as tmp:
            paths = {}
            for ex in filter(None, a.exporters.split(",")):  # "": torch runners only, no export
                path = os.path.join(a.model_dir or tmp, f"{name}_{ex}.onnx")
                t0 = time.time()
                try:
                    if not os.path.exists(path):
                        export(model, make_inputs(2), path, ex)
                    paths[ex] = path
                    print(f"compare: exported {name} ({ex}) in {time.time() - t0:.0f} s", flush=True)
                except Exception as e:  # an exporter that fails on a model is a record, not the end
                    cause = e
                    while cause.__cause__ is not None:
                        cause = cause.__cause__
                    emit(model=name, exporter=ex, batch=0, runner="gpuopt",
                         error=f"export failed: {type(cause).__name__}: {str(cause)[:300]}")
            for b in batches:
                inputs = make_inputs(b)
                ref = None
                if time.time() > end:
                    emit(model=name, exporter="", batch=b, runner="all", error="skipped: time budget")
                    continue
                with torch.inference_mode():
                    ref = wrap(model.to("cuda", torch.float32), list(inputs))(
                        *[v.to("cuda") for v in inputs.values()]).float().cpu().numpy()
                for runner in a.runners.split(","):
                    if runner == "torch_eager_channels_last" and name not in CNN:
                        continue
                    if runner == "gpuopt":
                        for ex, path in paths.items():
                            wd = tempfile.mkdtemp(dir=tmp)
                            try:
                                ms, peak, first, out, note, _ = run_gpuopt(a.gpuopt, path, inputs, a.precision,
                                                                           a.iterations, wd)
                                emit(model=name, exporter=ex, batch=b, runner=runner, ms=ms, peak_mem_bytes=peak,
                                     first_result_s=round(first, 2), rel_l2_vs_fp32=rel_l2(out, ref), execution=note)
                            except Exception as e:
                                emit(model=name, exporter=ex, batch=b, runner=runner, error=str(e)[:400])
                    else:
                        try:
                            ms, peak, first, out = run_torch(model, inputs, runner, dtype)
                            emit(model=name, exporter="", batch=b, runner=runner, ms=ms, peak_mem_bytes=peak,
                                 first_result_s=round(first, 2), rel_l2_vs_fp32=rel_l2(out, ref))
                        except Exception as e:
                            emit(model=name, exporter="", batch=b, runner=runner, error=str(e)[:400])
                        model.float()
        del model
        torch.cuda.empty_cache()
    print(f"compare: {len(records)} records in {a.out}")


if __name__ == "__main__":
    sys.exit(main())
