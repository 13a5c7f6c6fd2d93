"""One exit-code rule across every subcommand (README: 0 ok, 1 runtime error, 2 usage error), and
usage errors that are one line naming what is wrong and what is valid.

Each subcommand `gpuopt --help` lists runs here with an unknown option (2) and, where it reads
or writes files, with a file that does not exist (1). A new subcommand fails
test_every_subcommand_has_a_file_case until it gets a row in FILE_CASES.
"""
import json
import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from gpuopt_cli import gpuopt_bin  # noqa: E402

MISSING = "/nonexistent-gpuopt-dir/model.onnx"

# Per subcommand: a command line naming a file that does not exist (exit 1), or None with why not.
FILE_CASES = {
    "info": None,  # reads /proc and sysfs only
    "version": None,
    "monitor": None,
    "exporter": None,
    "inspect": ["inspect", MISSING, "--kernel", "GPUOPT_DISABLE_FUSION=gelu"],
    "run": ["run", MISSING, "--random-inputs", "--kernel", "GPUOPT_FA_WARPS=4", "--cache-dir", "/tmp"],
    "serve": ["serve", MISSING, "--http-port", "0", "--metrics-port", "0", "--kernel", "GPUOPT_FA_WARPS=8"],
    "perf": ["perf", "-m", "m", "-f", "/nonexistent-gpuopt-dir/out.csv"],
    "bench": ["bench", "all", "-q", "--report", "/proc/gpuopt-no-such-dir/", "--cpu-sizes", "64"],
    "tune": ["tune", MISSING, "--kernel", "GPUOPT_CONV_GEMM=0"],
    "profile": ["profile", MISSING, "--kernel", "GPUOPT_MATMUL_AUTOTUNE=0"],
    "quantize": ["quantize", MISSING, "--calibration", "/nonexistent-gpuopt-dir", "-o", "/tmp/gpuopt-q.onnx"],
    "tokenize": ["tokenize", "/nonexistent-gpuopt-dir/tokenizer.json"],
    "generate": ["generate", "/nonexistent-gpuopt-dir", "--prompt-ids", "1"],
    "perplexity": ["perplexity", "/nonexistent-gpuopt-dir", "--text", "/nonexistent-gpuopt-dir/t.txt"],
}
# Required arguments, given so that an unknown option is the only error.
REQUIRED = {"run": ["m.onnx"], "inspect": ["m.onnx"], "perf": ["-m", "m"], "tune": ["m.onnx"], "profile": ["m.onnx"],
            "quantize": ["m.onnx", "-o", "q.onnx"], "tokenize": ["tokenizer.json"],
            "generate": ["model_dir"], "perplexity": ["model_dir", "--text", "t.txt"]}
# Extra runtime errors named by the rule: a second way each file-reading subcommand meets one.
MORE_FILE_CASES = [
    ["serve", "--model-repository", "/nonexistent-gpuopt-dir", "--http-port", "0", "--metrics-port", "0"],
    ["perf", "-m", "m", "-u", "127.0.0.1:1"],  # nothing listens on port 1: the server is unreachable
    ["perf", "-m", "m", "--input-data", MISSING],
    # OpenAI mode: nothing listens; a prompts file that does not exist.
    ["perf", "--service-kind", "openai", "-m", "m", "-u", "127.0.0.1:1", "--endpoint-type", "completions",
     "--num-prompts", "2"],
    ["perf", "--service-kind", "openai", "-m", "m", "--input-file", MISSING],
    ["serve", "--model-repository", "/tmp", "--http-port", "0", "--metrics-port", "0", "--embedding-model",
     f"e={MISSING}"],
    ["tune", "--model-repository", "/nonexistent-gpuopt-dir", "-m", "m"],
    ["serve", "--llm-model", "/nonexistent-gpuopt-dir", "--http-port", "0", "--metrics-port", "0"],
]


def gpuopt(*argv, timeout=120):
    return subprocess.run([gpuopt_bin(), *argv], capture_output=True, text=True, timeout=timeout)


def subcommands(*path):
    """The subcommands `gpuopt PATH --help` lists."""
    out = gpuopt(*path, "--help").stdout
    if "Subcommands:" not in out:
        return []
    names = []
    for line in out.split("Subcommands:", 1)[1].splitlines():
        m = re.match(r"^  (\S+)\s", line)
        if m:
            names.append(m.group(1))
    return names


def leaf_commands():
    """Every runnable subcommand path: ["info"], ["bench", "memory"], ..."""
    out = []
    for top in subcommands():
        subs = subcommands(top)
        out += [[top, s] for s in subs] if subs else [[top]]
    return out


def one_line(r):
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, f"want one line on stderr, got:\n{r.stderr}"
    return lines[0]


def test_help_lists_the_subcommands():
    names = subcommands()
    for want in ["info", "inspect", "run", "serve", "perf", "bench", "monitor", "exporter", "version"]:
        assert want in names, names


def test_every_subcommand_has_a_file_case():
    missing = [s for s in subcommands() if s not in FILE_CASES]
    assert not missing, (f"add {missing} to FILE_CASES in {__file__}: a command line with a missing file "
                         "(exit 1), or None when the subcommand reads no file")


@pytest.mark.parametrize("path", leaf_commands(), ids=lambda p: " ".join(p))
def test_unknown_option_is_a_usage_error(path):
    # The required arguments first, so the error is about the option (a subcommand not in
    # REQUIRED may answer that a required argument is missing: a usage error too).
    r = gpuopt(*path, *REQUIRED.get(path[0], []), "--no-such-option")
    assert r.returncode == 2, (path, r.returncode, r.stderr)
    line = one_line(r)
    assert line.startswith(f"gpuopt {' '.join(path)}: error: ") and "--help" in line, line
    if path[0] in REQUIRED or " is required" not in line:
        assert "unknown option --no-such-option; the options are " in line, line


@pytest.mark.parametrize("sub", sorted(k for k, v in FILE_CASES.items() if v), ids=str)
def test_missing_file_is_a_runtime_error(sub):
    argv = FILE_CASES[sub]
    r = gpuopt(*argv)
    assert r.returncode == 1, (argv, r.returncode, r.stdout[-500:], r.stderr)
    line = one_line(r)
    assert line.startswith("gpuopt: error: "), line
    assert "/nonexistent-gpuopt-dir" in line or "/proc/gpuopt-no-such-dir" in line, line


@pytest.mark.parametrize("argv", MORE_FILE_CASES, ids=lambda a: " ".join(a[:2]))
def test_other_runtime_errors_exit_1(argv):
    r = gpuopt(*argv)
    assert r.returncode == 1, (argv, r.returncode, r.stderr)
    one_line(r)


def test_unknown_subcommand_names_it_and_the_valid_ones():
    r = gpuopt("bogus")
    assert r.returncode == 2
    line = one_line(r)
    assert "unknown subcommand 'bogus'" in line, line
    for s in subcommands():
        assert s in line, (s, line)
    r = gpuopt("bench", "bogus")
    assert r.returncode == 2
    line = one_line(r)
    assert line.startswith("gpuopt bench: error: unknown subcommand 'bogus'"), line
    for s in subcommands("bench"):
        assert s in line, (s, line)
    r = gpuopt()
    assert r.returncode == 2 and "a subcommand is required: info" in one_line(r)


@pytest.mark.parametrize("argv, wants", [
    (["run", "m.onnx", "--batch", "0"], ["--batch", "'0'", "1..65536"]),
    (["inspect", "m.onnx", "--batch", "-3"], ["--batch", "1..65536"]),
    (["run", "m.onnx", "--precision", "fp17"], ["'fp17'", "fp32, fp16, bf16"]),
    (["run", "m.onnx", "--device", "gpu"], ["'gpu'", "cpu", "cuda"]),
    (["serve", "m.onnx", "--http-port", "70000"], ["--http-port", "0..65535"]),
    (["serve", "m.onnx", "--precision", "fp4"], ["'fp4'", "int8", "fp8"]),
    (["tune", "m.onnx", "--precision", "fp4"], ["'fp4'", "int8", "fp8"]),
    (["serve", "m.onnx", "--model-control-mode", "pull"], ["'pull'", "none, explicit, poll"]),
    (["serve", "m.onnx", "--exit-on-error", "maybe"], ["'maybe'", "true, false"]),
    (["perf", "-m", "m", "-b", "0"], ["--batch-size", "1..65536"]),
    (["perf", "-m", "m", "-u", "localhost:http"], ["--url", "1..65535"]),
    (["perf", "-m", "m", "-i", "quic"], ["'quic'", "http, grpc"]),
    (["perf", "-m", "m", "-a", "--sync"], ["-a/--async and --sync"]),
    (["perf", "-m", "m", "-i", "grpc", "-a", "--shared-memory", "system"], ["-a/--async with --shared-memory"]),
    (["perf", "-m", "m", "--service-kind", "triton"], ["'triton'", "kserve, openai"]),
    (["perf", "-m", "m", "--endpoint-type", "embeddings"], ["'embeddings'", "chat, completions"]),
    (["perf", "-m", "m", "--service-kind", "openai", "--concurrency", "0"], ["--concurrency", "1..100000"]),
    (["perf", "-m", "m", "--service-kind", "openai", "--goodput", "ttft:0"], ["--goodput 'ttft:0'", "ttft:MS"]),
    (["serve", "m.onnx", "--grpc-port", "70000"], ["--grpc-port", "0..65535"]),
    (["serve", "m.onnx", "--grpc-thread-count", "-1"], ["--grpc-thread-count", "0..1024"]),
    (["serve", "m.onnx", "--dtype", "fp17"], ["'fp17'", "auto, fp16, bf16, fp32"]),
    (["serve", "m.onnx", "--max-num-seqs", "0"], ["--max-num-seqs", "1..65536"]),
    # --kv-cache-dtype: one option definition (cli/llm_runner_option.h) for all three.
    (["generate", "model_dir", "--kv-cache-dtype", "fp4"], ["--kv-cache-dtype", "'fp4'", "auto, fp16, fp8, fp8_e4m3"]),
    (["perplexity", "model_dir", "--text", "t.txt", "--kv-cache-dtype", "int8"], ["--kv-cache-dtype", "'int8'", "fp8"]),
    (["serve", "m.onnx", "--kv-cache-dtype", "fp8_e5m2"], ["--kv-cache-dtype", "'fp8_e5m2'", "fp8_e4m3"]),
    (["tune", "m.onnx", "--max-batch", "0"], ["--max-batch", "1.."]),
    (["tune", "m.onnx", "--latency-budget-ms", "-1"], ["--latency-budget-ms", "0"]),
    (["profile", "m.onnx", "--batch", "0"], ["--batch", "1..65536"]),
    (["profile", "m.onnx", "--device", "gpu"], ["'gpu'", "cpu"]),
    # One parsing of --device everywhere (cli/device_option.h): the same four forms named.
    (["tune", "m.onnx", "--device", "gpu"], ["'gpu'", "cpu, cpu-ref, cuda or cuda:N"]),
    (["inspect", "m.onnx", "--device", "cpu-fast"], ["'cpu-fast'", "cpu, cpu-ref, cuda or cuda:N"]),
    (["run", "m.onnx", "--device", "cuda:x"], ["'cuda:x'", "cuda:N"]),
    (["--log-level", "loud", "info"], ["'loud'", "error, warn, info, debug, trace"]),
    (["monitor", "--sort", "name"], ["--sort 'name'", "memory or util"]),
])
def test_bad_values_name_the_valid_ones(argv, wants):
    r = gpuopt(*argv)
    assert r.returncode == 2, (argv, r.returncode, r.stderr)
    line = one_line(r)
    for w in wants:
        assert w in line, (w, line)
    assert len(line) < 300, line  # no 300-digit bounds


def test_cpu_fp16_runs_and_says_which_precision_ran(tmp_path):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "server"))
    import server_harness as H
    model = str(tmp_path / "add_sub.onnx")
    H.add_sub_model(model)
    r = gpuopt("run", model, "--random-inputs", "--device", "cpu", "--precision", "fp16", "--iterations", "1")
    assert r.returncode == 0, r.stderr
    head = r.stdout.splitlines()[0]
    assert "precision fp16 (CPU reference" in head, head
    j = json.loads(gpuopt("run", model, "--random-inputs", "--precision", "fp16", "--iterations", "1", "--json").stdout)
    assert j["precision"] == "fp16" and j["device"] == "cpu"
    j = json.loads(gpuopt("run", model, "--random-inputs", "--iterations", "1", "--json").stdout)
    assert j["precision"] == "fp32"


def test_bench_report_path_is_clean(tmp_path):
    out = str(tmp_path / "out") + "/"
    r = gpuopt("bench", "all", "--report", out, "--cpu-sizes", "64", timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("report: ")]
    assert lines == [f"report: {tmp_path}/out/index.html"], r.stderr[-800:]
    assert os.path.exists(tmp_path / "out" / "index.html")


def test_version_flag_and_a_global_flag_after_the_subcommand():
    r = gpuopt("--version")
    assert r.returncode == 0, r.stderr
    assert re.match(r"^gpuopt \S+ \(\S+\)$", r.stdout.strip()), r.stdout
    # --log-level is global: accepted before or after the subcommand, and still validated there.
    for argv in (["--log-level", "error", "version", "--json"], ["version", "--json", "--log-level", "error"]):
        r = gpuopt(*argv)
        assert r.returncode == 0, (argv, r.stderr)
        assert json.loads(r.stdout)["version"], argv
    # The CPU backend's oneDNN: the version of the library the binary loads (ldd), from its header
    # in .venv, or null when the binary has none.
    libs = subprocess.run(["ldd", gpuopt_bin()], capture_output=True, text=True).stdout
    got = json.loads(gpuopt("version", "--json").stdout)["libraries"]["cpu"]["onednn"]
    if "libdnnl.so" in libs:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        with open(os.path.join(root, ".venv", "include", "oneapi", "dnnl", "dnnl_version.h")) as f:
            hdr = f.read()
        want = ".".join(re.search(rf"#define DNNL_VERSION_{k} (\d+)", hdr).group(1) for k in ("MAJOR", "MINOR", "PATCH"))
        assert got == want, (got, want)
    else:
        assert got is None, got
    r = gpuopt("version", "--log-level", "loud")
    assert r.returncode == 2 and "'loud'" in one_line(r), r.stderr
    # An option no level knows is still a usage error naming it.
    r = gpuopt("version", "--bogus-flag")
    assert r.returncode == 2 and "--bogus-flag" in one_line(r), r.stderr


# The engine options are defined once (cli/engine_option.h): the same check and message everywhere.
@pytest.mark.parametrize("sub", ["run", "inspect", "profile", "tune", "serve"])
def test_precision_is_checked_alike(sub):
    r = gpuopt(sub, *REQUIRED.get(sub, []), "--precision", "fp17")
    assert r.returncode == 2, (sub, r.returncode, r.stderr)
    line = one_line(r)
    assert f"gpuopt {sub}: error: --precision: 'fp17' is not one of fp32, fp16, bf16, int8, fp8 (see" in line, line


@pytest.mark.parametrize("value", ["gpu", "cuda:x", "cuda:-1"])
def test_device_is_checked_alike(value):
    """One parsing of --device (cli/device_option.h): the same message in every subcommand."""
    said = {}
    for sub in ["run", "inspect", "profile", "tune", "quantize", "bench memory"]:
        r = gpuopt(*sub.split(), *REQUIRED.get(sub, []), "--device", value)
        assert r.returncode == 2, (sub, value, r.returncode, r.stderr)
        line = one_line(r)
        prefix = f"gpuopt {sub}: error: --device: "
        assert line.startswith(prefix) and f"'{value}'" in line and "cuda:N" in line, line
        said[sub] = line[len(prefix):].replace(f"'gpuopt {sub} --help'", "HELP")
    assert len(set(said.values())) == 1, said


def test_bench_device_takes_the_cuda_forms():
    """bench times a CUDA device: cuda:N, or the bare index it always took, the same device; the CPU
    is refused."""
    r = gpuopt("bench", "memory", "--device", "cpu")
    assert r.returncode == 2 and "bench times a CUDA device: cuda, cuda:N or N" in one_line(r), r.stderr
    # Device 3 (absent here, and on most hosts): the same answer whichever form names it.
    a = gpuopt("bench", "memory", "--device", "cuda:3", "--json", "-q", "--sizes", "1M", timeout=300)
    b = gpuopt("bench", "memory", "--device", "3", "--json", "-q", "--sizes", "1M", timeout=300)
    assert a.returncode == b.returncode, (a.stderr, b.stderr)
    if a.returncode != 0:
        assert one_line(a) == one_line(b)
    else:
        assert json.loads(a.stdout)["device"] == json.loads(b.stdout)["device"]
