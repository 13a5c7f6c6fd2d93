"""docs/performance.md's model table is what tools/perf_table.py makes of docs/perf/h200.json
(the comparison script's records), and every record has the fields the format promises."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIELDS = {"model", "exporter", "batch", "precision", "runner", "date"}
LLM_FIELDS = {"model", "batch", "prompt_tokens", "new_tokens", "precision", "runner", "date", "tok_s", "ttft_ms"}
SERVE_FIELDS = {"concurrency", "requests", "failed", "request_s", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms",
                "prefix_hit_rate", "commit", "source"}
KSERVE_FIELDS = {"model", "batch", "precision", "gpus", "instances", "protocol", "client", "concurrency", "infer_per_s",
                 "p50_ms", "p99_ms", "server_overhead_us", "server_cpu_us_per_request", "client_cpu_cores", "commit",
                 "source"}
RUNNERS = {"gpuopt", "gpuopt_perplexity", "torch_eager", "torch_eager_channels_last", "torch_compile", "torch_compile_max_autotune",
           "onnxruntime_cpu", "hf_eager", "gpuopt_serve", "gpuopt_serve_soak", "gpuopt_memory"}  # gpuopt_serve: scripts/gpu/llm_serve.py; gpuopt_serve_soak: llm_soak.py; hf_eager: transformers' generate (scripts/gpu/llm.py); the last: ONNX Runtime on the CPU running the same QDQ file as gpuopt int8


def test_records_have_the_promised_fields():
    records = json.load(open(os.path.join(ROOT, "docs/perf/h200.json")))
    assert records, "docs/perf/h200.json has no records"
    for r in records:
        assert r["runner"] in RUNNERS, r
        if r["runner"] == "gpuopt_serve_soak":  # one soak: requests sent, answered and failed, RSS and KV samples
            assert {"rate_req_s", "duration_s", "sent", "requests", "failed", "rss_mb_first_min", "rss_mb_last_min",
                    "kv_first_min", "kv_last_min", "samples", "commit", "source"} <= set(r), r
            assert r["requests"] + r["failed"] == r["sent"] and r["samples"], r
            continue
        if r["runner"] == "gpuopt_memory":  # scripts/gpu/llm_quant.py speed: one process's peak GPU memory
            assert {"model", "precision", "kv_cache_dtype", "context_tokens", "peak_gpu_mib", "weights_bytes",
                    "commit", "source"} <= set(r) and r["peak_gpu_mib"] > 0, r
            continue
        if r["runner"] == "gpuopt_perplexity":  # scripts/gpu/llm_quant.py accuracy: one scheme's perplexity
            assert {"model", "precision", "kernels", "perplexity", "perplexity_vs_fp16", "top1", "agreement_vs_fp16",
                    "scored_tokens", "context", "commit", "source"} <= set(r), r
            assert r["perplexity"] > 1 and r["scored_tokens"] > 0, r
            continue
        if r["runner"] == "gpuopt_serve" and "infer_per_s" in r:  # scripts/gpu/serve_scale.sh: one KServe load level
            assert KSERVE_FIELDS <= set(r) and r["infer_per_s"] > 0 and 0 < r["p50_ms"] <= r["p99_ms"], r
            continue
        if "tok_s" in r:  # a language-model record (scripts/gpu/llm.py, llm_serve.py)
            assert LLM_FIELDS <= set(r), r
            assert r.get("error") or r["tok_s"] > 0, r
            if r["runner"] == "gpuopt_serve":  # one load level: its concurrency and the client's figures
                assert SERVE_FIELDS <= set(r) and r["batch"] == r["concurrency"] and r["requests"] > 0, r
            continue
        assert FIELDS <= set(r), r
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


def test_readme_figures_are_the_records():
    """The README's headline table is rendered from the records (not typed), and each of its gpuopt
    figures is a record's."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import perf_table
    records = json.load(open(os.path.join(ROOT, "docs/perf/h200.json")))
    readme = open(os.path.join(ROOT, "README.md")).read()
    block = readme.split(perf_table.README_BEGIN, 1)[1].split(perf_table.README_END, 1)[0]
    assert block.strip() == perf_table.render_readme(records).strip()
    rows = [l.split("|")[1:-1] for l in block.splitlines() if l.startswith("| ResNet") or l.startswith("| BERT")]
    assert rows, block
    for cells in rows:
        model = "resnet50" if "ResNet" in cells[0] else "bert_base"
        ms = float(cells[2])
        assert any(r["runner"] == "gpuopt" and r["model"] == model and r["batch"] == int(cells[1])
                   and round(r["ms"], 2) == ms for r in records), cells


def test_llm_table_renders_gpuopt_beside_transformers():
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import perf_table
    recs = [{"model": "m", "batch": 1, "prompt_tokens": 128, "new_tokens": 128, "precision": "fp16",
             "runner": "gpuopt", "tok_s": 250.0, "ttft_ms": 10.0, "itl_p50_ms": 4.0, "itl_p99_ms": 4.5,
             "roofline_frac": 0.8, "date": "d", "commit": "c"},
            {"model": "m", "batch": 1, "prompt_tokens": 128, "new_tokens": 128, "precision": "fp16",
             "runner": "hf_eager", "tok_s": 12.5, "ttft_ms": 25.0, "date": "d"}]
    table = perf_table.render_llm(recs)
    row = [l for l in table.splitlines() if l.startswith("| m ")]
    assert len(row) == 1 and "**250**" in row[0] and "| 12 |" in row[0]  # 12.5 rounds half to even
    assert "20.0x" in row[0] and "80%" in row[0] and "4.00 / 4.50" in row[0]
