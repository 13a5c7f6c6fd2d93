"""docs/performance.md's model table is what tools/perf_table.py makes of docs/perf/h200.json
(the comparison script's records), and every record has the fields the format promises."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIELDS = {"model", "exporter", "batch", "precision", "runner", "date"}
RUNNERS = {"gpuopt", "torch_eager", "torch_eager_channels_last", "torch_compile", "torch_compile_max_autotune",
           "onnxruntime_cpu"}  # the last: ONNX Runtime on the CPU running the same QDQ file as gpuopt int8


def test_records_have_the_promised_fields():
    records = json.load(open(os.path.join(ROOT, "docs/perf/h200.json")))
    assert records, "docs/perf/h200.json has no records"
    for r in records:
        assert FIELDS <= set(r), r
        assert r["runner"] in RUNNERS, r
        if not r.get("error"):
            assert r["ms"] > 0 and abs(r["items_per_s"] - r["batch"] / r["ms"] * 1e3) < 1, r
    gpuopt = [r for r in records if r["runner"] == "gpuopt" and not r.get("error")]
    assert gpuopt and all(r.get("commit") for r in gpuopt)


def test_document_matches_the_records():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools/perf_table.py"), "--check"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_merge_replaces_a_measured_key_but_keeps_stored_and_other_keys():
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import perf_table
    old = [{"model": "m", "batch": 32, "precision": "fp16", "runner": "gpuopt", "ms": 2.0, "commit": "a"},
           {"model": "m", "batch": 32, "precision": "fp16", "runner": "torch_eager", "ms": 3.0},
           {"model": "m", "batch": 32, "precision": "fp16", "runner": "torch_compile", "ms": 1.5, "source": "stored"},
           {"model": "m", "batch": 8, "precision": "fp16", "runner": "gpuopt", "ms": 1.0, "commit": "a"}]
    new = [{"model": "m", "batch": 32, "precision": "fp16", "runner": "gpuopt", "ms": 1.0, "commit": "b"},
           {"model": "m", "batch": 32, "precision": "fp16", "runner": "torch_eager", "ms": 2.9}]
    merged = perf_table.merge(old, new)
    b32 = sorted((r["runner"], r["ms"]) for r in merged if r["batch"] == 32)
    assert b32 == [("gpuopt", 1.0), ("torch_compile", 1.5), ("torch_eager", 2.9)]
    assert [r["ms"] for r in merged if r["batch"] == 8] == [1.0]
    # A new run that carries the stored record again does not duplicate it.
    again = perf_table.merge(old, new + [dict(old[2])])
    assert sorted(r["runner"] for r in again if r["batch"] == 32) == ["gpuopt", "torch_compile", "torch_eager"]


def test_merging_stored_records_alone_replaces_only_their_runners():
    """A torch.compile run from another device call (records with `source`) merged on its own keeps
    the key's gpuopt and eager figures and replaces only the earlier compile figure."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import perf_table
    old = [{"model": "m", "batch": 32, "precision": "fp16", "runner": "gpuopt", "ms": 2.0, "commit": "a"},
           {"model": "m", "batch": 32, "precision": "fp16", "runner": "torch_eager", "ms": 3.0},
           {"model": "m", "batch": 32, "precision": "fp16", "runner": "torch_compile", "ms": 1.5, "source": "old"}]
    new = [{"model": "m", "batch": 32, "precision": "fp16", "runner": "torch_compile", "ms": 1.4, "source": "new"},
           {"model": "m", "batch": 256, "precision": "fp16", "runner": "torch_compile", "ms": 9.0, "source": "new"}]
    merged = perf_table.merge(old, new)
    b32 = sorted((r["runner"], r["ms"]) for r in merged if r["batch"] == 32)
    assert b32 == [("gpuopt", 2.0), ("torch_compile", 1.4), ("torch_eager", 3.0)]
    assert [r["ms"] for r in merged if r["batch"] == 256] == [9.0]
