#!/usr/bin/env python3
"""Where a lone large request's time goes between the socket and the engine, on the CPU.

A model whose compute is negligible (a Slice keeping one element per row) but whose input is
[8,3,224,224] f32 (a ResNet-50 batch-8 body: 4.8 MB) is served on a CPU instance with
--trace-file; `gpuopt perf` sends lone batch-8 binary requests (concurrency 1) over HTTP and then
gRPC, and the server's trace gives each stage's median (network in, decode, queue, compute
input/infer/output, encode, network out). Prints a table (or --json) with the client's p50 and
its cost per MB of body.

    .venv/bin/python3 tools/serve_lone_request.py [--gpuopt build/gpuopt] [--json]

--batched: instead, batch-1 [1,3,224,224] requests (602 KB each) through the dynamic batcher
(max_batch_size 32, 500 us queue delay, 2 CPU instances) at concurrency 64: the server's
`compute input` per request is the time forming each batch (the requests' rows copied into one
19 MB tensor, as for a GPU model's pinned batch) took.
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

SHAPE = [8, 3, 224, 224]
STAGES = ["network in", "decode", "queue", "compute input", "compute infer", "compute output", "encode",
          "network out"]


def slice_model(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch"] + SHAPE[1:])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 1, 1, 1])
    consts = [numpy_helper.from_array(np.array(v, np.int64), n)
              for n, v in (("starts", [0, 0, 0]), ("ends", [1, 1, 1]), ("axes", [1, 2, 3]))]
    g = helper.make_graph([helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"])], "lone", [x], [y], consts)
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def wait_ready(port, proc, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {proc.returncode}")
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=1).status == 200:
                return
        except Exception:
            time.sleep(0.1)
    raise SystemExit("server not ready")


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_s(pid):
    """User + system CPU seconds of process `pid` so far (/proc/PID/stat)."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def stage_medians(trace_path, first_request):
    text = open(trace_path).read().rstrip().rstrip(",")
    events = json.loads(text if text.endswith("]") else text + "]")  # open while the server runs
    by = {}
    for e in events:
        if e.get("ph") == "X" and e["args"]["request"] >= first_request:
            by.setdefault(e["cat"], []).append(e["dur"])
    ids = [e["args"]["request"] for e in events if e.get("ph") == "X"]
    return {s: statistics.median(by[s]) for s in STAGES if s in by}, (max(ids) if ids else 0)


def batched(a):
    w = tempfile.mkdtemp(prefix="gpuopt-batched-")
    os.makedirs(f"{w}/repo/b1/1")
    slice_model(f"{w}/repo/b1/1/model.onnx")
    open(f"{w}/repo/b1/config.pbtxt", "w").write(
        "max_batch_size: 32\ndynamic_batching { max_queue_delay_microseconds: 500 }\n"
        "instance_group { count: 2 kind: KIND_CPU }\n")
    port = free_port()
    srv = subprocess.Popen([a.gpuopt, "serve", "--model-repository", f"{w}/repo", "--http-address", "127.0.0.1",
                            "--http-port", str(port), "--grpc-port", "0"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, srv)
        out = subprocess.run([a.gpuopt, "perf", "-m", "b1", "-b", "1", "-u", f"127.0.0.1:{port}", "--concurrency-range",
                              "64", "-p", str(a.window_ms), "-r", "5", "-s", "20", "--json"],
                             capture_output=True, text=True, timeout=180)
        if out.returncode != 0:
            raise SystemExit(f"perf: {out.stderr.strip()[-300:]}")
        r = json.loads(out.stdout)["results"][0]
    finally:
        srv.terminate()
        srv.wait(timeout=30)
        shutil.rmtree(w, ignore_errors=True)
    keys = ("throughput_infer_per_s", "p50_us", "p99_us", "server_queue_us", "server_compute_input_us",
            "server_compute_infer_us", "server_compute_output_us")
    res = {k: r[k] for k in keys}
    if a.json:
        print(json.dumps(res, indent=1))
        return
    print("batch-1 [1,3,224,224] f32 requests through the batcher (max batch 32, 2 CPU instances, Slice model), c64")
    for k in keys:
        print(f"{k:34}{res[k]:12.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpuopt", default="build/gpuopt")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--window-ms", type=int, default=1500)
    ap.add_argument("--batched", action="store_true", help="batch-1 requests through the batcher at concurrency 64")
    a = ap.parse_args()
    if a.batched:
        return batched(a)
    w = tempfile.mkdtemp(prefix="gpuopt-lone-")
    os.makedirs(f"{w}/repo/lone/1")
    slice_model(f"{w}/repo/lone/1/model.onnx")
    open(f"{w}/repo/lone/config.pbtxt", "w").write(
        "max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 0 }\ninstance_group { count: 1 kind: KIND_CPU }\n")
    port, gport = free_port(), free_port()
    trace = f"{w}/trace.json"
    srv = subprocess.Popen([a.gpuopt, "serve", "--model-repository", f"{w}/repo", "--http-address", "127.0.0.1",
                            "--http-port", str(port), "--grpc-port", str(gport), "--trace-file", trace,
                            "--trace-rate", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    body_mb = np.prod(SHAPE) * 4 / 1e6
    results = {"body_mb": body_mb}
    try:
        wait_ready(port, srv)
        seen = 0
        for proto, url in (("http", f"127.0.0.1:{port}"), ("grpc", f"127.0.0.1:{gport}")):
            args = [a.gpuopt, "perf", "-m", "lone", "-b", "8", "-u", url, "--concurrency-range", "1", "-p",
                    str(a.window_ms), "-r", "4", "-s", "50", "--json"] + (["-i", "grpc"] if proto == "grpc" else [])
            c0, s0 = resource.getrusage(resource.RUSAGE_CHILDREN), cpu_s(srv.pid)
            out = subprocess.run(args, capture_output=True, text=True, timeout=120)
            c1, s1 = resource.getrusage(resource.RUSAGE_CHILDREN), cpu_s(srv.pid)
            if out.returncode != 0:
                raise SystemExit(f"perf {proto}: {out.stderr.strip()[-300:]}")
            r = json.loads(out.stdout)["results"][0]
            sent = max(1, int(r.get("sent", 1)))
            client_cpu = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
            time.sleep(0.3)  # the trace is flushed per request
            med, last = stage_medians(trace, seen + 1)
            seen = last
            results[proto] = {"p50_us": r["p50_us"], "throughput_per_s": r["throughput_infer_per_s"] / 8,
                              "us_per_mb": r["p50_us"] / body_mb, "stages_us": med,
                              # CPU time per MB of body: what the copies cost, much less disturbed
                              # by other load on the machine than the latency (perf's whole run,
                              # its metadata calls included, over the requests it sent)
                              "server_cpu_us_per_mb": (s1 - s0) / sent * 1e6 / body_mb,
                              "client_cpu_us_per_mb": client_cpu / sent * 1e6 / body_mb, "sent": sent}
    finally:
        srv.terminate()
        srv.wait(timeout=30)
        shutil.rmtree(w, ignore_errors=True)
    if a.json:
        print(json.dumps(results, indent=1))
        return
    print(f"lone [8,3,224,224] f32 request ({body_mb:.2f} MB binary body), CPU instance, Slice model, concurrency 1")
    print(f'{"stage (server trace, median us)":34}' + "".join(f"{p:>10}" for p in ("http", "grpc")))
    for s in STAGES:
        print(f"{s:34}" + "".join(f'{results[p]["stages_us"].get(s, float("nan")):10.0f}' for p in ("http", "grpc")))
    print(f'{"client p50 (gpuopt perf), us":34}' + "".join(f'{results[p]["p50_us"]:10.0f}' for p in ("http", "grpc")))
    print(f'{"client p50 per MB of body, us/MB":34}' + "".join(f'{results[p]["us_per_mb"]:10.0f}' for p in ("http", "grpc")))
    for k, what in (("server_cpu_us_per_mb", "server CPU per MB, us/MB"),
                    ("client_cpu_us_per_mb", "client (perf) CPU per MB, us/MB")):
        print(f"{what:34}" + "".join(f"{results[p][k]:10.0f}" for p in ("http", "grpc")))


if __name__ == "__main__":
    sys.exit(main())
