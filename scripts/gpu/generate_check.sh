#!/usr/bin/env bash
# `gpuopt generate` end to end on the GPU machine, one call: builds the gpuopt binary from the
# sysroot (scripts/build_on_gpu_machine.sh), writes a tiny random Llama (and a GQA Qwen2) with
# transformers' save_pretrained, and checks greedy tokens: CUDA fp32 == CPU, and CUDA fp16 against
# transformers' own greedy tokens; then the CLI's --bench on a 7B-shaped config with random weights.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gen-out}
mkdir -p "$OUT"
t=$(date +%s)
TARGETS=gpuopt timeout ${BUILD_TIMEOUT:-420} scripts/build_on_gpu_machine.sh > "$OUT/build.log" 2>&1
echo "build: rc=$? $(( $(date +%s) - t )) s"; grep -E "error|FAILED" "$OUT/build.log" | head -20
G=build-h200/bin/gpuopt
export LD_LIBRARY_PATH=build-h200/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
[ -x "$G" ] || { echo "no binary"; exit 1; }
PYTHONUNBUFFERED=1 timeout ${CHECK_TIMEOUT:-150} python3 - "$G" "$OUT" <<'PY'
import json, subprocess, sys, os, torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
g, out = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
ok = True
for name, cfg_cls, model_cls, extra in [("llama", LlamaConfig, LlamaForCausalLM, {}),
                                        ("qwen2", Qwen2Config, Qwen2ForCausalLM, {"tie_word_embeddings": True})]:
    cfg = cfg_cls(vocab_size=512, hidden_size=512, intermediate_size=1024, num_hidden_layers=3,
                  num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=512,
                  rope_theta=10000.0, torch_dtype="float32", **extra)
    m = model_cls(cfg).eval()
    d = f"/tmp/tiny_{name}"
    m.save_pretrained(d, safe_serialization=True)
    cj = json.load(open(f"{d}/config.json")); cj.setdefault("rope_theta", 10000.0); json.dump(cj, open(f"{d}/config.json", "w"))
    ids = [1, 17, 230, 41, 99, 7, 300, 12]
    def gen(*a):
        r = subprocess.run([g, "generate", d, "--prompt-ids", ",".join(map(str, ids)), "--max-new-tokens", "24",
                            "--temperature", "0", "--ignore-eos", "--json", *a], capture_output=True, text=True)
        if r.returncode != 0:
            print(name, a, "rc", r.returncode, r.stderr[-400:]); return None
        return json.loads(r.stdout)
    cpu, c32, c16 = gen("--device", "cpu"), gen("--device", "cuda", "--precision", "fp32"), gen("--device", "cuda", "--precision", "fp16")
    with torch.no_grad():
        hf = m.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False, eos_token_id=None)[0, len(ids):].tolist()
    toks = lambda j: j and j["sequences"][0]["token_ids"]
    same32, same16 = toks(cpu) == toks(c32), toks(c16) == hf
    print(f"{name}: cpu==cuda fp32 {same32}; cuda fp16 == transformers fp32 {same16}; cpu==transformers {toks(cpu) == hf}")
    if not same32: print(" cpu ", toks(cpu), "\n cuda", toks(c32))
    if not same16: print(" fp16", toks(c16), "\n hf  ", hf)
    ok &= same32
print("generate_check:", "ok" if ok else "FAILED")
PY
d=/tmp/llama7b; mkdir -p $d
python3 -c "
import json; json.dump({'architectures':['LlamaForCausalLM'],'vocab_size':32000,'hidden_size':4096,'intermediate_size':11008,
'num_hidden_layers':32,'num_attention_heads':32,'num_key_value_heads':32,'max_position_embeddings':4096,'rms_norm_eps':1e-5,
'rope_theta':10000.0,'torch_dtype':'float16','bos_token_id':1,'eos_token_id':2}, open('$d/config.json','w'))"
timeout ${BENCH_TIMEOUT:-150} $G generate $d --random-weights --device cuda --precision fp16 --bench --bench-prompt 128 \
  --bench-gen 128 --bench-batch 1,64 2>&1 | tail -12
