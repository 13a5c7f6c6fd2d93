"""BERT-base as ONNX Runtime's transformer optimizer writes it (com.microsoft Attention,
SkipLayerNormalization, BiasGelu), run by gpuopt on the GPU against ONNX Runtime on the CPU.

usage: mha_bert.py GPUOPT_BIN OUT_DIR [--batch 32] [--seq 128]

Two models (the synthetic one first), each: the com.microsoft ops in it, gpuopt `run --device cuda --precision fp16` device
time (median) and its op profile, and the rel-L2 error against ONNX Runtime (CPU, f32) on the
same inputs:
  1. "export": transformers BertModel(BertConfig(), eager attention, random weights) exported by
     torch.onnx (legacy, opset 17) at seq 128, then optimizer.optimize_model(model_type='bert',
     num_heads=12, hidden_size=768) with its default options (EmbedLayerNormalization on); when
     gpuopt cannot run that, "export_no_embed" again with EmbedLayerNormalization off. Skipped
     with the reason when transformers/torch are missing or the optimizer writes no Attention for
     this transformers version.
  2. "synthetic": the same encoder written directly with those ops (12 layers, hidden 768, 12
     heads, FFN 3072, random weights, input [B, S, 768] and a padded int32 mask), so the contrib
     path is measured even where (1) is skipped.
Prints one line per model; writes OUT_DIR/mha_bert.json."""
import collections
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

GPUOPT, OUT = sys.argv[1], sys.argv[2]
BATCH = int(sys.argv[sys.argv.index("--batch") + 1]) if "--batch" in sys.argv else 32
SEQ = int(sys.argv[sys.argv.index("--seq") + 1]) if "--seq" in sys.argv else 128
os.makedirs(OUT, exist_ok=True)
MS = "com.microsoft"
DEVICE = os.environ.get("MHA_DEVICE", "cuda")  # cpu: check the script itself on a machine without a GPU
PRECISION = ["--precision", "fp16"] if DEVICE.startswith("cuda") else []


def contrib_ops(model):
    return dict(collections.Counter(n.op_type for n in model.graph.node if n.domain == MS))


def optimize(raw, path, embed):
    from onnxruntime.transformers import optimizer
    from onnxruntime.transformers.fusion_options import FusionOptions
    opts = FusionOptions("bert")
    opts.enable_embed_layer_norm = embed
    opt = optimizer.optimize_model(raw, model_type="bert", num_heads=12, hidden_size=768, optimization_options=opts,
                                   opt_level=0)
    opt.save_model_to_file(path)


def export_bert(path):
    import torch
    import transformers as tf
    cfg = tf.BertConfig()
    try:
        m = tf.BertModel(cfg, attn_implementation="eager")
    except TypeError:
        cfg._attn_implementation = "eager"
        m = tf.BertModel(cfg)
    m.eval()

    class W(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids, mask):
            return self.m(input_ids=ids, attention_mask=mask)[0]

    ids = torch.randint(0, 30522, (2, SEQ))
    mask = torch.ones(2, SEQ, dtype=torch.int64)
    raw = path.replace(".onnx", "_raw.onnx")
    torch.onnx.export(W(m), (ids, mask), raw, input_names=["input_ids", "attention_mask"], output_names=["output"],
                      opset_version=17, dynamic_axes={"input_ids": {0: "batch"}, "attention_mask": {0: "batch"},
                                                      "output": {0: "batch"}}, dynamo=False)
    optimize(raw, path, embed=True)
    rng = np.random.default_rng(0)
    mask = np.ones((BATCH, SEQ), np.int64)
    mask[:, SEQ - SEQ // 8:] = 0
    return {"input_ids": rng.integers(0, 30522, (BATCH, SEQ)).astype(np.int64), "attention_mask": mask}


def synthetic_bert(path, layers=12, hidden=768, heads=12, ffn=3072):
    rng = np.random.default_rng(1)
    inits, nodes = [], []

    def w(name, *shape, std=0.02):
        inits.append(helper.make_tensor(name, TensorProto.FLOAT, shape, (rng.standard_normal(shape) * std)
                                        .astype(np.float32).ravel()))
        return name

    def ones(name, n):
        inits.append(helper.make_tensor(name, TensorProto.FLOAT, [n], np.ones(n, np.float32)))
        return name

    x = "x"
    for i in range(layers):
        p = f"l{i}_"
        nodes.append(helper.make_node("Attention", [x, w(p + "wqkv", hidden, 3 * hidden), w(p + "bqkv", 3 * hidden),
                                                    "mask"], [p + "att"], domain=MS, num_heads=heads, name=p + "attention"))
        nodes.append(helper.make_node("MatMul", [p + "att", w(p + "wo", hidden, hidden)], [p + "ao"]))
        nodes.append(helper.make_node("SkipLayerNormalization", [p + "ao", x, ones(p + "g1", hidden),
                                                                 w(p + "b1", hidden), w(p + "bo", hidden)],
                                      [p + "h1"], domain=MS, epsilon=1e-12))
        nodes.append(helper.make_node("MatMul", [p + "h1", w(p + "wi", hidden, ffn)], [p + "fi"]))
        nodes.append(helper.make_node("BiasGelu", [p + "fi", w(p + "bi", ffn)], [p + "gi"], domain=MS))
        nodes.append(helper.make_node("MatMul", [p + "gi", w(p + "wf", ffn, hidden)], [p + "fo"]))
        nodes.append(helper.make_node("SkipLayerNormalization", [p + "fo", p + "h1", ones(p + "g2", hidden),
                                                                 w(p + "b2", hidden), w(p + "bf", hidden)],
                                      [p + "out"], domain=MS, epsilon=1e-12))
        x = p + "out"
    nodes.append(helper.make_node("Identity", [x], ["output"]))
    g = helper.make_graph(nodes, "bert_base_contrib",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", SEQ, hidden]),
                           helper.make_tensor_value_info("mask", TensorProto.INT32, ["batch", SEQ])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", SEQ, hidden])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    onnx.save(m, path)
    mask = np.ones((BATCH, SEQ), np.int32)
    mask[:, SEQ - SEQ // 8:] = 0
    return {"x": rng.standard_normal((BATCH, SEQ, hidden)).astype(np.float32), "mask": mask}


def measure(name, path, feeds):
    model = onnx.load(path, load_external_data=False)
    rec = {"model": name, "batch": BATCH, "seq": SEQ, "contrib_ops": contrib_ops(model)}
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    args = []
    for k, v in feeds.items():
        np.save(f"{d}/{k}.npy", v)
        args += ["--input", f"{k}={d}/{k}.npy"]
    t = time.time()
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    rec["ort_cpu_s"] = round(time.time() - t, 2)
    r = subprocess.run([GPUOPT, "run", path, *args, "--device", DEVICE, *PRECISION, "--iterations", "30",
                        "--warmup", "5", "--json", "--output-dir", f"{d}/out"], capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        rec["error"] = (r.stderr.strip().splitlines() or ["?"])[-1]
        return rec
    j = json.loads(r.stdout)
    rec["device_ms"] = j.get("device_ms", {}).get("median")
    rec["latency_ms"] = j.get("latency_ms", {}).get("median")
    rec["execution"] = j.get("execution")
    got = np.load(f"{d}/out/output.npy").astype(np.float64)
    rec["rel_l2_vs_ort_cpu"] = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    p = subprocess.run([GPUOPT, "run", path, *args, "--device", DEVICE, *PRECISION, "--iterations", "3",
                        "--profile", "--json"], capture_output=True, text=True, timeout=300)
    if p.returncode == 0:
        ops = json.loads(p.stdout)["profile"]["ops"]
        rec["ops"] = {o["op"]: o["nodes"] for o in ops}
        rec["ops_gpu_us"] = {o["op"]: o.get("gpu_us") for o in ops}
    return rec


records = [measure("synthetic", f"{OUT}/bert_base_contrib.onnx", synthetic_bert(f"{OUT}/bert_base_contrib.onnx"))]
try:
    feeds = export_bert(f"{OUT}/bert_base_ort.onnx")
    ops = contrib_ops(onnx.load(f"{OUT}/bert_base_ort.onnx", load_external_data=False))
    if "Attention" not in ops:
        records.append({"model": "export", "skipped": f"ORT's optimizer wrote no Attention (contrib ops {ops})"})
    else:
        records.append(measure("export", f"{OUT}/bert_base_ort.onnx", feeds))
        if "error" in records[-1]:
            optimize(f"{OUT}/bert_base_ort_raw.onnx", f"{OUT}/bert_base_ort_noembed.onnx", embed=False)
            records.append(measure("export_no_embed", f"{OUT}/bert_base_ort_noembed.onnx", feeds))
except Exception as e:  # noqa: BLE001 - reported beside the synthetic model's record
    records.append({"model": "export", "skipped": f"{type(e).__name__}: {str(e)[:200]}"})
json.dump(records, open(f"{OUT}/mha_bert.json", "w"), indent=1)
for r in records:
    print(json.dumps(r))
