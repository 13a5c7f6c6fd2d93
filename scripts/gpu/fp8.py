"""BERT-base s128 at fp16, int8 and fp8 in gpuopt on the H200 (scripts/gpu/fp8.sh): device ms per
batch, and each precision's rel-L2 against gpuopt fp32 on the same batch-32 inputs. The model is
/tmp/compare-models/bert_base_legacy.onnx when present, else exported with compare.py's builder."""
import argparse, datetime, json, os, subprocess, sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


# A precision with one fusion turned off (GPUOPT_DISABLE_FUSION) or a switch set, for the A/B.
VARIANTS = {"fp8_unchained": {"GPUOPT_DISABLE_FUSION": "fp8_chain"}, "fp8_nonorm": {"GPUOPT_DISABLE_FUSION": "fp8_norm"},
            "int8_unfused": {"GPUOPT_DISABLE_FUSION": "int8_epilogue,int8_norm"},
            "int8_noepi": {"GPUOPT_DISABLE_FUSION": "int8_epilogue"}, "int8_nonorm": {"GPUOPT_DISABLE_FUSION": "int8_norm"},
            # cuBLASLt's first heuristic answer for every GEMM (no algorithm timing, lt_tune.h)
            "fp8_notune": {"GPUOPT_MATMUL_AUTOTUNE": "0"}, "int8_notune": {"GPUOPT_MATMUL_AUTOTUNE": "0"},
            "fp16_notune": {"GPUOPT_MATMUL_AUTOTUNE": "0"},
            # cuBLASLt's fast FP8 accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM)
            "fp8_fastacc": {"GPUOPT_FP8_FAST_ACCUM": "1"},
            # every GEMM in e4m3, lone or not (the attention output projection, the pooler)
            "fp8_alllone": {"GPUOPT_DISABLE_FUSION": "fp8_lone"},
            # the FFN's e4m3 output as f16 + a quantize pass (the form before bf16 C)
            "fp8_staged": {"GPUOPT_FP8_E4M3_OUT": "staged"}}


def run(args, env=None):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600,
                       env=None if env is None else {**os.environ, **env})
    if p.returncode != 0:
        raise RuntimeError((p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1])
    return p


def model_path(work):
    path = "/tmp/compare-models/bert_base_legacy.onnx"
    if os.path.exists(path):
        return path
    import compare  # torch + transformers: only when the file is not there yet
    m, make = compare.build_model("bert_base")
    path = os.path.join(work, "bert_base_legacy.onnx")
    compare.export(m.eval(), make(1), path, "legacy")
    return path


def feeds(work, b, seq=128):
    rng = np.random.default_rng(b)
    mask = np.ones((b, seq), np.int64)
    mask[:, seq - seq // 8:] = 0  # a padded tail, as compare.py's inputs
    args = []
    for name, v in (("input_ids", rng.integers(0, 30522, (b, seq), dtype=np.int64)), ("attention_mask", mask)):
        f = os.path.join(work, f"{name}_{b}.npy")
        np.save(f, v)
        args += ["--input", f"{name}={f}"]
    return args


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuopt", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/fp8-work")
    ap.add_argument("--batches", default="32,256")
    ap.add_argument("--precisions", default="fp16,fp8,fp8_unchained,fp8_nonorm,int8,int8_unfused",
                    help="a precision, or one with a fusion off (VARIANTS): fp8_unchained (GPUOPT_DISABLE_FUSION=fp8_chain: "
                         "every GEMM quantizes its own input, writes f16), fp8_nonorm (fp8_norm: the LayerNorms write no "
                         "e4m3 copy), int8_unfused (int8_epilogue,int8_norm: Int8Gemm without Gelu/residual/int8 output, "
                         "LayerNorms without int8 output), int8_noepi and int8_nonorm (one of the two), fp8_notune / "
                         "int8_notune / fp16_notune (GPUOPT_MATMUL_AUTOTUNE=0), fp8_fastacc (GPUOPT_FP8_FAST_ACCUM=1), "
                         "fp8_alllone (GPUOPT_DISABLE_FUSION=fp8_lone), fp8_staged (GPUOPT_FP8_E4M3_OUT=staged); "
                         "NAME@256 (or @32/256) runs it at those batches only")
    ap.add_argument("--commit", default="")
    ap.add_argument("--profile-batch", type=int, default=256, help="then a per-op profile of --profile here (0: off)")
    ap.add_argument("--profile", default="fp8,int8", help="precisions to profile")
    ap.add_argument("--log-fallbacks", action="store_true",
                    help="profile runs at GPUOPT_LOG_LEVEL=debug: print the GEMM algorithm timing and the Fp8Gemms whose "
                         "e4m3 output fell back to f16 + a quantize pass")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    path = model_path(a.work)
    records, rows = [], []
    ref = None
    for b in [int(x) for x in a.batches.split(",")]:
        inputs = feeds(a.work, b)
        if ref is None:
            out = os.path.join(a.work, "fp32")
            run([a.gpuopt, "run", path, "--device", "cuda", "--precision", "fp32", "--iterations", 1, "--warmup", 0,
                 "--output-dir", out] + inputs)
            ref = np.load(os.path.join(out, "output.npy")).astype(np.float64)
            ref_batch = b
        for spec in a.precisions.split(","):
            prec, _, only = spec.partition("@")  # fp8_notune@256: that batch only
            if only and str(b) not in only.split("/"):
                continue
            out = os.path.join(a.work, f"{prec}_{b}")
            r = dict(model="bert_base", exporter="legacy", batch=b, runner="gpuopt", precision=prec,
                     date=datetime.date.today().isoformat(), commit=a.commit)
            try:
                env = VARIANTS.get(prec)
                p = run([a.gpuopt, "run", path, "--device", "cuda", "--precision", prec.split("_")[0], "--iterations", 20,
                         "--warmup", 2, "--json", "--output-dir", out] + inputs, env)
                j = json.loads(p.stdout)
                ms = j["device_ms"]["median"]
                r.update(ms=ms, items_per_s=round(b * 1000 / ms, 1), execution=j.get("execution", ""))
                if "fp8" in j:
                    r.update(fp8_gemms=j["fp8"]["gemms"], fp8_chained=j["fp8"]["chained"], fp8_shared=j["fp8"]["shared"], fp8_kept=len(j["fp8"]["kept"]))
                if b == ref_batch:
                    got = np.load(os.path.join(out, "output.npy")).astype(np.float64)
                    r["rel_l2_vs_fp32"] = round(float(np.linalg.norm(got - ref) / np.linalg.norm(ref)), 5)
            except Exception as e:  # noqa: BLE001
                r["error"] = str(e)[:300]
            records.append(r)
            print(json.dumps(r), flush=True)
            json.dump(records, open(a.out, "w"), indent=1)
    print(f"\n{'batch':>5} {'precision':>13} {'device ms':>10} {'items/s':>9} {'vs fp16':>8} {'rel-L2 vs fp32':>15}")
    for r in records:
        fp16 = next((x for x in records if x["batch"] == r["batch"] and x["precision"] == "fp16" and "ms" in x), None)
        speed = f"{fp16['ms'] / r['ms']:.2f}x" if fp16 and "ms" in r else "-"
        print(f"{r['batch']:>5} {r['precision']:>13} {r.get('ms', float('nan')):>10.3f} {r.get('items_per_s', 0):>9.0f} "
              f"{speed:>8} {r.get('rel_l2_vs_fp32', '-')!s:>15}  {r.get('error', '')}")
    if a.profile_batch:  # where the time goes: GPU time per op type, node by node
        for prec in a.profile.split(","):
            try:
                p = run([a.gpuopt, "run", path, "--device", "cuda", "--precision", prec, "--iterations", 2, "--warmup", 1,
                         "--profile", "--json"] + feeds(a.work, a.profile_batch),
                        {"GPUOPT_LOG_LEVEL": "debug"} if a.log_fallbacks else None)
                if a.log_fallbacks:
                    logs = [ln for ln in p.stderr.splitlines() if "cuBLASLt" in ln or "Fp8Gemm" in ln]
                    print(f"log {prec} b{a.profile_batch}: {len(logs)} lines on GEMM algorithms / fallbacks")
                    for ln in logs[:40]:
                        print("  " + ln)
                ops = json.loads(p.stdout)["profile"]["ops"]
                tot = sum(o["gpu_us"] for o in ops)
                top = sorted(ops, key=lambda o: -o["gpu_us"])[:8]
                print(f"profile {prec} b{a.profile_batch}: {tot / 1e3:.2f} ms GPU over nodes; " +
                      ", ".join(f"{o['op']}@{o['device']} {o['gpu_us'] / 1e3:.2f} ({o['nodes']})" for o in top), flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"profile {prec}: {e}")


if __name__ == "__main__":
    main()
