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


def _busy_threads(threads, path, args):
    """Runs `gpuopt run path args` on the fast backend with GPUOPT_NUM_THREADS=`threads`; returns
    the number of the process's threads that used at least 10% of its CPU time (from
    /proc/PID/task/*/stat), and the most threads /proc/PID/status showed once its threads had run
    for 0.3 s together."""
    env = {**os.environ, "GPUOPT_NUM_THREADS": str(threads)}
    p = subprocess.Popen([gpuopt_bin(), "run", str(path), "--device", "cpu", "--warmup", "0"] + args, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
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
            if sum(ticks.values()) > 0.3 * tick_hz:  # past load and compile: computing
                most = max(most, n)
        except (FileNotFoundError, ProcessLookupError, StopIteration, IndexError):
            pass
        time.sleep(0.01)
    assert p.returncode == 0, p.stderr.read()
    total = sum(ticks.values())
    assert total > 0.5 * tick_hz, "the run was too short to see its threads"
    return sum(1 for t in ticks.values() if t >= 0.1 * total), most


def _resnet_small(tmp_path):
    import onnx
    model, _ = ARCHS["resnet_small"]()
    path = tmp_path / "resnet_small.onnx"
    onnx.save(model, str(path))
    return path, ["--random-inputs", "--batch", "64", "--iterations", "30"]


def _matmul(tmp_path):
    """MatMul 1024^3 with both operands inputs: OpenBLAS sgemm parts on the pool."""
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "mm",
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1024, 1024]) for x in ("a", "b")],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1024, 1024])])
    path = tmp_path / "matmul.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path, ["--random-inputs", "--iterations", "30"]


def _conv_batch1(tmp_path):
    """One 3x3 convolution at batch 1 with 48 output channels: oneDNN's slabs of output rows
    (its earlier split, by blocks of 16 output channels per thread, ran this on one thread at 4)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((48, 64, 3, 3)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "conv",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 112, 112])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 48, 112, 112])], [w])
    path = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path, ["--random-inputs", "--iterations", "100"]


def test_num_threads_one_really_runs_one_thread(tmp_path):
    path, args = _resnet_small(tmp_path)
    busy, most = _busy_threads(1, path, args)
    assert busy == 1 and most == 1, f"GPUOPT_NUM_THREADS=1: {busy} busy threads, up to {most} threads while computing"
    if os.cpu_count() >= 2:  # the same check sees a second thread when there is one
        busy, _ = _busy_threads(2, path, args)
        assert busy == 2, f"GPUOPT_NUM_THREADS=2: {busy} busy threads"


@pytest.mark.parametrize("make", [_matmul, _conv_batch1], ids=["matmul_sgemm", "conv_onednn_batch1"])
def test_num_threads_n_runs_n_threads(make, tmp_path):
    """GPUOPT_NUM_THREADS=N computes on N threads, each with a share of the CPU time, in the
    OpenBLAS and the oneDNN kernels alike (4 threads on fewer cores still share the work)."""
    path, args = make(tmp_path)
    busy, most = _busy_threads(1, path, args)
    assert busy == 1 and most == 1, f"GPUOPT_NUM_THREADS=1: {busy} busy threads, up to {most} threads while computing"
    for n in (2, 4):
        busy, most = _busy_threads(n, path, args)
        assert busy == n and most == n, f"GPUOPT_NUM_THREADS={n}: {busy} busy threads, {most} threads in all"
