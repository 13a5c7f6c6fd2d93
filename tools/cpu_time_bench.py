#!/usr/bin/env python3
"""CPU time per run, one thread: `gpuopt run --device cpu` (GPUOPT_NUM_THREADS=1) against ONNX
Runtime (intra_op_num_threads=1) on the same model and inputs. CPU seconds (user + system) count
the work done, not the time waited for a core, so on a machine shared with other jobs this ratio
holds where wall-clock latency does not (cache contention still shows). gpuopt's figure is the
difference between two runs of different iteration counts (load and compile cancel out); ONNX
Runtime's is measured around its run loop in this process.

  .venv/bin/python tools/cpu_time_bench.py --gpuopt build/gpuopt MODEL.onnx [--batch 1] [--dim NAME=V]
  .venv/bin/python tools/cpu_time_bench.py --gpuopt build/gpuopt build/models/resnet50_full.onnx --runs 10
"""
import argparse
import os
import resource
import subprocess
import tempfile

import numpy as np


def feeds_for(path, batch, dims):
    import onnxruntime as ort
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for i in s.get_inputs():
        shape = [batch if n == 0 and not isinstance(d, int) else (d if isinstance(d, int) else dims[d])
                 for n, d in enumerate(i.shape)]
        if "int64" in i.type:
            feeds[i.name] = rng.integers(0, 8, shape, dtype=np.int64)  # as gpuopt run --random-inputs
        else:
            feeds[i.name] = rng.uniform(-1, 1, shape).astype(np.float32)
    return feeds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--gpuopt", default="build/gpuopt")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dim", action="append", default=[], help="NAME=VALUE for another symbolic dim")
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    dims = {k: int(v) for k, v in (d.split("=", 1) for d in a.dim)}
    feeds = feeds_for(a.model, a.batch, dims)
    with tempfile.TemporaryDirectory() as tmp:
        args = [a.gpuopt, "run", a.model, "--device", "cpu", "--warmup", "0"]
        for k, v in feeds.items():
            np.save(os.path.join(tmp, f"{k}.npy"), v)
            args += ["--input", f"{k}={os.path.join(tmp, k + '.npy')}"]

        def child_cpu(iters):
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(args + ["--iterations", str(iters)], check=True, capture_output=True,
                           env={**os.environ, "GPUOPT_NUM_THREADS": "1"})
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        g = (child_cpu(1 + a.runs) - child_cpu(1)) / a.runs * 1e3
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    s = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    s.run(None, feeds)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(a.runs):
        s.run(None, feeds)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    o = ((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)) / a.runs * 1e3
    print(f"{os.path.basename(a.model)} batch {a.batch}: CPU ms per run on one thread: gpuopt {g:.1f}, "
          f"onnxruntime {o:.1f}, gpuopt / onnxruntime {g / o:.2f}")


if __name__ == "__main__":
    main()
