#!/usr/bin/env python3
"""gpuopt's CPU backends against ONNX Runtime's CPU provider, side by side on one machine, same
thread count: ResNet-50 (224x224) and BERT-base (12 layers, sequence 128) from
tools/models/make_models.py at batch 1 and 32 (--batches), and MatMul 1024^3. Runners: `gpuopt run --device
cpu` (the fast backend), `--device cpu-ref` (the reference kernels; batch 1 and the MatMul only
unless --ref-all: the reference takes ~20-45 s per batch-8 run) and onnxruntime (pinned in .venv,
intra_op_num_threads = --threads). Median (`ms`) and fastest (`min_ms`) latency of --iterations
runs after --warmup runs, with the machine's 1-minute load average when measured; the
gpuopt and onnxruntime runs of a point follow each other. Records go to docs/perf/cpu.json
(fields as docs/perf/h200.json's, plus threads and host) after each point, replacing the same
host's, thread count's and runner's earlier record of that point;
then `python3 tools/perf_table.py` rewrites the CPU table in docs/performance.md.

--threads takes a list (2,16): every point at each thread count in turn, then a table of the
gpuopt / ONNX Runtime ratios per point and thread count. Each gpuopt line also shows `busy`:
its process CPU time per timed run over the median latency (`cpu_ms_per_run` of `gpuopt run
--json`), the cores the run kept busy; near the thread count when the work spreads. --profile
adds, per gpuopt point, the op types that took the most time in one profiled run (`gpuopt run
--profile`: each node timed on its own).

  .venv/bin/python tools/cpu_bench.py --gpuopt build/gpuopt --threads 2 [--models build/models]
  .venv/bin/python tools/cpu_bench.py --gpuopt build/gpuopt --threads 1,2,16 --json /tmp/cpu.json
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "models"))

MODELS = [("resnet50", "resnet50_full"), ("bert_base", "bert_base")]  # plus MatMul 1024^3 at batch 1


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def matmul_model(path):
    import onnx
    from onnx import TensorProto, helper
    n = helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")
    g = helper.make_graph([n], "matmul_1024", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1024, 1024])
                                               for x in ("a", "b")],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1024, 1024])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8  # what the pinned onnxruntime reads
    onnx.save(m, path)


def feeds_for(name, batch):
    from archs import ARCHS
    if name is None:
        rng = np.random.default_rng(0)
        return {k: rng.standard_normal((1024, 1024), dtype=np.float32) for k in ("a", "b")}
    _, feeds = ARCHS[name]()
    return feeds(np.random.default_rng(0), batch)


def gpuopt_ms(a, threads, device, path, feeds, out_dir, iterations, warmup):
    args = [a.gpuopt, "run", path, "--device", device, "--iterations", str(iterations), "--warmup", str(warmup), "--json"]
    for k, v in feeds.items():
        f = os.path.join(out_dir, f"{k}.npy")
        np.save(f, v)
        args += ["--input", f"{k}={f}"]
    env = {**os.environ, "GPUOPT_NUM_THREADS": str(threads)}
    r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    j = json.loads(r.stdout)
    lat = j["latency_ms"]
    busy = j["cpu_ms_per_run"] / lat["median"] if "cpu_ms_per_run" in j else None
    return lat["median"], lat["min"], busy


def gpuopt_profile(a, threads, path, feeds, out_dir, top=6):
    """The op types taking the most time in one `gpuopt run --profile` run: 'Conv 31.2 ms (53), ...'."""
    args = [a.gpuopt, "run", path, "--device", "cpu", "--iterations", "1", "--warmup", "1", "--profile", "--json"]
    for k in feeds:
        args += ["--input", f"{k}={os.path.join(out_dir, f'{k}.npy')}"]
    r = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "GPUOPT_NUM_THREADS": str(threads)},
                       timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    by_op = {}
    for n in json.loads(r.stdout)["profile"]["nodes"]:
        ms, count = by_op.get(n["op"], (0.0, 0))
        by_op[n["op"]] = (ms + n["wall_us"] / 1e3, count + 1)
    ranked = sorted(by_op.items(), key=lambda kv: -kv[1][0])[:top]
    return ", ".join(f"{op} {ms:.1f} ms ({count})" for op, (ms, count) in ranked)


def ort_ms(threads, path, feeds, iterations, warmup):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for _ in range(warmup):
        s.run(None, feeds)
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        s.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times), None


def thread_list(text):
    try:
        out = [int(t) for t in text.split(",")]
    except ValueError:
        out = []
    if not out or any(t < 1 or t > 4096 for t in out):
        raise argparse.ArgumentTypeError(f"'{text}' is not a list of thread counts from 1 to 4096 (e.g. 2,16)")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpuopt", default=os.path.join(ROOT, "build", "gpuopt"))
    ap.add_argument("--threads", type=thread_list, default=[2], help="thread counts, comma-separated (default 2)")
    ap.add_argument("--models", default=os.path.join(ROOT, "build", "models"))
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--ref-all", action="store_true", help="run the reference at every point")
    ap.add_argument("--json", default=os.path.join(ROOT, "docs", "perf", "cpu.json"))
    ap.add_argument("--host", default=None, help="host label (default: CPU model and core count)")
    ap.add_argument("--points", nargs="*", help="only these models (resnet50, bert_base, matmul_1024)")
    ap.add_argument("--batches", default="1,32", help="batch sizes of ResNet-50 and BERT-base")
    ap.add_argument("--profile", action="store_true", help="also print each gpuopt point's most costly op types")
    a = ap.parse_args()
    points = [(m, arch, int(b)) for m, arch in MODELS for b in a.batches.split(",")] + [("matmul_1024", None, 1)]
    host = a.host or f"{cpu_name()}, {os.cpu_count()} cores"
    os.makedirs(a.models, exist_ok=True)
    commit = os.environ.get("GPUOPT_COMMIT") or subprocess.run(
        ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    date = datetime.date.today().isoformat()
    records = []

    def save():  # after every point: an interrupted run keeps what it measured
        old = []
        if os.path.exists(a.json):
            with open(a.json) as f:
                old = [r for r in json.load(f) if not any(
                    (r.get("host"), r.get("threads"), r["model"], r["batch"], r["runner"]) ==
                    (n["host"], n["threads"], n["model"], n["batch"], n["runner"]) for n in records)]
        with open(a.json, "w") as f:
            json.dump(old + records, f, indent=1)
            f.write("\n")

    ratios = {}  # (model, batch) -> {threads: (gpuopt ms, ORT ms, busy)}
    for threads in a.threads:
        for model, arch, batch in points:
            if a.points and model not in a.points:
                continue
            path = os.path.join(a.models, f"{arch or model}.onnx")
            if not os.path.exists(path):
                if arch is None:
                    matmul_model(path)
                else:
                    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "models", "make_models.py"), arch,
                                    "--out", a.models], check=True, capture_output=True)
            feeds = feeds_for(arch, batch)
            work = os.path.join(a.models, f"bench_{model}_b{batch}")
            os.makedirs(work, exist_ok=True)
            runners = [("gpuopt_cpu", lambda: gpuopt_ms(a, threads, "cpu", path, feeds, work, a.iterations, a.warmup)),
                       ("onnxruntime_cpu", lambda: ort_ms(threads, path, feeds, a.iterations, a.warmup))]
            if a.ref_all or batch == 1:
                runners.append(("gpuopt_cpu_ref", lambda: gpuopt_ms(a, threads, "cpu-ref", path, feeds, work, 1, 1)))
            for runner, measure in runners:
                ms, min_ms, busy = measure()
                extra = f", busy {busy:.1f} cores" if busy is not None else ""
                print(f"{model} b{batch} t{threads} {runner}: median {ms:.2f} ms, min {min_ms:.2f} ms{extra}", flush=True)
                if runner != "gpuopt_cpu_ref":
                    ratios.setdefault((model, batch), {}).setdefault(threads, {})[runner] = (ms, busy)
                records.append({"model": model, "exporter": "", "batch": batch, "runner": runner, "ms": round(ms, 3),
                                "min_ms": round(min_ms, 3), "load_avg_1m": round(os.getloadavg()[0], 2),
                                "precision": "fp32", "date": date, "commit": commit,
                                "items_per_s": round(batch * 1e3 / ms, 2), "threads": threads, "host": host})
                save()
            if a.profile:
                print(f"{model} b{batch} t{threads} gpuopt_cpu profile: {gpuopt_profile(a, threads, path, feeds, work)}",
                      flush=True)
    print(f"\n{'point':<18}" + "".join(f"{f't{t} gpuopt/ORT (busy)':>26}" for t in a.threads))
    for (model, batch), by_t in ratios.items():
        cells = []
        for t in a.threads:
            r = by_t.get(t, {})
            if "gpuopt_cpu" in r and "onnxruntime_cpu" in r:
                (g, busy), (o, _) = r["gpuopt_cpu"], r["onnxruntime_cpu"]
                cells.append(f"{g:.1f}/{o:.1f}={g / o:.2f}x" + (f" ({busy:.1f})" if busy is not None else ""))
            else:
                cells.append("-")
        print(f"{model + ' b' + str(batch):<18}" + "".join(f"{c:>26}" for c in cells))
    print(f"wrote {len(records)} records to {a.json}")


if __name__ == "__main__":
    main()
