#!/usr/bin/env python3
"""Sums an Nsight Compute CSV (--metrics gpu__time_duration.sum --csv --print-units base) per kernel
name: the last RUNS runs of a program that ran RUNS + 1 times (the first builds plans), each
kernel's time divided by RUNS. Prints the top kernels and the GPU's busy time per run."""
import argparse, collections, csv, io, re, sys


def short(name):
    n = name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    n = re.sub(r"^void ", "", n)
    base = re.match(r"[^<(]*", n).group(0)
    t = re.match(r"[^<(]*<([^()]*?)>\(", n)
    return (base + ("<" + t.group(1)[:30] + ">" if t else ""))[:90]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("csv")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--title", default="")
    ap.add_argument("--top", type=int, default=18)
    a = ap.parse_args()
    text = open(a.csv, errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        print(f"{a.title}: no ncu records: {text[-400:]}")
        return 1
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    ns = [(r["Kernel Name"], float(r["Metric Value"].replace(",", ""))) for r in rows
          if r.get("Metric Name") == "gpu__time_duration.sum"]
    # The first run also builds plans (weights converted and transposed, constants uploaded), so
    # it launches more kernels than the others: the run is the longest tail period P (the last P
    # kernels equal, by name, the P before them), and the last `runs` periods are counted.
    names = [n for n, _ in ns]
    per = 0
    for p in range(len(names) // 2, 0, -1):
        if names[len(names) - p:] == names[len(names) - 2 * p:len(names) - p]:
            per = p
            break
    if per == 0:
        print(f"{a.title}: no repeated run found in {len(names)} kernels")
        return 1
    ns = ns[len(ns) - per * a.runs:]
    agg = collections.defaultdict(lambda: [0.0, 0])
    for n, t in ns:
        agg[short(n)][0] += t / a.runs
        agg[short(n)][1] += 1
    tot = sum(v[0] for v in agg.values())
    print(f"== {a.title}: {per} kernels per run, {tot / 1e6:.3f} ms GPU busy per run")
    for n, (t, c) in sorted(agg.items(), key=lambda kv: -kv[1][0])[:a.top]:
        print(f"  {t / 1e3:9.1f} us  {100 * t / tot:5.1f}%  x{c // a.runs:<4d} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
