"""Devices by index at the edges: `--device` text is parsed once (a malformed value is a usage
error, exit 2, naming it), a device that does not exist is a runtime error (exit 1) naming it, and
`gpuopt serve` refuses a model whose instance group lists a GPU the host does not have (exit 1,
naming cuda:N). On a machine without a GPU as on one with a single GPU (cuda:4095 never exists).
"""
import os
import subprocess
import sys

from gpuopt_cli import ROOT, gpuopt_bin
sys.path.insert(0, os.path.join(ROOT, "tools", "models"))
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
from archs import ARCHS  # noqa: E402
import server_harness as H  # noqa: E402


def model(tmp_path):
    import onnx
    m, _ = ARCHS["resnet_small"]()
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    return str(p)


def run(*args):
    return subprocess.run([gpuopt_bin(), *args], capture_output=True, text=True, timeout=120)


def test_malformed_device_is_a_usage_error(tmp_path):
    m = model(tmp_path)
    for bad in ["cuda:x", "tpu", "cuda:-1", "cuda:"]:
        r = run("run", m, "--random-inputs", "--iterations", "1", "--device", bad)
        assert r.returncode == 2, (bad, r.returncode, r.stderr)
        assert f"'{bad}'" in r.stderr and "--device" in r.stderr, r.stderr
    r = run("inspect", m, "--device", "tpu")
    assert r.returncode == 2 and "'tpu'" in r.stderr, r.stderr


def test_missing_device_is_a_runtime_error_naming_it(tmp_path):
    m = model(tmp_path)
    r = run("run", m, "--random-inputs", "--iterations", "1", "--device", "cuda:4095")
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "cuda:4095" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = run("run", m, "--random-inputs", "--iterations", "1", "--device", "cpu", "--json")
    assert r.returncode == 0, r.stderr


def test_serve_refuses_an_instance_group_on_a_missing_gpu(tmp_path):
    repo = tmp_path / "repo"
    H.add_sub_model(str(repo / "simple" / "1" / "model.onnx"))
    (repo / "simple" / "config.pbtxt").write_text(
        "max_batch_size: 8\ninstance_group { count: 1 kind: KIND_GPU gpus: [ 4095 ] }\n")
    r = subprocess.run([gpuopt_bin(), "serve", "--model-repository", str(repo), "--http-address", "127.0.0.1",
                        "--http-port", "0", "--metrics-port", "0"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "instance_group 'simple_0': cuda:4095 does not exist: this host has" in r.stderr, r.stderr
