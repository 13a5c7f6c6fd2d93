"""`gpuopt monitor` in a real pseudo-terminal (tmux, 80x24): the layout (header, GPU panels with
bars, process table, diagnosis, help line), sorting keys, and that q quits with status 0."""
import os
import shutil
import subprocess
import time
import uuid

import pytest

from monitor_fixtures import MIB, Env, gpu, gpuopt_bin


@pytest.fixture
def tmux():
    if not shutil.which("tmux"):
        pytest.skip("tmux not installed")
    sock = f"gpuopt-test-{uuid.uuid4().hex[:8]}"  # own server: never touches anyone's sessions

    def run(*args, check=True):
        return subprocess.run(["tmux", "-L", sock, "-f", "/dev/null", *args], check=check,
                              capture_output=True, text=True)
    yield run
    run("kill-server", check=False)


def start(tmux, env, *args, width=80, height=24):
    cmd = " ".join([gpuopt_bin(), "monitor", "--interval", "200ms", *args])
    envs = " ".join(f"{k}={v}" for k, v in env.environ().items() if k.startswith("GPUOPT_"))
    tmux("new-session", "-d", "-s", "m", "-x", str(width), "-y", str(height),
         f"env TERM=xterm {envs} {cmd}; echo EXITED:$?; sleep 60")


def capture(tmux):
    return tmux("capture-pane", "-p", "-t", "m").stdout.split("\n")


def wait_for(tmux, text, deadline_s=30):
    end = time.time() + deadline_s
    lines = []
    while time.time() < end:
        lines = capture(tmux)
        if any(text in l for l in lines):
            return lines
        time.sleep(0.2)
    raise AssertionError(f"'{text}' never appeared; screen:\n" + "\n".join(lines))


def two_gpu_env():
    script = {"driver_version": "580.65.06", "cuda_driver_version": 13000,
              "devices": [gpu(0, 87, 2000, 250.7,
                              {"processes": [{"pid": 4242, "used_memory": 1536 * MIB, "sm_util": 5},
                                             {"pid": 4343, "used_memory": 256 * MIB, "sm_util": 90}]}),
                          gpu(1, 12, 137000, 699.0)]}
    env = Env(script)
    env.add_process(4242, ["/usr/bin/python3", "train.py"])
    env.add_process(4343, ["/opt/bin/infer-server", "--port", "8000"])
    return env


def test_layout_sorting_and_quit(tmux):
    env = two_gpu_env()
    try:
        start(tmux, env)
        wait_for(tmux, "memory pressure")
        lines = wait_for(tmux, "SM 60%")  # GPM needs two samples
        screen = "\n".join(lines)
        assert len(lines) >= 24
        assert all(len(l) <= 80 for l in lines)
        assert lines[0].startswith("gpuopt monitor") and "driver 580.65.06" in lines[0] and "2 GPU(s)" in lines[0]
        assert lines[1].startswith("GPU 0 NVIDIA H200") and "251/700W" in lines[1]
        assert " UTIL [" in lines[2] and "87%" in lines[2] and "MEM [" in lines[2] and "2.0/140.4G" in lines[2]
        assert lines[3].startswith(" hist ") and "SM 60%" in lines[3]
        assert lines[4].startswith("GPU 1 NVIDIA H200") and "PWR-CAP" in lines[4]
        assert "12%" in lines[5] and "133.8/140.4G" in lines[5]
        head = next(i for i, l in enumerate(lines) if "PID" in l and "COMMAND" in l)
        assert "4242" in lines[head + 1] and "python3 train.py" in lines[head + 1]  # most memory first
        assert "4343" in lines[head + 2]
        assert "DIAGNOSIS" in screen and "GPU 1 GPU memory pressure" in screen
        assert lines[23].startswith("q quit") and "sorted by memory" in lines[23]

        tmux("send-keys", "-t", "m", "u")
        lines = wait_for(tmux, "sorted by util")
        head = next(i for i, l in enumerate(lines) if "PID" in l and "COMMAND" in l)
        assert "4343" in lines[head + 1] and "infer-server" in lines[head + 1]  # busiest first

        tmux("send-keys", "-t", "m", "q")
        lines = wait_for(tmux, "EXITED:", deadline_s=10)
        assert any("EXITED:0" in l for l in lines)
    finally:
        env.cleanup()


def test_eight_gpus_fit_80x24(tmux):
    script = {"devices": [gpu(i, 10 * i, 1000 * (i + 1), 100 + i) for i in range(8)]}
    env = Env(script)
    try:
        start(tmux, env)
        lines = wait_for(tmux, "DIAGNOSIS")
        # Compact mode: one row per GPU, all eight visible, plus the process and diagnosis sections.
        rows = [l for l in lines[1:9]]
        for i, l in enumerate(rows):
            assert l.startswith(f"{i:>2} ["), l
        assert any("COMMAND" in l for l in lines)
        assert lines[23].startswith("q quit")
        tmux("send-keys", "-t", "m", "q")
        assert any("EXITED:0" in l for l in wait_for(tmux, "EXITED:", deadline_s=10))
    finally:
        env.cleanup()


def test_count_exits_by_itself(tmux):
    env = two_gpu_env()
    try:
        start(tmux, env, "--count", "3")
        lines = wait_for(tmux, "EXITED:", deadline_s=20)
        assert any("EXITED:0" in l for l in lines)
    finally:
        env.cleanup()
