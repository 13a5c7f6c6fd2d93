"""INT8 benchmark and accuracy on the H200 (scripts/gpu/int8.sh).

Per model: export f32 ONNX with torch.onnx (scripts/gpu/compare.py's builders), make data,
`gpuopt quantize --device cuda` it, then time
  gpuopt fp16 on the f32 file, gpuopt int8 on the QDQ file (the same --precision int8 path
  `gpuopt run` takes), ONNX Runtime CPU on the QDQ file (small batches),
and measure accuracy of the int8 model against f32 (gpuopt fp32 on the f32 file).

ResNet-50 gets trained weights by default (`--resnet-weights trained`): every weight of
torchvision's random-initialized model is trained for --train-steps on the made-up image task of
synth_task.py, and calibration and held-out images come from that task; its f32 accuracy against
the task's labels is printed and recorded. With `--resnet-weights random` it keeps the random
weights and only has its BatchNorm statistics re-estimated on smooth random images (train-mode
forward passes), the issue's first recipe, whose top-1 is not decisive. The f32 file is exported
afresh each run, after either. For ResNet-50 the records
also say how decisive the f32 model's top-1 is (median top-1/top-2 logit gap in logit stds,
classes that are anyone's top-1) and carry the quantizer's oracle: ONNX Runtime's
quantize_static and `gpuopt quantize` on the same --ort-calib samples, both files run by gpuopt
int8, top-1 agreement and rel-L2 against f32 for each. BERT-base gets random token ids with a
padded tail, as compare.py.
"""
import argparse, datetime, json, os, subprocess, sys, time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (build_model, wrap, export, rel_l2)
import synth_task  # noqa: E402


def images(n, seed):
    """n smooth pseudo-images [n, 3, 224, 224], ImageNet-normalized."""
    g = torch.Generator().manual_seed(seed)
    low = torch.rand(n, 3, 7, 7, generator=g)
    x = torch.nn.functional.interpolate(low, size=(224, 224), mode="bicubic", align_corners=False)
    ramp = torch.linspace(0, 1, 224)
    x = x + 0.3 * torch.rand(n, 3, 1, 1, generator=g) * ramp.view(1, 1, 1, -1)
    x = x + 0.05 * torch.randn(n, 3, 224, 224, generator=g)
    x = x.clamp(0, 1)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    return ((x - mean) / std).float()


def recalibrate_batchnorm(m, batches=8):
    """BatchNorm statistics re-estimated on images (train-mode forward passes, a plain average
    over the batches), so each BN output is ~N(0, 1) per channel as in a trained net, not the
    identity of torchvision's initial running stats (mean 0, var 1) on un-normalized activations."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    m.to(dev)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.reset_running_stats()
                mod.momentum = None
        m.train()
        for i in range(batches):
            m(images(32, 100 + i).to(dev))
        m.eval()
    m.to("cpu")
    bn = [mod for mod in m.modules() if isinstance(mod, torch.nn.BatchNorm2d)]
    var = torch.cat([b.running_var for b in bn])
    print(f"BatchNorm recalibrated on {batches} x 32 images: {len(bn)} layers, running_var median "
          f"{var.median().item():.3g} (max {var.max().item():.3g}; 1.0 everywhere would mean not recalibrated)")


def logit_stats(ref):
    """How decisive the f32 model's top-1 is: the median gap between its two largest logits in
    units of the logits' std per row, and how many classes are anyone's top-1. A small gap makes
    top-1 agreement fragile under any perturbation, int8 or not."""
    s = np.sort(ref, axis=1)
    gap = (s[:, -1] - s[:, -2]) / np.maximum(ref.std(axis=1), 1e-30)
    return {"f32_top1_gap_median_std": round(float(np.median(gap)), 4),
            "f32_top1_classes": int(len(np.unique(ref.argmax(1)))), "f32_rows": int(len(ref))}


def ort_baseline(a, f32, cal, d, x, ref):
    """The oracle for the quantizer: ONNX Runtime's quantize_static (QDQ, per-channel symmetric int8
    weights, symmetric int8 activations, percentile 99.99, the op types gpuopt quantizes) and
    `gpuopt quantize` on the same calibration samples; both files run by gpuopt int8 on the same
    held-out images x (f32 outputs ref), top-1 agreement with f32 for each."""
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(cal)

        def get_next(self):
            x = next(self.it, None)
            return None if x is None else {"input": x[None]}

    out = {}
    try:
        t0 = time.time()
        oq, gq, sub = os.path.join(d, "ort.int8.onnx"), os.path.join(d, "gpuopt_sub.int8.onnx"), os.path.join(d, "calib_sub")
        quantize_static(f32, oq, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod.Percentile,
                        op_types_to_quantize=["Conv", "Gemm", "MatMul", "MaxPool", "GlobalAveragePool", "Add"],
                        extra_options={"ActivationSymmetric": True, "WeightSymmetric": True, "CalibPercentile": 99.99})
        os.makedirs(sub, exist_ok=True)
        np.save(os.path.join(sub, "input.npy"), cal)
        run([a.gpuopt, "quantize", f32, "--calibration", sub, "-o", gq, "--device", "cuda"])
        for key, path in (("ort", oq), ("gpuopt", gq)):
            got = gpuopt_outputs(a.gpuopt, path, "int8", {"input": x}, os.path.join(d, "got_" + key))
            out[f"top1_agreement_{key}_quantizer_{len(cal)}_samples"] = float((got.argmax(1) == ref.argmax(1)).mean())
            out[f"rel_l2_{key}_quantizer_{len(cal)}_samples"] = round(compare.rel_l2(got, ref), 4)
        print(f"ORT baseline ({len(cal)} calibration samples, {len(x)} held-out, {time.time() - t0:.0f} s): {out}")
    except Exception as e:  # noqa: BLE001
        print("ORT baseline failed:", e)
        out["ort_baseline_error"] = str(e)[:300]
    return out


def run(args, **kw):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=kw.get("timeout", 1800))
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args[:3]))}: " + (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1])
    return p


def gpuopt_time(g, model, precision, batch):
    a = [g, "run", model, "--device", "cuda", "--precision", precision, "--random-inputs", "--batch", batch,
         "--iterations", 50, "--warmup", 3, "--json"]
    j = json.loads(run(a).stdout)
    return j["device_ms"]["median"], j.get("execution", ""), j.get("peak_device_bytes")


def gpuopt_outputs(g, model, precision, feeds, work):
    """Runs once on `feeds` (dict name -> array), returns the first output."""
    os.makedirs(work, exist_ok=True)
    a = [g, "run", model, "--device", "cuda", "--precision", precision, "--iterations", 1, "--warmup", 0,
         "--output-dir", os.path.join(work, "out")]
    for n, v in feeds.items():
        f = os.path.join(work, n + ".npy")
        np.save(f, v)
        a += ["--input", f"{n}={f}"]
    run(a)
    out = os.path.join(work, "out")
    return np.load(os.path.join(out, sorted(os.listdir(out))[0]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuopt", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/int8-work")
    ap.add_argument("--models", default="resnet50,bert_base")
    ap.add_argument("--batches", default="1,32,256")
    ap.add_argument("--heldout", type=int, default=1000)
    ap.add_argument("--calib", type=int, default=256)
    ap.add_argument("--report-dir", default=".")
    ap.add_argument("--commit", default="")
    ap.add_argument("--ort-calib", type=int, default=32,
                    help="ResNet-50: also quantize with ONNX Runtime's quantize_static and gpuopt on this many "
                         "calibration samples and compare their top-1 agreement (0: off)")
    ap.add_argument("--resnet-weights", choices=["trained", "random"], default="trained",
                    help="ResNet-50: trained on synth_task's made-up classes (default), or random with "
                         "BatchNorm re-estimated on images")
    ap.add_argument("--train-steps", type=int, default=1500)
    ap.add_argument("--accuracy-target", default="",
                    help="MODEL=TARGET,...: also quantize MODEL with `gpuopt quantize --accuracy-target TARGET` "
                         "(e.g. bert_base=rel-l2=0.018) and time that file as precision int8+fp16")
    ap.add_argument("--target-heldout", type=int, default=16, help="held-out samples for --accuracy-target's search")
    a = ap.parse_args()
    targets = dict(t.split("=", 1) for t in a.accuracy_target.split(",") if t)
    os.makedirs(a.work, exist_ok=True)
    date = datetime.date.today().isoformat()
    records = []

    def emit(**r):
        r.update(date=date, commit=a.commit)
        records.append(r)
        print(json.dumps(r), flush=True)
        json.dump(records, open(a.out, "w"), indent=1)

    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
        print("onnxruntime not installed: no ONNX Runtime CPU column")
    for name in a.models.split(","):
        m, make = compare.build_model(name)
        m.eval()
        d = os.path.join(a.work, name)
        os.makedirs(d, exist_ok=True)
        f32 = os.path.join(d, f"{name}.onnx")
        q = os.path.join(d, f"{name}.int8.onnx")
        calib = os.path.join(d, "calib")
        os.makedirs(calib, exist_ok=True)
        task_acc = {}
        if name == "resnet50" and a.resnet_weights == "trained":
            t0 = time.time()
            task, acc = synth_task.train(m, steps=a.train_steps, log=lambda t: print(t, flush=True))
            print(f"ResNet-50 trained on synth_task ({a.train_steps} steps, {time.time() - t0:.0f} s): f32 accuracy "
                  f"{acc:.3f} on 1,000 held-out labelled images")
            task_acc = {"weights": f"synth_task {a.train_steps} steps", "f32_task_accuracy": acc}
            images_of = task.images
        elif name == "resnet50":
            recalibrate_batchnorm(m)
            task_acc = {"weights": "random, BatchNorm re-estimated"}
            images_of = images
        if name == "resnet50":
            cal = images_of(a.calib, 1).numpy()
            np.save(os.path.join(calib, "input.npy"), cal)
            names = ["input"]
        else:
            feeds = make(a.calib)
            names = list(feeds)
            for n, v in feeds.items():
                np.save(os.path.join(calib, f"{n}.npy"), v.numpy())
        # Always exported afresh: a file left in --work by an earlier run may predate the
        # BatchNorm recalibration (an untrained net's degenerate activations).
        compare.export(m, make(1), f32, "legacy")
        t0 = time.time()
        rep = os.path.join(a.report_dir, f"int8_report_{name}")
        p = run([a.gpuopt, "quantize", f32, "--calibration", calib, "-o", q, "--device", "cuda", "--heldout", 16,
                 "--report", rep])
        print(p.stdout[-3000:])
        quant_s = time.time() - t0
        def accuracy(path):
            """Accuracy of the QDQ file at `path` run by gpuopt int8, against f32 (gpuopt fp32 on the f32 file)."""
            if name == "resnet50":
                agree, total, chunk = 0, 0, 250
                for s in range(0, a.heldout, chunk):
                    x = images_of(min(chunk, a.heldout - s), 10_000 + s).numpy()
                    ref = gpuopt_outputs(a.gpuopt, f32, "fp32", {"input": x}, os.path.join(d, "ref"))
                    got = gpuopt_outputs(a.gpuopt, path, "int8", {"input": x}, os.path.join(d, "got"))
                    agree += int((ref.argmax(1) == got.argmax(1)).sum())
                    total += len(x)
                return {"top1_agreement": agree / total, "heldout": total, **task_acc}
            feeds = {k: v.numpy() for k, v in make(32).items()}
            ref = gpuopt_outputs(a.gpuopt, f32, "fp32", feeds, os.path.join(d, "ref"))
            got = gpuopt_outputs(a.gpuopt, path, "int8", feeds, os.path.join(d, "got"))
            return {"rel_l2_vs_fp32": compare.rel_l2(got, ref), "heldout": 32}

        acc = accuracy(q)
        if name == "resnet50":
            x250 = images_of(250, 10_000).numpy()
            ref250 = gpuopt_outputs(a.gpuopt, f32, "fp32", {"input": x250}, os.path.join(d, "ref"))
            acc.update(logit_stats(ref250))
            if a.ort_calib > 0 and ort is not None:
                acc.update(ort_baseline(a, f32, cal[:a.ort_calib], d, x250, ref250))
        print(name, "accuracy", acc, f"(quantize took {quant_s:.0f} s)")
        files = [("int8", q, acc)]
        # Mixed precision: `gpuopt quantize --accuracy-target` keeps the most sensitive layers in
        # float (fp16 at --precision int8); timed as precision "int8+fp16" when it kept any.
        if name in targets:
            qm = os.path.join(d, f"{name}.mixed.onnx")
            rep_m = os.path.join(a.report_dir, f"int8_mixed_{name}")
            t0 = time.time()
            try:
                p = run([a.gpuopt, "quantize", f32, "--calibration", calib, "-o", qm, "--device", "cuda",
                         "--accuracy-target", targets[name], "--heldout", a.target_heldout, "--report", rep_m])
                print("\n".join(p.stdout.splitlines()[:8]))
                kept = json.load(open(os.path.join(rep_m, "report.json")))["layers_float"]
                print(f"{name} --accuracy-target {targets[name]}: {kept} layers kept in float ({time.time() - t0:.0f} s)")
                if kept > 0:
                    files.append(("int8+fp16", qm, {**accuracy(qm), "accuracy_target": targets[name],
                                                    "layers_float": kept}))
                    print(name, "accuracy, mixed", files[-1][2])
            except Exception as e:  # noqa: BLE001
                print(f"{name} --accuracy-target {targets[name]} failed: {e}")
        for b in [int(x) for x in a.batches.split(",")]:
            for prec, path, extra in (("fp16", f32, {}), *files):
                try:
                    ms, how, mem = gpuopt_time(a.gpuopt, path, "fp16" if prec == "fp16" else "int8", b)
                    r = dict(model=name, exporter="legacy", batch=b, runner="gpuopt", precision=prec, ms=ms,
                             items_per_s=round(b * 1000 / ms, 1), execution=how, peak_mem_bytes=mem)
                    r.update(extra)
                    emit(**r)
                except Exception as e:  # noqa: BLE001
                    emit(model=name, batch=b, runner="gpuopt", precision=prec, error=str(e))
            if ort is not None and b <= 32:
                s = ort.InferenceSession(q, providers=["CPUExecutionProvider"])
                feeds = {"input": images_of(b, 5).numpy()} if name == "resnet50" else {k: v.numpy() for k, v in make(b).items()}
                s.run(None, feeds)
                t = time.time(); reps = 3
                for _ in range(reps):
                    s.run(None, feeds)
                ms = (time.time() - t) * 1000 / reps
                emit(model=name, exporter="legacy", batch=b, runner="onnxruntime_cpu", precision="int8", ms=ms,
                     items_per_s=round(b * 1000 / ms, 1))


if __name__ == "__main__":
    main()
