#!/usr/bin/env python3
"""Writes the small real-architecture models (and optionally random inputs as .npy).

  .venv/bin/python tools/models/make_models.py --out build/models                 # all
  .venv/bin/python tools/models/make_models.py resnet_small --out build/models --inputs 2
  build/gpuopt run build/models/resnet_small.onnx --input input=build/models/resnet_small_inputs/input.npy
"""
import argparse
import os
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from archs import ARCHS  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"models to build (default all): {', '.join(ARCHS)}")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--inputs", type=int, default=0, metavar="BATCH",
                    help="also write random inputs of this batch size to <out>/<name>_inputs/<input>.npy")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    names = args.names or [n for n in ARCHS if not n.endswith(("_full", "_base"))]
    unknown = [n for n in names if n not in ARCHS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; choose from {list(ARCHS)}")
    os.makedirs(args.out, exist_ok=True)
    for name in names:
        model, feeds = ARCHS[name]()
        path = os.path.join(args.out, f"{name}.onnx")
        onnx.save(model, path)
        params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
        print(f"{path}: {len(model.graph.node)} nodes, {params} parameters")
        if args.inputs > 0:
            d = os.path.join(args.out, f"{name}_inputs")
            os.makedirs(d, exist_ok=True)
            for k, v in feeds(np.random.default_rng(args.seed), args.inputs).items():
                np.save(os.path.join(d, f"{k}.npy"), v)


if __name__ == "__main__":
    main()
