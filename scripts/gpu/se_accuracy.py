"""Accuracy of a CNN's squeeze-excitation path on the GPU against ONNX Runtime (scripts/gpu/se.sh).

compare.py compares the logits with PyTorch's (in early runs 1.0 for every runner: random-init
logits of these nets were degenerate); this compares the SE path itself on the same ONNX: the
model cut at the head's pool, with the pre-pool features and every squeeze-excitation mean (each
GlobalAveragePool / spatial ReduceMean but the head's) as outputs. ONNX Runtime (CPU, fp32) is the
oracle; gpuopt runs the cut model once per configuration (environment) on the same input.
usage: se_accuracy.py MODEL.onnx --gpuopt BIN --work DIR [--device cuda] [--precision fp16]
       [--batch 2] [--hw N] [--config NAME=ENV1=V1,ENV2=V2 ...]"""
import argparse, os, subprocess, sys

import numpy as np
import onnx
import onnxruntime as ort

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("--gpuopt", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--device", default="cuda")
ap.add_argument("--precision", default="fp16")
ap.add_argument("--batch", type=int, default=2)
ap.add_argument("--hw", type=int, help="input height and width (default: the model's, else 224)")
ap.add_argument("--config", action="append", default=[], help="NAME=ENV=V,ENV=V (NAME= alone: no env)")
a = ap.parse_args()
os.makedirs(a.work, exist_ok=True)

m = onnx.load(a.model)
g = m.graph
means = [n for n in g.node if n.op_type in ("GlobalAveragePool", "ReduceMean")]
if not means:
    sys.exit(f"{a.model}: no GlobalAveragePool/ReduceMean")
head = means[-1]  # the classifier's pool comes last
wanted = [head.input[0]] + [n.output[0] for n in means[:-1]]
cut = os.path.join(a.work, "cut.onnx")
onnx.utils.extract_model(a.model, cut, [i.name for i in g.input if i.name not in {t.name for t in g.initializer}], wanted)
# Plain output names, so each .npy file is named after its output.
c = onnx.load(cut)
rename = {v: ("features" if k == 0 else f"se_mean_{k:02d}") for k, v in enumerate(wanted)}
for n in c.graph.node:
    n.input[:] = [rename.get(x, x) for x in n.input]
    n.output[:] = [rename.get(x, x) for x in n.output]
for o in c.graph.output:
    o.name = rename.get(o.name, o.name)
onnx.save(c, cut)

inp = c.graph.input[0]
dims = [d.dim_value for d in inp.type.tensor_type.shape.dim]
hw = a.hw or (dims[2] if len(dims) == 4 and dims[2] > 0 else 224)
x = np.random.default_rng(5).standard_normal((a.batch, 3, hw, hw)).astype(np.float32)
np.save(os.path.join(a.work, "x.npy"), x)
sess = ort.InferenceSession(cut, providers=["CPUExecutionProvider"])
ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {inp.name: x})))


def rel(got, want):
    return float(np.linalg.norm(got.astype(np.float64) - want) / max(np.linalg.norm(want.astype(np.float64)), 1e-30))


for spec in a.config or ["default="]:
    name, _, envs = spec.partition("=")
    env = dict(os.environ)
    for kv in filter(None, envs.split(",")):
        k, _, v = kv.partition("=")
        env[k] = v
    out = os.path.join(a.work, "out_" + name)
    p = subprocess.run([a.gpuopt, "run", cut, "--device", a.device, "--precision", a.precision, "--iterations", "1",
                        "--input", f"{inp.name}={os.path.join(a.work, 'x.npy')}", "--output-dir", out],
                       capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0:
        print(f"{name}: gpuopt failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
        continue
    errs = {k: rel(np.load(os.path.join(out, k + ".npy")), v) for k, v in ref.items()}
    se = [e for k, e in errs.items() if k.startswith("se_mean")]
    print(f"{os.path.basename(a.model)} {name:>10}: rel L2 vs ORT fp32: features {errs['features']:.3g}, "
          f"{len(se)} SE means max {max(se) if se else float('nan'):.3g} (median {float(np.median(se)) if se else float('nan'):.3g})")
