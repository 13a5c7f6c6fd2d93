"""Every example in README.md runs, so the README cannot drift from the code.

The fenced ```sh and ```python blocks are extracted in order and run in a sandbox folder that
looks like a checkout after ./scripts/run.sh: build/gpuopt (the binary under test),
build/models/resnet_small.onnx, model.onnx and repo/model/1/model.onnx for the placeholders,
calib/ (four random .npy samples of model.onnx's input, for `gpuopt quantize`),
scripts/ and .venv from the source tree. The README's ports (8000, 8001, 8002, 9400) are mapped to
free ones. `gpuopt serve` and `gpuopt exporter` lines start in the background and the block goes
on once they answer; they stop (SIGTERM) when a later block starts servers of its own, or at
the end. curl fails on an HTTP error. Python blocks run through scripts/client.sh.

A block after `<!-- readme-test: skip: REASON -->` is skipped with REASON; a line whose comment
says (GPU) runs in test_readme_gpu_line, skipped without a CUDA device. The main job's loop
(tools/mainjob.py) runs too, as ./scripts/run.sh does after deps and build.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from gpuopt_cli import ROOT, gpuopt_bin  # noqa: E402

README = os.path.join(ROOT, "README.md")
GPU_MARK = re.compile(r"#\s*\(GPU\)")
BG = re.compile(r"^build/gpuopt (serve|exporter)\b")
PORTS = (8000, 8001, 8002, 9400)


def blocks():
    """(line number, language, code, skip reason or None) of each fenced sh/python block."""
    text = open(README).read()
    out = []
    for m in re.finditer(r"^```(sh|python)\n(.*?)^```", text, re.M | re.S):
        line = text.count("\n", 0, m.start()) + 1
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = re.match(r"<!-- readme-test: skip: (.*?) -->", before)
        out.append((line, m.group(1), m.group(2), skip.group(1) if skip else None))
    return out


def gpu_lines():
    return [(n, l) for n, lang, code, skip in blocks() if lang == "sh" and not skip
            for l in code.splitlines() if GPU_MARK.search(l)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def have_cuda():
    r = subprocess.run([gpuopt_bin(), "info", "--json"], capture_output=True, text=True, timeout=60)
    j = json.loads(r.stdout)
    return bool(j["gpus"]) and j["cuda"]["built_with_cuda"] and not j["cuda"].get("error")


class Sandbox:
    def __init__(self, root):
        self.root = root
        self.ports = {p: free_port() for p in PORTS}
        self.bg = []
        os.makedirs(os.path.join(root, "build", "models"))
        os.symlink(gpuopt_bin(), os.path.join(root, "build", "gpuopt"))
        for name in ("scripts", "tools", ".venv", "requirements.txt"):
            if os.path.exists(os.path.join(ROOT, name)):
                os.symlink(os.path.join(ROOT, name), os.path.join(root, name))
        py = os.path.join(ROOT, ".venv", "bin", "python3")
        r = subprocess.run([py if os.path.exists(py) else sys.executable, "tools/models/make_models.py", "resnet_small",
                            "--out", "build/models"], cwd=root, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        model = os.path.join(root, "build", "models", "resnet_small.onnx")
        shutil.copy(model, os.path.join(root, "model.onnx"))
        os.makedirs(os.path.join(root, "repo", "model", "1"))
        shutil.copy(model, os.path.join(root, "repo", "model", "1", "model.onnx"))
        import numpy as np
        import onnx
        dims = [d.dim_value or 1 for d in onnx.load(model).graph.input[0].type.tensor_type.shape.dim]
        os.makedirs(os.path.join(root, "calib"))
        rng = np.random.default_rng(0)
        for k in range(4):
            np.save(os.path.join(root, "calib", f"{k:03d}.npy"), rng.standard_normal(dims).astype(np.float32))

    def remap(self, code):
        for p, q in self.ports.items():
            code = re.sub(rf"(?<![0-9]){p}(?![0-9])", str(q), code)
        return code

    def stop_background(self):
        for p in self.bg:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                assert p.returncode == 0, f"{p.args} exited {p.returncode} on SIGTERM"
        self.bg = []

    def start_background(self, line):
        argv = ["bash", "-c", "exec " + line]
        log = open(os.path.join(self.root, f"bg{len(self.bg)}.log"), "w")
        p = subprocess.Popen(argv, cwd=self.root, stdout=log, stderr=subprocess.STDOUT)
        self.bg.append(p)
        if " serve " in line:
            m = re.search(r"--http-port (\d+)", line)
            url = f"http://127.0.0.1:{m.group(1) if m else 8000}/v2/health/ready"
        else:
            listen = re.search(r"--listen (\S+)", line).group(1)
            url = f"http://{listen}/metrics"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert p.poll() is None, f"`{line}` exited {p.returncode}: {open(log.name).read()[-1000:]}"
            if subprocess.run(["curl", "-sf", "-o", "/dev/null", url]).returncode == 0:
                return
            time.sleep(0.3)
        pytest.fail(f"`{line}` did not answer {url} in 180 s")

    def run_sh(self, code, gpu):
        code = self.remap(code)
        if any(BG.match(l) for l in code.splitlines()):
            self.stop_background()
        script = ["set -euo pipefail", "curl() { command curl -sS --fail-with-body \"$@\"; echo; }"]
        for line in code.splitlines():
            if BG.match(line):
                self.start_background(line.split("  #")[0].strip())
            elif GPU_MARK.search(line) and not gpu:
                script.append(f": skipped, needs a GPU: {line!r}")
            else:
                script.append(line)
        r = subprocess.run(["bash", "-c", "\n".join(script)], cwd=self.root, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, f"exit {r.returncode}\n--- script\n{chr(10).join(script)}\n--- stdout\n" \
                                  f"{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
        return r.stdout

    def run_python(self, code):
        path = os.path.join(self.root, "example.py")
        with open(path, "w") as f:
            f.write(self.remap(code))
        r = subprocess.run(["scripts/client.sh", "example.py"], cwd=self.root, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
        return r.stdout


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    sb = Sandbox(str(tmp_path_factory.mktemp("readme")))
    yield sb
    sb.stop_background()


@pytest.fixture(scope="module")
def gpu():
    return have_cuda()


def test_readme_has_examples():
    langs = [lang for _, lang, _, _ in blocks()]
    assert langs.count("sh") >= 3 and "python" in langs, langs


@pytest.mark.parametrize("block", blocks(), ids=lambda b: f"line{b[0]}-{b[1]}")
def test_readme_block(block, sandbox, gpu):
    line, lang, code, skip = block
    if skip:
        pytest.skip(skip)
    out = sandbox.run_sh(code, gpu) if lang == "sh" else sandbox.run_python(code)
    # Spot checks of what the README says the examples print.
    if "v2/models/resnet_small/infer" in code:
        assert '"name":"logits"' in out.replace(" ", ""), out[-2000:]
    if "as_numpy(\"logits\").shape" in code:
        assert "(4, 10)" in out, out


@pytest.mark.parametrize("line", gpu_lines(), ids=lambda l: f"line{l[0]}-{l[1].split('#')[0].split()[1]}")
def test_readme_gpu_line(line, sandbox, gpu):
    _, text = line
    if not gpu:
        pytest.skip("skipped: no CUDA device")
    if re.match(r"build/gpuopt monitor\s*(#|$)", text):
        pytest.skip("the interactive terminal UI (test_monitor_tui.py drives it in tmux)")
    sandbox.run_sh(text, True)


def test_main_job_loop(tmp_path):
    """What ./scripts/run.sh runs after deps and build: every step, summary table, exit 0."""
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "mainjob.py"), "--gpuopt", gpuopt_bin(),
                        "--out", str(tmp_path / "out"), "--models", str(tmp_path / "models"),
                        "--json", str(tmp_path / "summary.json")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    j = json.load(open(tmp_path / "summary.json"))
    assert j["ok"] and [s["step"] for s in j["steps"]] == ["hardware", "model", "compile + run", "serve", "perf",
                                                          "shutdown"], j
    assert all(p["errors"] == 0 and p["throughput_infer_per_s"] > 0 for p in j["perf"]), j["perf"]
    hist = dict(j["batching"]["histogram"])
    assert sum(hist.values()) == j["batching"]["executions"] > 0, j["batching"]
    assert "main job: OK" in r.stdout and "Where to go next" in r.stdout, r.stdout[-2000:]
