"""The ONNX Runtime oracle-case writer tests/ops_nn/gen_ort_cases.py and
tests/ops_tensor/gen_cases.py share: each case is one single-node ONNX model run by onnxruntime
(CPU) on the given inputs; inputs and ORT's outputs are stored as .npy in <out>/<case>/ beside
case.json (op, opset, attributes, file names), which the C++ case tests read.

    from ort_case_gen import case, main
    def define(): case("relu_f16", "Relu", [x])
    main(define, Path(__file__).resolve().parent / "data")
"""
import json
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

CASES = []


def case(name, op, inputs, n_out=1, opset=17, **attrs):
    """One case: `inputs` (None for an omitted optional input), `n_out` outputs, attributes."""
    CASES.append((name, op, inputs, n_out, opset, attrs))


def attr_json(name, v):
    """case.json's form of one attribute, and the (file, array) to save for a tensor attribute."""
    if isinstance(v, np.ndarray):
        fn = f"attr_{name}.npy"
        return {"t": fn}, (fn, v)
    if isinstance(v, (bool, int)):
        return {"i": int(v)}, None
    if isinstance(v, float):
        return {"f": v}, None
    if isinstance(v, str):
        return {"s": v}, None
    if isinstance(v, list) and all(isinstance(x, int) for x in v):
        return {"ints": v}, None
    if isinstance(v, list):
        return {"floats": [float(x) for x in v]}, None
    raise TypeError(name)


def run_case(out, name, op, inputs, n_out, opset, attrs):
    d = out / name
    d.mkdir(parents=True)
    in_names = [f"in{i}" if x is not None else "" for i, x in enumerate(inputs)]
    out_names = [f"out{i}" for i in range(n_out)]
    node_attrs = {k: (numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v) for k, v in attrs.items()}
    node = helper.make_node(op, in_names, out_names, **node_attrs)
    g_in = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
            for n, x in zip(in_names, inputs) if x is not None]
    g_out = [onnx.ValueInfoProto(name=n) for n in out_names]  # types left to ORT's inference
    model = helper.make_model(helper.make_graph([node], name, g_in, g_out),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = sess.run(out_names, {n: x for n, x in zip(in_names, inputs) if x is not None})
    meta = {"op": op, "opset": opset, "attrs": {}, "inputs": [], "outputs": []}
    for k, v in attrs.items():
        j, f = attr_json(k, v)
        meta["attrs"][k] = j
        if f:
            np.save(d / f[0], f[1])
    for n, x in zip(in_names, inputs):
        if x is None:
            meta["inputs"].append(None)
        else:
            np.save(d / f"{n}.npy", np.asarray(x))
            meta["inputs"].append(f"{n}.npy")
    for n, y in zip(out_names, outs):
        np.save(d / f"{n}.npy", np.asarray(y))
        meta["outputs"].append(f"{n}.npy")
    (d / "case.json").write_text(json.dumps(meta, indent=1) + "\n")


def main(define, out):
    """Defines the cases and writes them under `out`: all of them (the folder rewritten), or those
    named on the command line."""
    define()
    only = set(sys.argv[1:])
    if not only and out.exists():
        shutil.rmtree(out)
    out.mkdir(exist_ok=True)
    for c in CASES:
        if only and c[0] not in only:
            continue
        if (out / c[0]).exists():
            shutil.rmtree(out / c[0])
        run_case(out, *c)
    print(f"{len(CASES)} cases in {out}")
