#!/usr/bin/env python3
"""The main job's loop (./scripts/run.sh after deps and build; scripts/gpu/mainjob.sh on the GPU
machine): what hardware is here, a generated model compiled for the best device and precision
available, `gpuopt serve` with a short `gpuopt perf` run against it and the batch sizes the
server formed (from its /metrics), a clean SIGTERM shutdown, then one summary table and where
to go next.

  tools/mainjob.py --gpuopt build/gpuopt --out build/mainjob [--json summary.json]

Needs the `onnx` Python package to generate the model (the project's .venv has it); the rest is
the standard library. Exit status: 0 when every step worked, 1 when one failed (named last).
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = "resnet_small"


class StepFailed(Exception):
    pass


class Job:
    def __init__(self, args):
        self.a = args
        self.t0 = time.monotonic()
        self.rows = []  # (step, result, seconds)
        self.record = {"steps": []}
        self.n = 0
        self.total = 6

    def step(self, title):
        self.n += 1
        print(f"\n==> [{self.n}/{self.total}] {title}", flush=True)
        return time.monotonic()

    def done(self, name, result, started, **extra):
        dt = time.monotonic() - started
        self.rows.append((name, result, dt))
        self.record["steps"].append({"step": name, "result": result, "seconds": round(dt, 2), **extra})
        print(f"    {result}  ({dt:.1f} s)", flush=True)

    def gpuopt(self, *argv, timeout=600):
        cmd = [self.a.gpuopt, *argv]
        print("    $ " + " ".join(cmd), flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise StepFailed(f"`{' '.join(cmd)}` exited {r.returncode}: {(r.stderr or r.stdout).strip()}")
        return r.stdout


def table(head, rows, indent="    "):
    w = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda r: indent + "  ".join(str(x).ljust(n) for x, n in zip(r, w)).rstrip()
    return "\n".join([line(head), indent + "-" * (sum(w) + 2 * (len(w) - 1))] + [line(r) for r in rows])


def gib(b):
    return f"{b / 2**30:.1f} GiB" if b else "?"


def ms(us):
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.0f} us"


# ---- steps -------------------------------------------------------------------------------------

def hardware(job):
    t = job.step("What hardware is here (gpuopt info)")
    info = json.loads(job.gpuopt("info", "--json"))
    h = info["host"]
    cpu = f"{h['cpu_model'] or 'CPU'} ({h.get('physical_cores') or h['logical_cpus']} cores), {gib(h.get('mem_total_bytes'))}"
    gpus = info.get("gpus", [])
    rows = [("CPU", cpu)]
    for g in gpus:
        rows.append((f"GPU {g['index']}", f"{g.get('name')} ({gib(g['memory'].get('total_bytes'))}, compute capability "
                                          f"{g.get('compute_capability')}, {g.get('sm_count')} SMs)"))
    usable = bool(gpus) and info["cuda"]["built_with_cuda"] and not info["cuda"].get("error")
    if not gpus:
        why = info["nvml"].get("error") or "none found"
        if why.startswith("NVML not found"):  # NVML comes with the driver
            why = "no NVIDIA driver installed (libnvidia-ml.so.1 not found)"
        elif info["cuda"].get("error") and info["cuda"]["built_with_cuda"]:
            why += "; " + info["cuda"]["error"]
        rows.append(("GPU", f"none usable: {why}; gpuopt runs on the CPU (`gpuopt info` says more)"))
    elif not info["cuda"]["built_with_cuda"]:
        rows.append(("note", "this gpuopt was built without CUDA: the GPUs are listed but not used"))
    print(table(["", "found"], rows))
    summary = f"{cpu}; " + (f"{len(gpus)} x {gpus[0].get('name')}" if gpus else "no usable NVIDIA GPU")
    job.record["hardware"] = {"cpu": cpu, "gpus": [g.get("name") for g in gpus], "cuda_usable": usable}
    ceilings = None
    if usable and not job.a.no_bench:
        # A few seconds of measured ceilings: every benchmark at one small size each.
        print("    measuring the GPU's ceilings (a few seconds; `gpuopt bench all` measures them fully)", flush=True)
        out = job.gpuopt("bench", "all", "--json", "-q", "--memory-sizes", "256M", "--transfer-sizes", "64M",
                         "--gemm-sizes", "4096", "--cpu-sizes", "1024", "--f32-max-n", "4096", "--algos", "2")
        s = json.loads(out).get("summary", [])
        ceilings = [(r["figure"], f"{r['measured']:.1f}" if r.get("measured") is not None else "n/a", r["unit"])
                    for r in s]
        print(table(["measured ceiling", "value", "unit"], ceilings))
        best = {r[0]: r for r in ceilings}
        if "D2D copy" in best and "GEMM f16" in best:
            summary += f"; copy {best['D2D copy'][1]} GB/s, f16 GEMM {best['GEMM f16'][1]} TFLOP/s"
        job.record["ceilings"] = s
    job.done("hardware", summary, t)
    return usable, gpus


def model(job):
    t = job.step(f"Generate a model: {MODEL} (ResNet-18-style, 64x64 images, 10 classes) with tools/models/make_models.py")
    os.makedirs(job.a.models, exist_ok=True)
    r = subprocess.run([sys.executable, os.path.join(HERE, "models", "make_models.py"), MODEL, "--out", job.a.models],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise StepFailed(f"make_models.py failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
    path = os.path.join(job.a.models, MODEL + ".onnx")
    insp = json.loads(job.gpuopt("inspect", path, "--json"))
    res = f"{path}: {insp['nodes']} nodes, {insp['parameters'] / 1e6:.2f} M parameters, " \
          f"{insp['flops_total'] / 1e9:.2f} GFLOP per image"
    job.done("model", res, t, model=path)
    return path


def compile_and_run(job, path, gpu):
    # The fast CPU backend, and beside it the GPU (tensor cores) or, without one, the CPU reference
    # kernels the fast backend is tested against (what `cpu` gains over them).
    targets = [("cpu", "fp32"), ("cuda", "fp16") if gpu else ("cpu-ref", "fp32")]
    where = " and ".join(f"{d} {p}" for d, p in targets)
    t = job.step(f"Compile and run it on {where} (gpuopt run, batch {job.a.batch}, random inputs)")
    rows, res, median = [], [], {}
    for dev, prec in targets:
        iters = {"cpu": "20", "cpu-ref": "5"}.get(dev, "200")
        j = json.loads(job.gpuopt("run", path, "--random-inputs", "--batch", str(job.a.batch), "--iterations", iters,
                                  "--device", dev, "--precision", prec, "--json"))
        lat = j["latency_ms"]
        median[dev] = lat["median"]
        mode = j.get("execution", "") + (f" ({j['execution_note']})" if j.get("execution_note") else "")
        rows.append((dev, j.get("precision", prec), f"{j['load_s']:.2f} s", f"{lat['median']:.2f} ms",
                     f"{lat['p99']:.2f} ms", f"{j['throughput_per_s']:.0f}/s", mode or "-"))
        res.append(f"{dev} {prec} {lat['median']:.2f} ms ({j['throughput_per_s']:.0f} img/s)")
        job.record.setdefault("runs", []).append(j)
    print(table(["device", "precision", "compile", "median", "p99", "images/s", "execution"], rows))
    if "cpu-ref" in median and median["cpu"] > 0:
        res.append(f"fast CPU backend {median['cpu-ref'] / median['cpu']:.1f}x the reference kernels")
    job.done("compile + run", f"batch {job.a.batch}: " + "; ".join(res), t)
    return ("cuda", "fp16") if gpu else ("cpu", "fp32")


def serve_and_perf(job, path, best):
    dev, prec = best
    t = job.step(f"Serve it (gpuopt serve: KServe v2 HTTP, {'GPU' if dev == 'cuda' else 'CPU'} instances, "
                 "dynamic batching)")
    argv = [job.a.gpuopt, "serve", path, "--http-address", "127.0.0.1", "--http-port", "0", "--grpc-port", "0",
            "--metrics-port", "0",
            "--default-max-batch-size", "8", "--precision", prec, "--exit-timeout-secs", "10"]
    print("    $ " + " ".join(argv), flush=True)
    log = open(os.path.join(job.a.out, "serve.log"), "w+")
    srv = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True)
    ports, lines = {}, []
    try:
        deadline = time.monotonic() + 120
        while len(ports) < 2 and time.monotonic() < deadline:
            line = srv.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip())
            print("    | " + line.rstrip(), flush=True)
            m = re.match(r"Started (HTTPService|Metrics Service) at .*:(\d+)$", line.strip())
            if m:
                ports[m.group(1)] = int(m.group(2))
        if len(ports) < 2:
            log.seek(0)
            raise StepFailed(f"gpuopt serve did not start: {(log.read().strip() or ' '.join(lines))[-400:]}")
        http, metrics = ports["HTTPService"], ports["Metrics Service"]
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/health/ready", timeout=10) as r:
            ready = r.status == 200
        ready_s = time.monotonic() - t
        if not ready:
            raise StepFailed("GET /v2/health/ready did not answer 200")
        inst = next((m.group(1) for m in (re.search(r"READY \(.*?(\d+) instance", x) for x in lines) if m), "?")
        job.done("serve", f"ready after {ready_s:.1f} s on 127.0.0.1:{http} (metrics :{metrics}), {inst} {dev} "
                 f"instance(s), {prec}", t, http_port=http, metrics_port=metrics)
        t = job.step("Load-test it (gpuopt perf: closed loop at 2 concurrencies) and read the batch sizes from /metrics")
        levels = "1:8:7" if dev == "cpu" else "1:16:15"
        out = job.gpuopt("perf", "-m", MODEL, "-u", f"127.0.0.1:{http}", "--concurrency-range", levels,
                         "-p", str(job.a.window_ms), "-r", "4", "--json", timeout=300)
        perf = json.loads(out)["results"]
        rows = [(f"{r['concurrency']:g}", f"{r['throughput_infer_per_s']:.1f}", ms(r["p50_us"]), ms(r["p99_us"]),
                 ms(r["server_queue_us"]), r["errors"], "yes" if r["stable"] else "no") for r in perf]
        print(table(["concurrency", "infer/s", "p50", "p99", "server queue", "errors", "stable"], rows))
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=10) as r:
            text = r.read().decode()
        hist = batch_histogram(text)
        total = sum(c for _, c in hist)
        if total:
            rows = [(label, c, "#" * max(1, round(40 * c / total)) if c else "") for label, c in hist]
            print("    batch sizes the server ran (gpuopt_inference_batch_size from /metrics):")
            print(table(["batch size", "executions", ""], rows))
        req = metric(text, "nv_inference_request_success")
        execs = metric(text, "nv_inference_exec_count")
        mean = req / execs if execs else 0
        perf_res = "; ".join(f"c={r['concurrency']:g}: {r['throughput_infer_per_s']:.0f} infer/s, p50 {ms(r['p50_us'])}, "
                             f"p99 {ms(r['p99_us'])}" for r in perf)
        job.record["perf"] = perf
        job.record["batching"] = {"requests": req, "executions": execs, "histogram": hist}
        job.done("perf", perf_res, t)
        job.rows.append(("batching", f"{int(req)} requests in {int(execs)} executions: mean batch {mean:.1f}", 0.0))
        if any(r["errors"] for r in perf):
            raise StepFailed(f"gpuopt perf saw errors: {[r['errors'] for r in perf]}")
        stop(job, srv, log)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()


def batch_histogram(text):
    """Per-bucket execution counts from the cumulative gpuopt_inference_batch_size buckets."""
    cum = []
    for m in re.finditer(r'^gpuopt_inference_batch_size_bucket\{[^}]*le="([^"]+)"\}\s+(\S+)$', text, re.M):
        cum.append((float("inf") if m.group(1) == "+Inf" else float(m.group(1)), float(m.group(2))))
    out, prev_le, prev_c = [], 0, 0.0
    for le, c in cum:
        if le == float("inf"):
            label = f">{int(prev_le)}"
        elif le == prev_le + 1 or le == 1:
            label = f"{int(le)}"
        else:
            label = f"{int(prev_le) + 1}-{int(le)}"
        out.append((label, int(c - prev_c)))
        prev_le, prev_c = le, c
    while out and out[-1][1] == 0:  # drop the empty large buckets
        out.pop()
    return out


def metric(text, name):
    return sum(float(m.group(1)) for m in re.finditer(rf"^{name}\{{[^}}]*\}}\s+(\S+)$", text, re.M))


def stop(job, srv, log):
    t = job.step("Stop the server cleanly (SIGTERM: drain, then exit)")
    srv.send_signal(signal.SIGTERM)
    try:
        rest, _ = srv.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        raise StepFailed("gpuopt serve did not exit within 60 s of SIGTERM")
    for line in rest.strip().splitlines():
        print("    | " + line, flush=True)
    if srv.returncode != 0:
        raise StepFailed(f"gpuopt serve exited {srv.returncode} after SIGTERM")
    m = re.search(r"stopped cleanly in ([0-9.]+) s", rest)
    job.done("shutdown", f"SIGTERM: drained and stopped cleanly{f' in {m.group(1)} s' if m else ''}, exit 0", t)


def next_steps(job, path, best):
    g = os.path.relpath(job.a.gpuopt)
    dev, prec = best
    serve = f"{g} serve {path} --http-port 8000" + (f" --precision {prec}" if prec != "fp32" else "")
    return [
        ("keep it running", serve),
        ("query it", "README.md 'Serve a model and query it' (curl, scripts/client.sh with tritonclient)"),
        ("your own model", f"{g} inspect MODEL.onnx; {g} run MODEL.onnx --random-inputs --device {dev} --precision {prec}"),
        ("measure the GPU", f"{g} bench all --report out/ (docs/bench.md)"),
        ("watch the GPU", f"{g} monitor; {g} exporter (docs/monitoring.md)"),
        ("all the tests", "./scripts/test.sh"),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpuopt", default="build/gpuopt", help="the gpuopt binary (default build/gpuopt)")
    ap.add_argument("--out", default="build/mainjob", help="where the logs go (default build/mainjob)")
    ap.add_argument("--models", default="build/models", help="where the model goes (default build/models)")
    ap.add_argument("--batch", type=int, default=8, help="batch of the `gpuopt run` step (default 8)")
    ap.add_argument("--window-ms", type=int, default=1000, help="gpuopt perf measurement window (default 1000)")
    ap.add_argument("--no-bench", action="store_true", help="skip the GPU ceilings")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = ap.parse_args()
    if not os.access(args.gpuopt, os.X_OK):
        sys.exit(f"mainjob: error: {args.gpuopt} is not an executable gpuopt binary (build it: ./scripts/build.sh)")
    job = Job(args)
    failed = None
    best = ("cpu", "fp32")
    path = os.path.join(args.models, MODEL + ".onnx")
    os.makedirs(args.out, exist_ok=True)
    try:
        gpu, _ = hardware(job)
        path = model(job)
        best = compile_and_run(job, path, gpu)
        serve_and_perf(job, path, best)
    except (StepFailed, OSError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError) as e:
        failed = f"step {job.n} failed: {e}"
    total = time.monotonic() - job.t0
    print("\n" + table(["step", "result", "time"],
                       [(s, r, f"{d:.1f} s" if d else "") for s, r, d in job.rows] + [("total", "", f"{total:.1f} s")],
                       indent=""))
    print("\nWhere to go next:")
    print(table(["", ""], next_steps(job, path, best), indent="  ").split("\n", 2)[2])
    job.record.update({"ok": failed is None, "error": failed, "seconds": round(total, 1)})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(job.record, f, indent=2)
    if failed:
        print(f"\nmain job: FAILED: {failed}", file=sys.stderr)
        return 1
    print(f"\nmain job: OK, {job.total} steps in {total:.0f} s: hardware, model, compile + run, serve, perf, shutdown")
    return 0


if __name__ == "__main__":
    sys.exit(main())
