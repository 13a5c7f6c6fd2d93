"""The engine flags mean the same in every subcommand (cli/engine_option.h): `--kernel NAME=VALUE`
sets a KernelSettings value over the environment's, and inspect --optimized, run --profile and
profile then see the same graph. Here GPUOPT_DISABLE_FUSION: the MatMul + bias + Relu of the model
fuse into one FusedGemm by default and stay three nodes with every fusion off; the outputs equal
NumPy's either way."""
import json
import os
import subprocess

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper, save

from gpuopt_cli import gpuopt_bin

RNG = np.random.default_rng(3)
W = RNG.standard_normal((8, 5)).astype(np.float32)
B = RNG.standard_normal(5).astype(np.float32)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("flags") / "linear_relu.onnx"
    g = helper.make_graph([
        helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
        helper.make_node("Add", ["h", "b"], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["y"], name="relu")], "linear_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])],
        [numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b")])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def gpuopt(*args, env=None):
    full = dict(os.environ)
    full.pop("GPUOPT_DISABLE_FUSION", None)
    full.update(env or {})
    r = subprocess.run([gpuopt_bin(), *map(str, args)], capture_output=True, text=True, timeout=120, env=full)
    assert r.returncode == 0, (args, r.stderr)
    return r


def ops_seen(model, tmp_path, kernel_args, env=None):
    """The op types of the graph each subcommand compiled, and run's output."""
    inspected = json.loads(gpuopt("inspect", model, "--optimized", "--json", *kernel_args, env=env).stdout)
    by_inspect = sorted(o["op"] for o in inspected["ops"] for _ in range(o["count"]))
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    ran = json.loads(gpuopt("run", model, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "o",
                            "--iterations", "1", "--profile", "--json", *kernel_args, env=env).stdout)
    by_run = sorted(n["op"] for n in ran["profile"]["nodes"])
    profiled = json.loads(gpuopt("profile", model, "--warmup", "1", "--no-trace", "--json", *kernel_args, env=env).stdout)
    by_profile = sorted(n["op"] for n in profiled["nodes"])
    y = np.load(tmp_path / "o" / "y.npy")
    np.testing.assert_allclose(y, np.maximum(x.astype(np.float64) @ W + B, 0), rtol=1e-5, atol=1e-5)
    return by_inspect, by_run, by_profile


def test_kernel_flag_means_the_same_everywhere(model, tmp_path):
    fused = ops_seen(model, tmp_path, [])
    assert fused == (["FusedGemm"],) * 3, fused
    apart = ops_seen(model, tmp_path, ["--kernel", "GPUOPT_DISABLE_FUSION=all"])
    assert apart == (["Add", "MatMul", "Relu"],) * 3, apart


def test_the_environment_only_supplies_the_default(model, tmp_path):
    env = {"GPUOPT_DISABLE_FUSION": "all"}
    assert ops_seen(model, tmp_path, [], env=env) == (["Add", "MatMul", "Relu"],) * 3
    # The flag over the variable: only gelu off, so the MatMul + bias + Relu fuse again.
    assert ops_seen(model, tmp_path, ["--kernel", "GPUOPT_DISABLE_FUSION=gelu"], env=env) == (["FusedGemm"],) * 3
