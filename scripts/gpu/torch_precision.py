#!/usr/bin/env python3
"""PyTorch's reduced-precision error on our generated models: the field's figure next to ours.

Runs each model of tools/models/archs.py in PyTorch on the GPU through a small ONNX interpreter
(the ops those models use), in four ways, and prints the relative L2 error of every output
against ONNX Runtime's CPU f32 result (the same reference gpuopt's cross-check uses):

  fp32           torch f32 (TF32 off)
  autocast-bf16  torch.autocast(bfloat16): matmuls/convs in bf16, the rest f32 (PyTorch's split)
  autocast-fp16  the same with float16
  bf16           every float tensor bf16 (weights and activations), like gpuopt --precision bf16

  python3 scripts/gpu/torch_precision.py vit_tiny bert gpt_block resnet18 [--json FILE]
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn.functional as F
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "models"))
from archs import ARCHS  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
ONNX_DTYPE = {1: torch.float32, 6: torch.int32, 7: torch.int64, 9: torch.bool, 10: torch.float16, 16: torch.bfloat16}


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def run_onnx(model, feeds, float_dtype):
    """Evaluates the graph node by node with torch ops; floats are stored as float_dtype."""
    env = {}
    for t in model.graph.initializer:
        a = torch.from_numpy(numpy_helper.to_array(t).copy()).to(DEV)
        env[t.name] = a.to(float_dtype) if a.is_floating_point() else a
    for k, v in feeds.items():
        a = torch.from_numpy(v).to(DEV)
        env[k] = a.to(float_dtype) if a.is_floating_point() else a
    for n in model.graph.node:
        x = [env[i] if i else None for i in n.input]
        at = attrs(n)
        op = n.op_type
        if op in ("Identity",):
            y = x[0]
        elif op == "Add": y = x[0] + x[1]
        elif op == "Sub": y = x[0] - x[1]
        elif op == "Mul": y = x[0] * x[1]
        elif op == "Div": y = x[0] / x[1]
        elif op == "Pow": y = torch.pow(x[0], x[1])
        elif op == "Erf": y = torch.erf(x[0])
        elif op == "Tanh": y = torch.tanh(x[0])
        elif op == "Relu": y = torch.relu(x[0])
        elif op == "Clip": y = torch.clamp(x[0], x[1].item() if x[1] is not None else None, x[2].item() if len(x) > 2 and x[2] is not None else None)
        elif op == "MatMul": y = torch.matmul(x[0], x[1])
        elif op == "Gemm":
            a, b = x[0], x[1]
            if at.get("transA", 0): a = a.t()
            if at.get("transB", 0): b = b.t()
            y = at.get("alpha", 1.0) * (a @ b)
            if len(x) > 2 and x[2] is not None: y = y + at.get("beta", 1.0) * x[2]
        elif op == "Conv":
            pads = at.get("pads", [0, 0, 0, 0])
            y = F.conv2d(x[0], x[1], x[2] if len(x) > 2 else None, stride=at.get("strides", [1, 1]),
                         padding=(pads[0], pads[1]), dilation=at.get("dilations", [1, 1]), groups=at.get("group", 1))
        elif op == "BatchNormalization":
            y = F.batch_norm(x[0], x[3], x[4], x[1], x[2], False, 0.0, at.get("epsilon", 1e-5))
        elif op == "MaxPool":
            pads = at.get("pads", [0, 0, 0, 0])
            y = F.max_pool2d(x[0], at["kernel_shape"], at.get("strides", at["kernel_shape"]), (pads[0], pads[1]))
        elif op == "GlobalAveragePool": y = x[0].mean(dim=(2, 3), keepdim=True)
        elif op == "Flatten": y = x[0].reshape(int(np.prod(x[0].shape[:at.get("axis", 1)])), -1)
        elif op == "LayerNormalization":
            y = F.layer_norm(x[0], x[0].shape[at.get("axis", -1):], x[1], x[2] if len(x) > 2 else None, at.get("epsilon", 1e-5))
        elif op == "Softmax": y = torch.softmax(x[0], dim=at.get("axis", -1))
        elif op == "Transpose": y = x[0].permute(*at["perm"])
        elif op == "Reshape":
            shape = [int(s) for s in x[1].tolist()]
            shape = [x[0].shape[i] if s == 0 else s for i, s in enumerate(shape)]
            y = x[0].reshape(shape)
        elif op == "Shape": y = torch.tensor(list(x[0].shape), dtype=torch.int64, device=DEV)
        elif op == "Gather":
            ax = at.get("axis", 0)
            idx = x[1]
            y = torch.index_select(x[0], ax, idx.reshape(-1)).reshape(x[0].shape[:ax] + idx.shape + x[0].shape[ax + 1:])
        elif op == "Unsqueeze":
            y = x[0]
            for a in sorted(int(v) for v in x[1].tolist()): y = y.unsqueeze(a)
        elif op == "Concat": y = torch.cat(x, dim=at["axis"])
        elif op == "Expand": y = x[0] * torch.ones([int(v) for v in x[1].tolist()], dtype=x[0].dtype, device=DEV)
        elif op == "Equal": y = x[0] == x[1]
        elif op == "Where": y = torch.where(x[0], x[1], x[2])
        elif op == "Range": y = torch.arange(x[0].item(), x[1].item(), x[2].item(), device=DEV, dtype=x[0].dtype)
        elif op == "ConstantOfShape":
            v = at.get("value")
            arr = numpy_helper.to_array(v) if v is not None else np.zeros(1, np.float32)
            t = torch.full([int(s) for s in x[0].tolist()], float(arr.reshape(-1)[0]), device=DEV,
                           dtype=ONNX_DTYPE.get(v.data_type if v is not None else 1, torch.float32))
            y = t.to(float_dtype) if t.is_floating_point() else t
        elif op == "Trilu":
            k = int(x[1].item()) if len(x) > 1 and x[1] is not None else 0
            y = torch.triu(x[0], k) if at.get("upper", 1) else torch.tril(x[0], k)
        else:
            raise NotImplementedError(f"op {op} (node {n.name})")
        env[n.output[0]] = y
    return [env[o.name] for o in model.graph.output]


def rel_l2(got, ref):
    got = got.astype(np.float64)
    ref = ref.astype(np.float64)
    return float(np.sqrt(((got - ref) ** 2).sum() / max((ref ** 2).sum(), 1e-30)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=["vit_tiny", "bert", "gpt_block", "resnet18", "mobilenetv2"])
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--json", help="also write the figures as JSON here")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = []
    for name in args.names:
        model, feeds_fn = ARCHS[name]()
        feeds = feeds_fn(np.random.default_rng(0), args.batch)  # the inputs scripts/gpu/engine.sh uses
        ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        modes = {
            "fp32": lambda: run_onnx(model, feeds, torch.float32),
            "autocast-bf16": lambda: _autocast(model, feeds, torch.bfloat16),
            "autocast-fp16": lambda: _autocast(model, feeds, torch.float16),
            "bf16": lambda: run_onnx(model, feeds, torch.bfloat16),
        }
        for mode, fn in modes.items():
            with torch.no_grad():
                outs = fn()
            for o, r in zip(outs, ref):
                err = rel_l2(o.float().cpu().numpy(), r)
                rows.append({"model": name, "mode": mode, "rel_l2": err})
                print(f"torch {name:12s} {mode:14s} rel L2 {err:.3g}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


def _autocast(model, feeds, dtype):
    with torch.autocast(DEV, dtype=dtype):
        return run_onnx(model, feeds, torch.float32)


if __name__ == "__main__":
    main()
