// The CUDA runner on GPTQ (int4 group 32, int8 per channel) and AWQ (int4 group 32) checkpoints,
// with the packed quantized kernels (RunnerOptions::quant_kernels) and with load-time
// dequantization, against the CPU runner (the f32 oracle, which dequantizes exactly) over prefill
// in one step (the dequantize + GEMM path), in chunks of 4 tokens (the GEMV path) and 20 decode
// steps; FP8 (W8A16 up to cuda::kFp8GemvMaxTokens tokens a step, W8A8 above) likewise. Skipped
// without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <unordered_map>

#include "llm/checkpoint.h"
#include "llm/cuda/weights_packed.h"
#include "llm/config.h"
#include "llm/cuda/quant_gemm.h"
#include "llm/kv_cache.h"
#include "llm/quant_pack.h"
#include "llm/quantized.h"
#include "llm/runner.h"
#include "llm_cuda_test_util.h"

namespace gpuopt::llm {
namespace {

LlmConfig tiny() {
  LlmConfig c;
  c.arch = LlmArch::Llama;
  c.architecture = "LlamaForCausalLM";
  c.vocab_size = 101;
  c.hidden_size = 256;
  c.intermediate_size = 192;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.max_position = 512;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000;
  c.dtype = DType::F16;
  return c;
}

// random_checkpoint's weights with every decoder linear quantized and stored packed, read back
// through find_quantized_linear as the file loader does.
class QuantCheckpoint : public Checkpoint {
 public:
  QuantCheckpoint(const LlmConfig& cfg, const WeightQuant& q, float gain = 5) {
    base_ = random_checkpoint(cfg, DType::F32, 99);
    for (const WeightView& w : base_->tensors()) {
      if (w.shape.size() != 2 || w.name.rfind("model.layers.", 0) != 0) {
        views_.push_back(w);
        continue;
      }
      const int64_t N = w.shape[0], K = w.shape[1];
      std::vector<float> f(static_cast<size_t>(N * K));
      std::memcpy(f.data(), w.data, f.size() * 4);
      // random_checkpoint's 0.02 spread; scaled up so the quantization is not lost in the noise.
      for (float& x : f) x *= gain;
      const std::string base = w.name.substr(0, w.name.size() - 7);
      if (q.method == WeightQuant::Method::Fp8) {
        const Fp8Quantized fq = quantize_fp8(f.data(), N, K, q.fp8_per_channel);
        add(w.name, DType::Undefined, {N, K}, fq.w, "F8_E4M3");
        add(base + ".weight_scale", DType::F32, {static_cast<int64_t>(fq.scales.size()), 1}, fq.scales, "F32");
      } else {
        const bool awq = q.method == WeightQuant::Method::Awq;
        const IntQuantized iq =
            quantize_int(f.data(), N, K, q.bits, q.group_size, awq ? IntRounding::Awq : IntRounding::GptqSym);
        const PackedInt p = awq ? pack_awq(iq) : pack_gptq(iq, true);
        add(base + ".qweight", DType::I32, p.qweight_shape, p.qweight, "I32");
        add(base + ".qzeros", DType::I32, p.qzeros_shape, p.qzeros, "I32");
        add(base + ".scales", DType::F16, {iq.groups, N}, iq.scales, "F16");
        if (!awq) add(base + ".g_idx", DType::I32, {K}, p.g_idx, "I32");
      }
      auto ql = find_quantized_linear(
          [&](const std::string& n) -> const WeightView* {
            auto it = raw_.find(n);
            return it == raw_.end() ? nullptr : &it->second;
          },
          base, q, N, K);
      if (!ql.ok()) {
        ADD_FAILURE() << ql.status().to_string();
        return;
      }
      quants_.push_back(std::make_unique<QuantizedLinear>(*ql));
      WeightView v;
      v.name = w.name;
      v.dtype = DType::F16;
      v.shape = w.shape;
      v.bytes = quants_.back()->packed_bytes();
      v.quant = quants_.back().get();
      views_.push_back(v);
    }
  }
  const WeightView* find(const std::string& name) const override {
    for (const WeightView& w : views_)
      if (w.name == name) return &w;
    return nullptr;
  }
  const std::vector<WeightView>& tensors() const override { return views_; }
  size_t total_bytes() const override { return 0; }

 private:
  template <class T>
  void add(const std::string& name, DType dt, std::vector<int64_t> shape, const std::vector<T>& v, const char* fd) {
    auto& bytes = store_.emplace_back(v.size() * sizeof(T));
    std::memcpy(bytes.data(), v.data(), bytes.size());
    WeightView w;
    w.name = name;
    w.dtype = dt;
    w.file_dtype = fd;
    w.shape = std::move(shape);
    w.data = bytes.data();
    w.bytes = bytes.size();
    raw_[name] = w;
  }
  std::unique_ptr<Checkpoint> base_;
  std::deque<std::vector<unsigned char>> store_;
  std::unordered_map<std::string, WeightView> raw_;
  std::vector<std::unique_ptr<QuantizedLinear>> quants_;
  std::vector<WeightView> views_;
};

RunnerOptions opts(DType dt, bool quant_kernels) {
  RunnerOptions o;
  o.compute_dtype = dt;
  o.num_kv_blocks = 64;
  o.max_batch = 4;
  o.max_step_tokens = 64;
  o.quant_kernels = quant_kernels;
  return o;
}

double rel_err(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num = std::max(num, std::fabs(static_cast<double>(got[i]) - ref[i]));
    den = std::max(den, std::fabs(static_cast<double>(ref[i])));
  }
  return num / std::max(den, 1e-30);
}

// Prefill `prompt_len` tokens in chunks of `chunk`, then 20 greedy decode steps (the CPU's pick);
// the worst relative logits error of `gpu` against `cpu` over every step.
double run_both(ModelRunner& cpu, ModelRunner& gpu, int prompt_len, int chunk) {
  BlockAllocator alloc(64);
  std::vector<int32_t> table, tokens;
  for (int i = 0; i < prompt_len; ++i) tokens.push_back(static_cast<int32_t>((i * 37 + 5) % 101));
  double worst = 0;
  int64_t cached = 0;
  auto step = [&](int n) {
    EXPECT_TRUE(alloc.grow(table, cached + n, 16));
    StepBatch b;
    b.seqs.push_back({n, cached, &table, true});
    b.tokens.assign(tokens.begin() + cached, tokens.begin() + cached + n);
    std::vector<float> a, g;
    Status s1 = cpu.step(b, &a), s2 = gpu.step(b, &g);
    EXPECT_TRUE(s1.ok() && s2.ok()) << s1.to_string() << " " << s2.to_string();
    if (!s1.ok() || !s2.ok()) return;
    worst = std::max(worst, rel_err(g, a));
    cached += n;
    if (cached == static_cast<int64_t>(tokens.size()))
      tokens.push_back(static_cast<int32_t>(std::max_element(a.begin(), a.end()) - a.begin()));
  };
  for (int done = 0; done < prompt_len; done += chunk) step(std::min(chunk, prompt_len - done));
  for (int i = 0; i < 20; ++i) step(1);
  return worst;
}

// The CPU oracle of the runner's FP8 linears: steps of more than kFp8GemvMaxTokens tokens run
// W8A8, every linear's input row quantized to e4m3 with the scale max|row| / 448 and read back,
// as FP8 checkpoints with dynamic per-token input quantization (compressed-tensors
// `input_activations: {dynamic: true, strategy: token}`) define it; smaller steps run W8A16
// (activations as they are).
void fp8_per_token(int64_t, const char*, float* x, int64_t T, int64_t dim) {
  if (T <= cuda::kFp8GemvMaxTokens) return;
  for (int64_t t = 0; t < T; ++t) {
    float* r = x + t * dim;
    float amax = 0;
    for (int64_t i = 0; i < dim; ++i) amax = std::max(amax, std::fabs(r[i]));
    if (amax == 0) continue;
    const float s = amax / 448.0f;
    for (int64_t i = 0; i < dim; ++i) r[i] = fp8_e4m3_to_float(float_to_fp8_e4m3(r[i] / s)) * s;
  }
}

// `packed_acts_fp8`: the packed runner quantizes activations to e4m3 per token (FP8 W8A8), so its
// oracle does as well, and the weights keep random_checkpoint's spread (gain 1): the f16 and f32
// activations round to different e4m3 codes now and then, and the x5 model amplifies that; the
// dequantized runner is compared against the plain f32 oracle.
void check_scheme(const WeightQuant& q, bool packed_acts_fp8 = false) {
  const LlmConfig cfg = tiny();
  QuantCheckpoint ck(cfg, q, packed_acts_fp8 ? 1.0f : 5.0f);
  auto cpu = make_cpu_runner(cfg, ck, opts(DType::F32, false));
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  auto packed = make_cuda_runner(cfg, ck, opts(DType::F16, true));
  ASSERT_TRUE(packed.ok()) << packed.status().to_string();
  auto deq = make_cuda_runner(cfg, ck, opts(DType::F16, false));
  ASSERT_TRUE(deq.ok()) << deq.status().to_string();
  // Packed: the linears' bytes shrink (int4 about a quarter of f16, int8 about a half).
  EXPECT_LT((*packed)->decode_bytes(1, 0), (*deq)->decode_bytes(1, 0));
  // Same f16 argument as runner_test's LlamaF16NearCpu (~20 roundings of 2^-11 relative); the
  // quantized weights themselves are exact on both sides (f32 dequantization on the CPU, in
  // registers or f16 scratch on the GPU — f16 scratch adds one more rounding). FP8 W8A8 against
  // its W8A8 oracle: 0.026-0.048 measured on the H200 (the plain f32 oracle: 0.040-0.064, the
  // dequantized runner 0.001), under 0.06, while a wrong scale, row or layout is an error of
  // order one (docs/perf-notes.md: what of the 0.03 is not explained yet).
  for (int chunk : {30, 4}) {
    for (ModelRunner* g : {packed->get(), deq->get()}) {
      const bool acts_fp8 = packed_acts_fp8 && g == packed->get();
      RunnerOptions co = opts(DType::F32, false);
      if (acts_fp8) co.activation_hook = fp8_per_token;
      auto c2 = make_cpu_runner(cfg, ck, co);
      ASSERT_TRUE(c2.ok());
      const double e = run_both(**c2, *g, 30, chunk);
      // FP8 in chunks of 4 runs W8A16 throughout: weight-only, as exact as the int kernels.
      EXPECT_LE(e, acts_fp8 && chunk > cuda::kFp8GemvMaxTokens ? 6e-2 : 1e-2) << q.describe() << (g == packed->get() ? " packed" : " dequantized") << " chunk " << chunk;
      std::printf("%s %s chunk %d: worst relative logits error %.3g\n", q.describe().c_str(),
                  g == packed->get() ? "packed" : "dequantized", chunk, e);
    }
  }
}

// Host side, no GPU needed: the fused packed weight the runner uploads reads (GPTQ formula,
// written here) as the concatenation of its parts' dequantized rows — for GPTQ as stored and for
// AWQ repacked.
TEST(CudaRunnerQuant, PackFusedReadsAsItsParts) {
  for (bool awq : {false, true}) {
    WeightQuant q;
    q.method = awq ? WeightQuant::Method::Awq : WeightQuant::Method::Gptq;
    q.bits = 4;
    q.group_size = 32;
    q.zero_minus_one = !awq;
    const LlmConfig cfg = tiny();
    QuantCheckpoint ck(cfg, q);
    std::vector<const WeightView*> parts;
    for (const char* n : {"q", "k", "v"})
      parts.push_back(ck.find(std::string("model.layers.1.self_attn.") + n + "_proj.weight"));
    cuda::HostPacked h;
    ASSERT_TRUE(cuda::pack_fused(parts, DType::F16, &h));
    ASSERT_EQ(h.N, 512);
    ASSERT_EQ(h.K, 256);
    std::vector<float> want;
    for (const WeightView* p : parts) {
      std::vector<float> w(static_cast<size_t>(p->quant->N * p->quant->K));
      dequantize(*p->quant, 0, w.size(), w.data());
      want.insert(want.end(), w.begin(), w.end());
    }
    size_t bad = 0;
    for (int64_t n = 0; n < h.N; ++n)
      for (int64_t k = 0; k < h.K; ++k) {
        const int64_t g = k / h.group_size;
        const uint32_t qv = (h.qweight[static_cast<size_t>((k / 8) * h.N + n)] >> (4 * (k % 8))) & 15;
        uint32_t z = (h.qzeros[static_cast<size_t>(g * (h.N / 8) + n / 8)] >> (4 * (n % 8))) & 15;
        if (h.zero_minus_one) z = (z + 1) & 15;
        const float w = Half::to_float(h.scales[static_cast<size_t>(g * h.N + n)]) *
                        static_cast<float>(static_cast<int>(qv) - static_cast<int>(z));
        bad += w != want[static_cast<size_t>(n * h.K + k)];
      }
    EXPECT_EQ(bad, 0u) << (awq ? "awq" : "gptq");
    // A float part, or parts of different input sizes, are not packed together.
    EXPECT_FALSE(cuda::pack_fused({parts[0], ck.find("model.layers.1.mlp.down_proj.weight")}, DType::F16, &h));
    EXPECT_FALSE(cuda::pack_fused({ck.find("model.embed_tokens.weight")}, DType::F16, &h));
    EXPECT_FALSE(cuda::pack_fused(parts, DType::F32, &h));
  }
}

// A single act-order part keeps its g_idx packed (o_proj, down_proj); several act-order parts
// are not fused.
TEST(CudaRunnerQuant, PackFusedKeepsASinglePartsActOrder) {
  WeightQuant q;
  q.method = WeightQuant::Method::Gptq;
  q.bits = 4;
  q.group_size = 32;
  q.desc_act = true;
  const LlmConfig cfg = tiny();
  QuantCheckpoint ck(cfg, q);
  const WeightView* o = ck.find("model.layers.0.self_attn.o_proj.weight");
  ASSERT_TRUE(o && o->quant);
  // The same packed tensors with the groups of a reversed channel order.
  const QuantizedLinear& base = *o->quant;
  std::vector<int32_t> g(static_cast<size_t>(base.K));
  for (int64_t k = 0; k < base.K; ++k) g[static_cast<size_t>(k)] = static_cast<int32_t>((base.K - 1 - k) / base.group_size);
  WeightView gv = *base.g_idx;
  gv.data = g.data();
  QuantizedLinear act = base;
  act.g_idx = &gv;
  WeightView ov = *o;
  ov.quant = &act;
  cuda::HostPacked h;
  ASSERT_TRUE(cuda::pack_fused({&ov}, DType::F16, &h));
  EXPECT_EQ(h.g_idx, g);
  std::vector<float> want(static_cast<size_t>(act.N * act.K));
  dequantize(act, 0, want.size(), want.data());
  size_t bad = 0;
  for (int64_t n = 0; n < h.N; ++n)
    for (int64_t k = 0; k < h.K; ++k) {
      const int64_t gi = h.g_idx[static_cast<size_t>(k)];
      const uint32_t qv = (h.qweight[static_cast<size_t>((k / 8) * h.N + n)] >> (4 * (k % 8))) & 15;
      const uint32_t z = (((h.qzeros[static_cast<size_t>(gi * (h.N / 8) + n / 8)] >> (4 * (n % 8))) & 15) + 1) & 15;
      const float w = Half::to_float(h.scales[static_cast<size_t>(gi * h.N + n)]) *
                      static_cast<float>(static_cast<int>(qv) - static_cast<int>(z));
      bad += w != want[static_cast<size_t>(n * h.K + k)];
    }
  EXPECT_EQ(bad, 0u);
  EXPECT_FALSE(cuda::pack_fused({&ov, &ov}, DType::F16, &h));
}

TEST(CudaRunnerQuant, GptqInt4Group32) {
  LLM_REQUIRE_DEVICE();
  WeightQuant q;
  q.method = WeightQuant::Method::Gptq;
  q.bits = 4;
  q.group_size = 32;
  check_scheme(q);
}

TEST(CudaRunnerQuant, GptqInt8PerChannel) {
  LLM_REQUIRE_DEVICE();
  WeightQuant q;
  q.method = WeightQuant::Method::Gptq;
  q.bits = 8;
  q.group_size = -1;
  check_scheme(q);
}

// FP8 weights per channel and per tensor; packed, steps of more than kFp8GemvMaxTokens tokens
// quantize the activations to e4m3 per token as well (W8A8), and so does the oracle.
TEST(CudaRunnerQuant, Fp8PerChannelAndPerTensor) {
  LLM_REQUIRE_DEVICE();
  for (bool per_channel : {true, false}) {
    WeightQuant q;
    q.method = WeightQuant::Method::Fp8;
    q.bits = 8;
    q.fp8_per_channel = per_channel;
    q.fp8_dynamic_input = true;
    check_scheme(q, /*packed_acts_fp8=*/true);
  }
}

TEST(CudaRunnerQuant, AwqInt4Group32) {
  LLM_REQUIRE_DEVICE();
  WeightQuant q;
  q.method = WeightQuant::Method::Awq;
  q.bits = 4;
  q.group_size = 32;
  q.sym = false;
  q.zero_minus_one = false;
  check_scheme(q);
}

}  // namespace
}  // namespace gpuopt::llm
