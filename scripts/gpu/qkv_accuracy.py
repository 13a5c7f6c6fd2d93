"""Output of a transformer on the GPU against ONNX Runtime (CPU, fp32), per configuration
(scripts/gpu/qkv.sh: merge_qkv on and off in one binary).

Inputs: integer ids in [0, 100) (token types 0, positions 0..S-1), an attention mask of ones whose last 16 keys are 0 in every
batch row but the first (padding, so masked keys are exercised), float inputs N(0, 1); symbolic
dims: the batch --batch, every other one --seq. Every output is compared (rel L2).
usage: qkv_accuracy.py MODEL.onnx --gpuopt BIN --work DIR [--batch 2] [--seq 128] [--device cuda]
       [--precision fp16]
       [--config 'NAME=ENV1=V1;ENV2=V2' ...]   (';' between variables: values may hold commas)"""
import argparse, os, subprocess, sys

import numpy as np
import onnx
import onnxruntime as ort

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("--gpuopt", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--batch", type=int, default=2)
ap.add_argument("--seq", type=int, default=128)
ap.add_argument("--precision", default="fp16")
ap.add_argument("--device", default="cuda")
ap.add_argument("--config", action="append", default=[], help="NAME=ENV=V;ENV=V (NAME= alone: no env)")
a = ap.parse_args()
os.makedirs(a.work, exist_ok=True)

m = onnx.load(a.model, load_external_data=False)
inits = {t.name for t in m.graph.initializer}
rng = np.random.default_rng(7)
feeds, args = {}, []
for i in m.graph.input:
    if i.name in inits:
        continue
    tt = i.type.tensor_type
    shape = [d.dim_value if d.dim_value > 0 else (a.batch if k == 0 else a.seq) for k, d in enumerate(tt.shape.dim)]
    dt = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
    if np.issubdtype(dt, np.integer) and "mask" in i.name:
        x = np.ones(shape, dt)
        if len(shape) == 2 and shape[1] > 16:
            x[1:, -16:] = 0
    elif np.issubdtype(dt, np.integer) and "token_type" in i.name:
        x = np.zeros(shape, dt)
    elif np.issubdtype(dt, np.integer) and "position" in i.name and len(shape) == 2:
        x = np.broadcast_to(np.arange(shape[1], dtype=dt), shape).copy()
    elif np.issubdtype(dt, np.integer):
        x = rng.integers(0, 100, shape).astype(dt)
    else:
        x = rng.standard_normal(shape).astype(dt)
    feeds[i.name] = x
    f = os.path.join(a.work, i.name.replace("/", "_") + ".npy")
    np.save(f, x)
    args += ["--input", f"{i.name}={f}"]

sess = ort.InferenceSession(a.model, providers=["CPUExecutionProvider"])
names = [o.name for o in sess.get_outputs()]
ref = dict(zip(names, sess.run(None, feeds)))


def rel(got, want):
    want = want.astype(np.float64)
    return float(np.linalg.norm(got.astype(np.float64) - want) / max(np.linalg.norm(want), 1e-30))


for spec in a.config or ["default="]:
    name, _, envs = spec.partition("=")
    env = dict(os.environ)
    for kv in filter(None, envs.split(";")):
        k, _, v = kv.partition("=")
        env[k] = v
    out = os.path.join(a.work, "out_" + name)
    p = subprocess.run([a.gpuopt, "run", a.model, "--device", a.device, "--precision", a.precision, "--iterations", "1",
                        *args, "--output-dir", out], capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0:
        print(f"{os.path.basename(a.model)} {name}: gpuopt failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
        continue
    errs = []
    for k, v in ref.items():
        f = os.path.join(out, k + ".npy")
        if not os.path.exists(f):
            errs.append(f"{k}: missing")
            continue
        g = np.load(f)
        errs.append(f"{k}: rel L2 {rel(g, v):.3g}" + ("" if np.isfinite(g).all() else " NON-FINITE"))
    print(f"{os.path.basename(a.model)} b{a.batch} {name:>4}: vs ORT fp32: " + "; ".join(errs))
sys.exit(0)
