"""Helpers for the Python server tests: build small ONNX models, start `gpuopt serve` on
127.0.0.1 with ephemeral ports, stop it. Imported by tests/python/test_server_*.py."""
import os
import re
import signal
import subprocess
import threading
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def gpuopt_bin():
    b = os.environ.get("GPUOPT_BIN")
    if not b:
        root = os.environ.get("GPUOPT_TEST_BINARY_DIR", "build")
        b = os.path.join(root, "gpuopt")
    return b


def _save(model, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    model.opset_import[0].version = 17
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def add_sub_model(path, width=16):
    """Triton's 'simple' example: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1."""
    i0 = helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["batch", width])
    i1 = helper.make_tensor_value_info("INPUT1", TensorProto.FLOAT, ["batch", width])
    o0 = helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["batch", width])
    o1 = helper.make_tensor_value_info("OUTPUT1", TensorProto.FLOAT, ["batch", width])
    g = helper.make_graph([helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
                           helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"])],
                          "add_sub", [i0, i1], [o0, o1])
    _save(helper.make_model(g), path)


def mlp_model(path, din=32, dhid=64, dout=8, seed=0):
    """Y = Relu(X @ W1 + B1) @ W2: a tiny dense model; returns the weights for a numpy oracle."""
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((din, dhid)).astype(np.float32) * 0.2
    b1 = rng.standard_normal((dhid,)).astype(np.float32) * 0.1
    w2 = rng.standard_normal((dhid, dout)).astype(np.float32) * 0.2
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", din])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", dout])
    nodes = [helper.make_node("MatMul", ["X", "W1"], ["h0"]), helper.make_node("Add", ["h0", "B1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h2"]), helper.make_node("MatMul", ["h2", "W2"], ["Y"])]
    g = helper.make_graph(nodes, "mlp", [x], [y],
                          [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(b1, "B1"),
                           numpy_helper.from_array(w2, "W2")])
    _save(helper.make_model(g), path)
    return w1, b1, w2


def mlp_reference(x, w):
    w1, b1, w2 = w
    return np.maximum(x @ w1 + b1, 0) @ w2


def make_repository(root, delay_us=5000, max_batch=16, extra_simple_config=""):
    """<root>/simple (config.pbtxt, dynamic batching), <root>/mlp (no config: derived)."""
    add_sub_model(os.path.join(root, "simple", "1", "model.onnx"))
    with open(os.path.join(root, "simple", "config.pbtxt"), "w") as f:
        f.write(f"""name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: {max_batch}
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }},
        {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }},
         {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] }} ]
dynamic_batching {{ max_queue_delay_microseconds: {delay_us} }}
instance_group [ {{ count: 2 kind: KIND_CPU }} ]
{extra_simple_config}
""")
    w = mlp_model(os.path.join(root, "mlp", "1", "model.onnx"))
    return w


def module_server(tmp_path_factory, *args):
    """A pytest module fixture's body: a server on a fresh make_repository (its mlp weights in
    .weights), stopped at the end, which must exit 0 and say it stopped cleanly."""
    root = tmp_path_factory.mktemp("repo")
    weights = make_repository(str(root))
    s = Server(["--model-repository", str(root), *args])
    s.weights = weights
    yield s
    code, _, out = s.stop()
    assert code == 0, out
    assert "Server stopped cleanly" in out


class Server:
    """A `gpuopt serve` process on 127.0.0.1 with ephemeral HTTP and metrics ports; or `command`
    (with `env`), a process that starts one, such as deploy/entrypoint.sh. The ports are read from
    its output."""

    def __init__(self, args, timeout=60, command=None, env=None):
        cmd = command or [gpuopt_bin(), "serve", "--http-address", "127.0.0.1", "--http-port", "0",
                          "--metrics-port", "0", "--grpc-port", "0", "--http-thread-count", "4"] + list(args)
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     bufsize=1)
        self.log = []
        self.http_port = self.metrics_port = self.grpc_port = None
        # A reader thread drains the output (a full pipe would block the server).
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.time() + timeout
        while time.time() < deadline and (self.http_port is None or self.metrics_port is None):
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if self.http_port is None or self.metrics_port is None:
            self.proc.kill()
            self.proc.wait()
            self._reader.join(5)
            raise RuntimeError("gpuopt serve did not start: " + "".join(self.log))

    def _read(self):
        for line in self.proc.stdout:
            self.log.append(line)
            m = re.search(r"Started HTTPService at [\d.]+:(\d+)", line)
            if m:
                self.http_port = int(m.group(1))
            m = re.search(r"Started GRPCInferenceService at [\d.]+:(\d+)", line)
            if m:
                self.grpc_port = int(m.group(1))
            m = re.search(r"Started Metrics Service at [\d.]+:(\d+)", line)
            if m:
                self.metrics_port = int(m.group(1))

    @property
    def url(self):
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self):
        return f"127.0.0.1:{self.grpc_port}"

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Sends `sig`, waits for exit; returns (exit code, seconds, remaining output)."""
        if self.proc.poll() is not None:
            return self.proc.returncode, 0.0, ""
        t0 = time.time()
        n = len(self.log)
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self._reader.join(5)
            return None, time.time() - t0, "".join(self.log[n:])
        secs = time.time() - t0
        self._reader.join(5)
        return self.proc.returncode, secs, "".join(self.log[n:])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
