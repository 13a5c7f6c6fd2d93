"""Every form of ONNX Runtime's contrib attention ops that tests/python/test_contrib_ops.py checks on
the CPU reference, run on the GPU: gpuopt `run --device cuda` at fp32 and fp16 against ONNX Runtime
on the CPU (same graphs and inputs, built by that test's helpers).

usage: mha_forms.py GPUOPT_BIN OUT_DIR      (one line per case; exit 1 when a case is over its bound)
Bounds: rel-L2 2e-3 at fp32 (TF32 GEMMs), 2e-2 at fp16."""
import json
import os
import pathlib
import subprocess
import sys
import types

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "python"))
try:
    import pytest  # noqa: F401
except ImportError:  # the test module only uses pytest's decorators at import
    stub = types.ModuleType("pytest")
    stub.mark = types.SimpleNamespace(parametrize=lambda *a, **k: (lambda f: f))
    sys.modules["pytest"] = stub
import test_contrib_ops as T  # noqa: E402

GPUOPT, OUT = sys.argv[1], pathlib.Path(sys.argv[2])
OUT.mkdir(parents=True, exist_ok=True)
B, S = 3, 129
DEVICE = os.environ.get("MHA_DEVICE", "cuda")  # cpu: check the script itself without a GPU


def DEV(prec):
    return ["--device", DEVICE] + (["--precision", prec] if DEVICE.startswith("cuda") else [])


def cases():
    yield "attention raw [B,T] head 64", T.attention_case(2, S, 2, 64, mask=T.raw_mask(2, S))
    yield "attention raw [B,T] head 80", T.attention_case(2, 7, 2, 80, mask=T.raw_mask(2, 7))
    yield "attention key lengths", T.attention_case(B, S, 4, 16, mask=T.key_lengths(B, S))
    yield "attention end/start [2B]", T.attention_case(B, 7, 4, 16, mask=np.array([7, 5, 6, 0, 2, 1], np.int32))
    yield "attention raw [B,S,T]", T.attention_case(B, 7, 4, 16, mask=T.raw_mask(B, 7, 7))
    yield "attention bias + mask", T.attention_case(B, 7, 4, 16, mask=T.raw_mask(B, 7), attn_bias=True)
    yield "attention causal", T.attention_case(2, 9, 2, 64, mask=T.raw_mask(2, 9), unidirectional=1)
    yield "attention qkv_hidden_sizes", T.attention_case(2, 7, 2, 16, mask=T.raw_mask(2, 7),
                                                         qkv_hidden_sizes=[32, 32, 48])
    yield "mha separate, cross 7x12", T.mha_case(2, 7, 12, 2, 64, mask=T.raw_mask(2, 12))
    yield "mha key lengths + bias", T.mha_case(B, 5, 9, 4, 16, mask=T.key_lengths(B, 9), attn_bias=True)
    yield "mha 4-D key/value", T.mha_case(2, 7, 11, 2, 64, form="bnsh", bias=False, mask=T.raw_mask(2, 11))
    for four_d in (False, True):
        for inter in (0, 1):
            yield f"rotary {'4-D' if four_d else '3-D'} interleaved={inter}", T.rotary_case(2, S, 2, 64, four_d, inter)
    yield "rotary partial, offset", T.rotary_case(3, 7, 2, 80, False, 0, rot=32, pos="1d")
    yield "embed layernorm", T.embed_case(3, 7, outputs=T.MI)


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


bad = 0
records = []
for i, (name, (model, feeds)) in enumerate(cases()):
    d = OUT / f"case{i}"
    d.mkdir(exist_ok=True)
    path = d / "m.onnx"
    onnx.save(model, path)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    args = []
    for k, v in feeds.items():
        np.save(d / f"{k}.npy", v)
        args += ["--input", f"{k}={d / f'{k}.npy'}"]
    rec = {"case": name}
    for prec, bound in (("fp32", 2e-3), ("fp16", 2e-2)):
        r = subprocess.run([GPUOPT, "run", str(path), *args, *DEV(prec), "--iterations",
                            "2", "--warmup", "0", "--output-dir", str(d / prec)], capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 0:
            rec[prec] = "ERROR " + (r.stderr.strip().splitlines() or ["?"])[-1]
            bad += 1
            continue
        errs = [rel_l2(np.load(d / prec / f"{o.name}.npy"), w) for o, w in zip(model.graph.output, want)]
        rec[prec] = max(errs)
        bad += rec[prec] > bound
    records.append(rec)
    print(f"{name:32} " + "  ".join(f"{p} {rec[p]:.1e}" if isinstance(rec[p], float) else f"{p} {rec[p]}"
                                     for p in ("fp32", "fp16")), flush=True)
json.dump(records, open(OUT / "mha_forms.json", "w"), indent=1)
print(f"{len(records) * 2 - bad}/{len(records) * 2} within bounds")
sys.exit(1 if bad else 0)
