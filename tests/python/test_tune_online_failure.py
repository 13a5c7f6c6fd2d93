"""`gpuopt tune --mode online` when a point cannot be measured for a reason outside the model
(here: its server cannot be started because its log file cannot be created): the command fails
with exit 1 and one line naming the reason, instead of choosing from what was measured."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as H  # noqa: E402


def test_online_point_failing_outside_the_model_fails_the_command(tmp_path):
    model = tmp_path / "m.onnx"
    H.mlp_model(str(model))
    out = tmp_path / "out"
    # The first online server's log path is taken by a directory: the server cannot be started.
    (out / "work" / "online-fp32-1.log").mkdir(parents=True)
    r = subprocess.run([H.gpuopt_bin(), "tune", str(model), "--mode", "online", "--max-batch", "2", "--iterations",
                        "1", "--instances", "1", "--max-queue-delay-us", "0", "--measurement-ms", "100",
                        "--max-concurrency", "1", "--output-dir", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    errors = [l for l in r.stderr.splitlines() if "error" in l]
    assert len(errors) == 1, r.stderr
    assert "online" in errors[0] and "online-fp32-1.log" in errors[0], errors[0]
    assert not (out / "repository").exists()  # nothing was chosen
