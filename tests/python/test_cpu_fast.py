"""The fast CPU backend (`--device cpu`) against the CPU reference (`--device cpu-ref`) and ONNX
Runtime on generated real-architecture models (tools/models/archs.py: ResNet-style with FusedConv
and MaxPool, MobileNetV2-style with depthwise convolutions, BERT-style with fused attention and
SkipLayerNormalization, ViT), and GPUOPT_NUM_THREADS checked from /proc while a run computes.

Outputs must agree to a max abs error of 1e-4 (f32, as test_crosscheck.py): the fast kernels sum
in f32 where the reference sums in double, a difference of a few 1e-6 on these models.
"""
import os
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort
import pytest

from gpuopt_cli import ROOT, gpuopt_bin
sys.path.insert(0, os.path.join(ROOT, "tools", "models"))
from archs import ARCHS  # noqa: E402

MAX_ABS_ERR = 1e-4


def run_on(device, path, feeds, out_dir, env=None):
    out_dir.mkdir()
    args = [gpuopt_bin(), "run", str(path), "--iterations", "1", "--warmup", "0", "--device", device,
            "--output-dir", str(out_dir)]
    for k, v in feeds.items():
        np.save(out_dir.parent / f"{k}.npy", v)
        args += ["--input", f"{k}={out_dir.parent / f'{k}.npy'}"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, f"gpuopt run --device {device} failed:\n{r.stdout}\n{r.stderr}"


@pytest.mark.parametrize("name", ["resnet_small", "mobilenetv2", "bert", "vit_tiny", "gpt_block"])
def test_fast_cpu_matches_reference_and_onnxruntime(name, tmp_path):
    import onnx
    model, make_feeds = ARCHS[name]()
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    feeds = make_feeds(np.random.default_rng(3), 3)
    run_on("cpu", path, feeds, tmp_path / "fast")
    run_on("cpu-ref", path, feeds, tmp_path / "ref")
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for o, want in zip(sess.get_outputs(), sess.run(None, feeds)):
        fast = np.load(tmp_path / "fast" / f"{o.name}.npy")
        ref = np.load(tmp_path / "ref" / f"{o.name}.npy")
        assert fast.shape == want.shape and fast.dtype == want.dtype, (o.name, fast.shape, fast.dtype)
        assert np.isfinite(fast).all(), f"{o.name}: non-finite values"
        for other, label in ((want, "onnxruntime"), (ref, "cpu-ref")):
            err = float(np.max(np.abs(fast.astype(np.float64) - other.astype(np.float64))))
            assert err <= MAX_ABS_ERR, f"{o.name}: cpu vs {label} max abs err {err:.3g}"


def _busy_threads(threads, tmp_path):
    """Runs resnet_small on the fast backend with GPUOPT_NUM_THREADS=`threads`; returns the number
    of the process's threads that used at least 10% of its CPU time (from /proc/PID/task/*/stat),
    and the most threads /proc/PID/status showed once the first thread had run for 0.3 s."""
    import onnx
    model, _ = ARCHS["resnet_small"]()
    path = tmp_path / f"m{threads}.onnx"
    onnx.save(model, str(path))
    env = {**os.environ, "GPUOPT_NUM_THREADS": str(threads)}
    p = subprocess.Popen([gpuopt_bin(), "run", str(path), "--random-inputs", "--batch", "64", "--device", "cpu",
                          "--iterations", "30", "--warmup", "0"], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    ticks, most = {}, 0
    tick_hz = os.sysconf("SC_CLK_TCK")
    while p.poll() is None:
        try:
            for tid in os.listdir(f"/proc/{p.pid}/task"):
                with open(f"/proc/{p.pid}/task/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                ticks[tid] = max(ticks.get(tid, 0), int(fields[11]) + int(fields[12]))  # utime + stime
            with open(f"/proc/{p.pid}/status") as f:
                n = int(next(line.split()[1] for line in f if line.startswith("Threads:")))
            if max(ticks.values(), default=0) > 0.3 * tick_hz:  # past load and compile: computing
                most = max(most, n)
        except (FileNotFoundError, ProcessLookupError, StopIteration, IndexError):
            pass
        time.sleep(0.01)
    assert p.returncode == 0, p.stderr.read()
    total = sum(ticks.values())
    assert total > 0.5 * tick_hz, "the run was too short to see its threads"
    return sum(1 for t in ticks.values() if t >= 0.1 * total), most


def test_num_threads_one_really_runs_one_thread(tmp_path):
    busy, most = _busy_threads(1, tmp_path)
    assert busy == 1 and most == 1, f"GPUOPT_NUM_THREADS=1: {busy} busy threads, up to {most} threads while computing"
    if os.cpu_count() >= 2:  # the same check sees a second thread when there is one
        busy, _ = _busy_threads(2, tmp_path)
        assert busy == 2, f"GPUOPT_NUM_THREADS=2: {busy} busy threads"
