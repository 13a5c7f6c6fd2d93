"""Shared by the Python tests that drive the gpuopt binary: where it is, and `gpuopt run` on
numpy feeds (saved as .npy beside the output folder), one iteration, outputs written as .npy."""
import os
import subprocess

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def gpuopt_bin():
    b = os.environ.get("GPUOPT_BIN") or os.path.join(ROOT, "build", "gpuopt")
    assert os.path.exists(b), f"gpuopt binary not found at {b} (set GPUOPT_BIN)"
    return b


def run_gpuopt(path, feeds, out_dir, env=None):
    """Runs the model at `path` on `feeds`; each output lands in out_dir/<name>.npy."""
    args = [gpuopt_bin(), "run", str(path), "--iterations", "1", "--warmup", "0", "--output-dir", str(out_dir)]
    for k, v in feeds.items():
        np.save(out_dir.parent / f"{k}.npy", v)
        args += ["--input", f"{k}={out_dir.parent / f'{k}.npy'}"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, f"gpuopt run failed:\n{r.stdout}\n{r.stderr}"


def op_counts(path, env=None):
    """Op -> node count of the graph a run executes (`run --profile --json`, random inputs, batch 2)."""
    import json
    r = subprocess.run([gpuopt_bin(), "run", path, "--random-inputs", "--batch", "2", "--iterations", "1",
                        "--profile", "--json"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, **(env or {})})
    assert r.returncode == 0, r.stderr
    return {o["op"]: o["nodes"] for o in json.loads(r.stdout)["profile"]["ops"]}


def cuda_device():
    """Whether `gpuopt info` finds a GPU (the CUDA cases skip without one)."""
    import json
    r = subprocess.run([gpuopt_bin(), "info", "--json"], capture_output=True, text=True, timeout=60)
    try:
        return bool(json.loads(r.stdout).get("gpus"))
    except ValueError:
        return False
