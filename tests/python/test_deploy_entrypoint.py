"""The container image's entrypoint (deploy/entrypoint.sh) run outside a container, as the image
runs it, against a real model repository: it starts `gpuopt serve` with the image's settings
(environment), answers a tritonclient inference that ONNX Runtime checks, drains on SIGTERM in
the configured time, passes flags and subcommands through, and refuses a bad setup in one line.
The Dockerfile's HEALTHCHECK command runs against it too. (No registry here: the image itself is
not built; tests/python/test_deploy_manifests.py checks what the Dockerfile names.)"""
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from deploy_fixtures import DEPLOY, ROOT
from gpuopt_cli import gpuopt_bin

sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
import server_harness as H  # noqa: E402

ENTRY = os.path.join(DEPLOY, "entrypoint.sh")


def entry_env(repo, **extra):
    env = dict(os.environ)
    env.update({"GPUOPT_BIN": gpuopt_bin(), "GPUOPT_MODEL_REPOSITORY": str(repo), "GPUOPT_HTTP_ADDRESS": "127.0.0.1",
                "GPUOPT_HTTP_PORT": "0", "GPUOPT_METRICS_PORT": "0", "GPUOPT_GRPC_PORT": "0",
                "GPUOPT_EXIT_TIMEOUT_SECS": "7"})
    env.update(extra)
    return env


class Entry(H.Server):
    """deploy/entrypoint.sh as a process; the ports gpuopt picked, read from its output."""

    def __init__(self, env, *args, timeout=120):
        super().__init__(args, timeout=timeout, command=["sh", ENTRY, *args], env=env)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    H.make_repository(str(root))
    return root


def healthcheck_command():
    with open(os.path.join(DEPLOY, "Dockerfile")) as f:
        text = re.sub(r"\\\n", " ", f.read())
    m = re.search(r"^HEALTHCHECK .*?CMD (.*)$", text, re.M)
    assert m, "no HEALTHCHECK ... CMD in the Dockerfile"
    return m.group(1).strip()


def test_serves_the_repository_and_drains_on_sigterm(repo):
    httpclient = pytest.importorskip("tritonclient.http")
    ort = pytest.importorskip("onnxruntime")
    e = Entry(entry_env(repo))
    try:
        # gpuopt replaced the shell (exec): signals from the container runtime reach it directly.
        with open(f"/proc/{e.proc.pid}/comm") as f:
            assert f.read().strip() == "gpuopt"
        c = httpclient.InferenceServerClient(f"127.0.0.1:{e.http_port}")
        assert c.is_server_ready()
        assert sorted(m["name"] for m in c.get_model_repository_index()) == ["mlp", "simple"]
        x = np.random.default_rng(3).standard_normal((4, 32)).astype(np.float32)
        inp = httpclient.InferInput("X", x.shape, "FP32")
        inp.set_data_from_numpy(x, binary_data=True)
        got = c.infer("mlp", [inp]).as_numpy("Y")
        sess = ort.InferenceSession(str(repo / "mlp" / "1" / "model.onnx"), providers=["CPUExecutionProvider"])
        want = sess.run(None, {"X": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

        # The image's HEALTHCHECK, with the port the image would have.
        hc = healthcheck_command()
        env = dict(os.environ, GPUOPT_HTTP_PORT=str(e.http_port))
        assert subprocess.run(["sh", "-c", hc], env=env, capture_output=True, timeout=30).returncode == 0

        n = len(e.log)
        t0 = time.time()
        e.proc.send_signal(signal.SIGTERM)
        rc = e.proc.wait(timeout=60)
        e._reader.join(5)
        out = "".join(e.log[n:])
        assert rc == 0, out
        assert time.time() - t0 < 7 + 5
        assert "exit timeout 7 s" in out, out  # GPUOPT_EXIT_TIMEOUT_SECS reached gpuopt
        # A stopped server fails the HEALTHCHECK.
        assert subprocess.run(["sh", "-c", hc], env=env, capture_output=True, timeout=30).returncode != 0
    finally:
        e.kill()


def test_environment_ports_and_extra_flags_reach_serve(repo):
    httpclient = pytest.importorskip("tritonclient.http")
    from monitor_fixtures import free_port
    http, metrics = free_port(), free_port()
    e = Entry(entry_env(repo, GPUOPT_HTTP_PORT=str(http), GPUOPT_METRICS_PORT=str(metrics)),
              "--default-max-batch-size", "2")
    try:
        # The ports the manifests' probes and Services use are the ones gpuopt listens on.
        assert (e.http_port, e.metrics_port) == (http, metrics), "".join(e.log)
        c = httpclient.InferenceServerClient(f"127.0.0.1:{e.http_port}")
        assert c.get_model_config("mlp")["max_batch_size"] == 2  # derived config: the flag's value
    finally:
        e.proc.send_signal(signal.SIGTERM)
        assert e.proc.wait(timeout=60) == 0
        e.kill()


def run_entry(env, *args):
    return subprocess.run(["sh", ENTRY, *args], env=env, capture_output=True, text=True, timeout=60)


def test_subcommands_and_other_programs_pass_through(repo):
    r = run_entry(entry_env(repo), "exporter", "--help")
    assert r.returncode == 0, r.stderr
    assert "--pod-resources-socket" in r.stdout
    r = run_entry(entry_env(repo), "echo", "inside the image")
    assert r.returncode == 0 and r.stdout == "inside the image\n", (r.stdout, r.stderr)
    r = run_entry(entry_env(repo), "version")
    assert r.returncode == 0 and "gpuopt" in r.stdout, r.stderr
    r = run_entry(entry_env(repo), "no-such-program-here")
    assert r.returncode == 127, (r.returncode, r.stderr)  # the shell's "not found"


@pytest.mark.parametrize("case,env_extra,needle", [
    ("missing", {"GPUOPT_MODEL_REPOSITORY": "/nonexistent/models"}, "'/nonexistent/models'"),
    ("empty", None, "is empty"),
    ("port", {"GPUOPT_HTTP_PORT": "80a"}, "GPUOPT_HTTP_PORT='80a'"),
    ("binary", {"GPUOPT_BIN": "/nonexistent/gpuopt"}, "'/nonexistent/gpuopt'"),
])
def test_bad_setup_is_one_clear_line(repo, tmp_path, case, env_extra, needle):
    env = entry_env(repo) if case != "empty" else entry_env(tmp_path)
    env.update(env_extra or {})
    r = run_entry(env)
    assert r.returncode == (1 if case == "binary" else 2), (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuopt-entrypoint: ") and needle in lines[0], r.stderr
