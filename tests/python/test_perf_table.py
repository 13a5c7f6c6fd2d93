"""docs/performance.md's model table is what tools/perf_table.py makes of docs/perf/h200.json
(the comparison script's records), and every record has the fields the format promises."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIELDS = {"model", "exporter", "batch", "precision", "runner", "date"}
RUNNERS = {"gpuopt", "torch_eager", "torch_eager_channels_last", "torch_compile", "torch_compile_max_autotune"}


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
