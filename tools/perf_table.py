"""docs/performance.md's model table, generated from docs/perf/h200.json (scripts/gpu/compare.py's
records): one row per model x exporter x batch, one column per runner (device ms, median), the
best torch figure and gpuopt's speed-up over it, and gpuopt's accuracy beside PyTorch fp16's.

  python3 tools/perf_table.py            # rewrite the table between the markers in place
  python3 tools/perf_table.py --check    # exit 1 if the document is not what the JSON gives
  python3 tools/perf_table.py --merge NEW.json   # a later compare run's records into the JSON:
      for each (model, batch, precision) it measured, its records replace every earlier record
      of that key except stored ones (torch.compile from a stored run), so each row's gpuopt and
      eager figures still come from one device call; a file of stored records only (each with
      `source`) replaces just those runners' records; then the table is rewritten
"""
import argparse, json, os, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- perf-table:begin (tools/perf_table.py) -->", "<!-- perf-table:end -->"
RUNNERS = [("torch_eager", "eager"), ("torch_eager_channels_last", "eager CL"),
           ("torch_compile", "compile"), ("torch_compile_max_autotune", "compile max-autotune")]
ORDER = ["resnet50", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny", "vit_b_16", "bert_base", "gpt2"]


def fmt_ms(r):
    if r is None:
        return ""
    if r.get("error"):
        return "fails"
    s = f"{r['ms']:.2f}"
    return s + "*" if r.get("source") else s


def render(records):
    recs = [r for r in records if r.get("batch")]
    keys = sorted({(r["model"], r["batch"], r.get("precision", "fp16")) for r in recs},
                  key=lambda k: (ORDER.index(k[0]) if k[0] in ORDER else 99, k[0], k[1], k[2]))
    head = ["model", "exporter", "batch", "precision", "gpuopt ms", "items/s"] + [n for _, n in RUNNERS] + \
           ["gpuopt vs best torch", "rel L2 gpuopt / torch fp16", "gpuopt execution", "commit"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    stored = set()
    for model, batch, prec in keys:
        same = [r for r in recs if (r["model"], r["batch"], r.get("precision", "fp16")) == (model, batch, prec)]
        torch_r = {r["runner"]: r for r in same if r["runner"] in dict(RUNNERS)}
        stored |= {r["source"] for r in torch_r.values() if r.get("source")}
        best = min((r["ms"] for r in torch_r.values() if r.get("ms")), default=None)
        eager_err = torch_r.get("torch_eager", {}).get("rel_l2_vs_fp32")
        for g in sorted((r for r in same if r["runner"] == "gpuopt"), key=lambda r: r.get("exporter", "")):
            ok = g.get("ms") and not g.get("error")
            speed = f"{best / g['ms']:.2f}x" if ok and best else ""
            acc = ""
            if g.get("rel_l2_vs_fp32") is not None:
                acc = f"{g['rel_l2_vs_fp32']:.1e}" + (f" / {eager_err:.1e}" if eager_err is not None else "")
            lines.append("| " + " | ".join([
                model, g.get("exporter", ""), str(batch), prec, f"**{g['ms']:.2f}**" if ok else "fails",
                f"{g['items_per_s']:.0f}" if ok else "", *[fmt_ms(torch_r.get(k)) for k, _ in RUNNERS], speed, acc,
                (g.get("execution", "") if ok else g.get("error", ""))[:80].replace("|", "/"),
                g.get("commit", "")]) + " |")
    dates = sorted({r.get("date", "") for r in recs if not r.get("source")})
    commits = sorted({r.get("commit", "") for r in recs if r.get("runner") == "gpuopt" and r.get("commit")})
    foot = [f"Device time in ms, median, {', '.join(d for d in dates if d)}; gpuopt at commit "
            f"{', '.join(commits) or '?'}; torch runners in fp16. int8 and fp8 rows are gpuopt alone: "
            "compare them with the model's fp16 row."]
    if stored:
        foot.append("`*`: from a stored run, not this run (torch.compile takes minutes per model): "
                    + "; ".join(sorted(stored)) + ".")
    return "\n".join(lines + [""] + foot)


def merge(records, new):
    """records with `new` merged in (see the module docstring)."""
    def key(r):
        return r["model"], r["batch"], r.get("precision", "fp16")
    keys = {key(r) for r in new if r.get("batch") and not r.get("source")}  # measured by this run
    runners = {(key(r), r["runner"]) for r in new if r.get("batch")}
    kept = [r for r in records
            if (key(r) not in keys or r.get("source")) and (key(r), r["runner"]) not in runners]
    return kept + new


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default=os.path.join(ROOT, "docs/perf/h200.json"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs/performance.md"))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--merge", metavar="NEW.json", help="merge a later compare run's records into --json first")
    a = ap.parse_args()
    records = json.load(open(a.json))
    if a.merge:
        records = merge(records, json.load(open(a.merge)))
        with open(a.json, "w") as f:
            json.dump(records, f, indent=1)
    doc = open(a.doc).read()
    if BEGIN not in doc or END not in doc:
        print(f"perf_table: {a.doc} has no {BEGIN} ... {END} markers", file=sys.stderr)
        return 1
    pre, rest = doc.split(BEGIN, 1)
    post = rest.split(END, 1)[1]
    new = pre + BEGIN + "\n" + render(records) + "\n" + END + post
    if a.check:
        if new != doc:
            print(f"perf_table: {a.doc} is not what {a.json} gives; run python3 tools/perf_table.py", file=sys.stderr)
            return 1
        print("perf_table: docs/performance.md matches docs/perf/h200.json")
        return 0
    open(a.doc, "w").write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
