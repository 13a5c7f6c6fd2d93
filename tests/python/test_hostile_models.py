"""Hostile models against the real binary (issue 17, items 3 and 4): tiny ONNX files whose shapes
ask for more memory than any host has (Expand to [2^40, 2^40], ConstantOfShape of 2^50 elements,
an input with a fixed batch of 10^12, Tile/Reshape/Pad/Range/Resize arithmetic that overflows).
`gpuopt inspect` and `gpuopt run` must refuse each with exit 1 and one line naming the node (or
input), the shape and the bytes, within seconds and with a bounded peak RSS (ru_maxrss of the
child). Also: a tensor beyond --memory-limit is refused at load, and a host allocation that fails
(RLIMIT_DATA below what a run needs) is an out-of-memory error, not an abort (exit 134).
"""
import resource
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from gpuopt_cli import gpuopt_bin

MAX_RSS_KB = 400 * 1024  # the refusals must not allocate the tensors they describe


def save(path, nodes, inputs, outputs, inits=()):
    m = h.make_model(h.make_graph(nodes, "hostile", inputs, outputs, list(inits)),
                     opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def f32(name, shape):
    return h.make_tensor_value_info(name, T.FLOAT, shape)


def i64(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


# name -> (builder, text the error must contain: node or input, shape, bytes)
def expand_2p40(p):
    return save(p, [h.make_node("Expand", ["x", "s"], ["y"], name="big_expand")], [f32("x", [1])], [f32("y", None)],
                [i64("s", [2**40, 2**40])])


def constantofshape_2p50(p):
    return save(p, [h.make_node("ConstantOfShape", ["s"], ["y"], name="big_cos")], [], [f32("y", None)],
                [i64("s", [2**50])])


def batch_1e12(p):
    return save(p, [h.make_node("Relu", ["x"], ["y"], name="relu")], [f32("x", [10**12, 3])], [f32("y", None)])


def tile_overflow(p):
    return save(p, [h.make_node("Tile", ["x", "r"], ["y"], name="big_tile")], [f32("x", [2, 3])], [f32("y", None)],
                [i64("r", [2**62, 2**62])])


def reshape_overflow(p):
    return save(p, [h.make_node("Reshape", ["x", "s"], ["y"], name="big_reshape")], [f32("x", [2, 3])],
                [f32("y", None)], [i64("s", [2**40, 2**40, -1])])


def pad_overflow(p):
    return save(p, [h.make_node("Pad", ["x", "p"], ["y"], name="big_pad")], [f32("x", [2, 3])], [f32("y", None)],
                [i64("p", [0, 2**63 - 1, 0, 2**63 - 1])])


def range_huge(p):
    return save(p, [h.make_node("Range", ["a", "b", "c"], ["y"], name="big_range")], [],
                [h.make_tensor_value_info("y", T.INT64, None)], [i64("a", -2**62), i64("b", 2**62 - 1), i64("c", 1)])


def resize_huge(p):
    sc = numpy_helper.from_array(np.array([1, 1, 1e30, 1e30], np.float32), "sc")
    return save(p, [h.make_node("Resize", ["x", "", "sc"], ["y"], name="big_resize")], [f32("x", [1, 1, 2, 2])],
                [f32("y", None)], [sc])


CASES = {
    "expand_2p40": (expand_2p40, ["node 'big_expand'", "[1099511627776,1099511627776]", "bytes"]),
    "constantofshape_2p50": (constantofshape_2p50, ["node 'big_cos'", "[1125899906842624]", "needs 4096.00 TiB"]),
    "batch_1e12": (batch_1e12, ["input 'x'", "[1000000000000,3]", "needs 10.91 TiB"]),
    "tile_overflow": (tile_overflow, ["node 'big_tile'", "overflow", "[2,3]"]),
    "reshape_overflow": (reshape_overflow, ["node 'big_reshape'", "[1099511627776,1099511627776,-1]", "overflow"]),
    "pad_overflow": (pad_overflow, ["node 'big_pad'", "overflow", "[2,3]"]),
    "range_huge": (range_huge, ["node 'big_range'", "[9223372036854775807]", "needs 7.38e+19 bytes"]),
    "resize_huge": (resize_huge, ["node 'big_resize'", "too large", "axis 2 of extent 2"]),
}


def run_bounded(args, env=None, data_limit=None):
    """Runs args; returns (exit code, stdout, stderr, peak RSS in KiB of the child)."""
    def limits():
        if data_limit:
            resource.setrlimit(resource.RLIMIT_DATA, (data_limit, data_limit))
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=limits, env=env)
    try:
        out, err = p.communicate(timeout=60)  # the Expand model used to hang, climbing to 13.5 GB
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail(f"{args} did not finish in 60 s")
    # The largest peak of any child so far: an upper bound for this one (each must stay small).
    return p.returncode, out, err, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("command", ["inspect", "run"])
def test_hostile_model_is_refused_in_one_line(tmp_path, case, command):
    build, wants = CASES[case]
    path = build(tmp_path / f"{case}.onnx")
    args = [gpuopt_bin(), command, str(path)] + (["--iterations", "1", "--warmup", "0", "--random-inputs"] if command == "run" else [])
    rc, out, err, rss_kb = run_bounded(args)
    assert rc == 1, f"exit {rc} (134 = abort)\nstdout: {out}\nstderr: {err}"
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, f"expected one line, got:\n{err}"
    for w in wants:
        assert w in lines[0], f"'{w}' missing from: {lines[0]}"
    assert "internal error" not in err and "Assertion" not in err, err
    assert rss_kb < MAX_RSS_KB, f"peak RSS {rss_kb / 1024:.0f} MiB while refusing {case}"


def big_intermediate(p, elems):
    """x [1] expanded to [elems] (the shape is a constant, so the size is known at load)."""
    return save(p, [h.make_node("Expand", ["x", "s"], ["e"], name="grow"),
                    h.make_node("ReduceSum", ["e"], ["y"], name="sum", keepdims=0)],
                [f32("x", [1])], [f32("y", None)], [i64("s", [elems])])


def test_memory_limit_refuses_at_load(tmp_path):
    path = big_intermediate(tmp_path / "m.onnx", 1 << 20)  # one 4 MiB tensor
    rc, out, err, _ = run_bounded([gpuopt_bin(), "run", str(path), "--iterations", "1", "--warmup", "0", "--random-inputs",
                                   "--memory-limit", "1M"])
    assert rc == 1, out + err
    assert err.strip().count("\n") == 0, err
    for w in ["node 'grow'", "f32 [1048576]", "needs 4.00 MiB, more than --memory-limit 1.00 MiB"]:
        assert w in err, f"'{w}' missing from: {err}"
    # Within the limit the same model runs: the check is not a blanket refusal.
    rc, out, err, _ = run_bounded([gpuopt_bin(), "run", str(path), "--iterations", "1", "--warmup", "0", "--random-inputs",
                                   "--memory-limit", "64M"])
    assert rc == 0, out + err


def test_failed_host_allocation_is_an_error_not_an_abort(tmp_path):
    # 1 GiB tensor: fits any test host's memory (so the load-time check passes) but not the
    # 512 MiB data limit the run gets, so the allocation itself fails.
    path = big_intermediate(tmp_path / "m.onnx", 1 << 28)
    rc, out, err, _ = run_bounded([gpuopt_bin(), "run", str(path), "--iterations", "1", "--warmup", "0", "--random-inputs"],
                                  data_limit=512 << 20)
    assert rc == 1, f"exit {rc} (134 = abort)\n{out}\n{err}"
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, err
    assert "out of memory allocating 'grow:0' (f32 [268435456]): 1.00 GiB requested on the host" in lines[0], lines[0]


@pytest.mark.parametrize("command", ["inspect", "run"])
def test_every_unknown_op_is_named_at_once(tmp_path, command):
    """A model with several ops gpuopt lacks: one line names each (op and node), not just the first."""
    p = save(tmp_path / "unknown.onnx",
             [h.make_node("FooOp", ["x"], ["a"], name="first"), h.make_node("Relu", ["a"], ["b"]),
              h.make_node("BarOp", ["b"], ["c"], name="second"),
              h.make_node("Baz", ["c"], ["y"], name="third", domain="com.example")],
             [f32("x", [1, 4])], [f32("y", [1, 4])])
    args = [gpuopt_bin(), command, str(p)] + (["--random-inputs"] if command == "run" else [])
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for part in ("3 unknown ops", "'FooOp' at node 'first'", "'BarOp' at node 'second'",
                 "'Baz' (domain 'com.example') at node 'third'"):
        assert part in lines[0], (part, lines[0])
