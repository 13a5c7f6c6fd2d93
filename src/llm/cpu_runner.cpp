// The fp32 CPU runner: the Llama family (Llama, Mistral, Qwen2) over the paged KV cache, written
// for clarity and as the oracle of the CUDA runner. Each output element is computed on its own, in
// one fixed order, so a prompt prefilled in one step, in chunks or token by token gives bitwise the
// same logits (the tests rely on it); threads split output elements, never a sum. With a narrow
// KV cache (--kv-cache-dtype fp16/fp8) it stores K and V rounded as a GPU cache would and reads
// them back through the same rounding: the oracle of a runner with that cache.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "llm/quantized.h"
#include "llm/runner.h"

namespace gpuopt::llm {
namespace {

// F16/BF16/F32 widened, quantized weights (GPTQ, AWQ, FP8) dequantized: the oracle runs in f32.
std::vector<float> to_f32(const WeightView& w) {
  return weight_to_f32(w);
}

// Dot product with eight partial sums (vectorisable without reassociating under -O2), then a
// fixed reduction: the order depends on k alone.
inline float dot(const float* a, const float* b, int64_t k) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += a[i + j] * b[i + j];
  for (; i < k; ++i) s[i & 7] += a[i] * b[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// y[t, n] = x[t, :] . w[n, :] (+ bias[n]) for t < T, n < N: PyTorch's Linear, w [N, K].
void linear(const float* x, int64_t T, int64_t K, const std::vector<float>& w, const std::vector<float>* bias,
            int64_t N, float* y) {
  parallel_for(N, 16, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n)  // a weight row stays in cache across the tokens
      for (int64_t t = 0; t < T; ++t) {
        float v = dot(x + t * K, w.data() + n * K, K);
        if (bias) v += (*bias)[static_cast<size_t>(n)];
        y[t * N + n] = v;
      }
  });
}

// transformers' LlamaRMSNorm: x / sqrt(mean(x^2) + eps) * weight, in f32.
void rms_norm(const float* x, int64_t T, int64_t D, const std::vector<float>& w, double eps, float* y) {
  for (int64_t t = 0; t < T; ++t) {
    const float* r = x + t * D;
    float ss = dot(r, r, D);
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(D) + static_cast<float>(eps));
    for (int64_t i = 0; i < D; ++i) y[t * D + i] = w[static_cast<size_t>(i)] * (r[i] * inv);
  }
}

struct Layer {
  std::vector<float> ln1, ln2, wq, wk, wv, bq, bk, bv, wo, wg, wu, wd;
  // [blocks, block_size, kv_heads, head_dim]: f32 (KvCacheDtype::Auto), else the narrow type's
  // bytes (f16, or e4m3 codes of K / k_scale and V / v_scale), as a GPU cache holds them.
  std::vector<float> k_cache, v_cache;
  std::vector<uint8_t> k_q, v_q;
  float k_scale = 1.0f, v_scale = 1.0f;
};

// n values into the cache at element `off`, in the cache's type.
void kv_store(KvCacheDtype dt, std::vector<float>& f, std::vector<uint8_t>& q, float scale, size_t off, const float* src,
              int64_t n) {
  if (dt == KvCacheDtype::Auto) {
    std::memcpy(&f[off], src, static_cast<size_t>(n) * 4);
  } else if (dt == KvCacheDtype::F16) {
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t h = Half::from_float(src[i]);
      std::memcpy(&q[(off + static_cast<size_t>(i)) * 2], &h, 2);
    }
  } else {
    const float inv = 1.0f / scale;
    for (int64_t i = 0; i < n; ++i) q[off + static_cast<size_t>(i)] = float_to_fp8_e4m3(src[i] * inv);
  }
}

// n values of the cache at element `off` as f32: the f32 cache itself, or decoded into tmp.
const float* kv_load(KvCacheDtype dt, const std::vector<float>& f, const std::vector<uint8_t>& q, float scale,
                     size_t off, int64_t n, float* tmp) {
  if (dt == KvCacheDtype::Auto) return f.data() + off;
  if (dt == KvCacheDtype::F16) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h = 0;
      std::memcpy(&h, &q[(off + static_cast<size_t>(i)) * 2], 2);
      tmp[i] = Half::to_float(h);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) tmp[i] = fp8_e4m3_to_float(q[off + static_cast<size_t>(i)]) * scale;
  }
  return tmp;
}

class CpuRunner final : public ModelRunner {
 public:
  CpuRunner(const LlmConfig& cfg, const RunnerOptions& opts) : c_(cfg), opts_(opts) {}

  Status init(const Checkpoint& ck) {
    auto get = [&](const std::string& name) -> Result<std::vector<float>> {
      const WeightView* w = ck.find(name);
      if (!w) return Status::NotFound("checkpoint: tensor '{}' is missing", name);
      return to_f32(*w);
    };
    GPUOPT_ASSIGN_OR_RETURN(embed_, get("model.embed_tokens.weight"));
    GPUOPT_ASSIGN_OR_RETURN(norm_, get("model.norm.weight"));
    if (!c_.tie_word_embeddings) {
      GPUOPT_ASSIGN_OR_RETURN(lm_head_, get("lm_head.weight"));
    }
    block_size_ = opts_.block_size;
    if (block_size_ <= 0) return Status::InvalidArgument("block size {} must be positive", block_size_);
    num_blocks_ = opts_.num_kv_blocks;
    kv_dt_ = opts_.kv_cache_dtype;
    const int64_t per_block = block_size_ * kv_cache_bytes_per_token(c_, kv_dt_, DType::F32);
    if (num_blocks_ <= 0) {
      // One full context for up to max_batch sequences, within cpu_kv_cache_bytes of host memory
      // (so a narrower element type holds more tokens).
      const int64_t ctx_blocks = (c_.max_position + block_size_ - 1) / block_size_;
      num_blocks_ = std::max<int64_t>(
          1, std::min<int64_t>(ctx_blocks * std::max(1, opts_.max_batch), opts_.cpu_kv_cache_bytes / per_block));
    }
    if (num_blocks_ > INT32_MAX) return Status::InvalidArgument("{} KV blocks: more than int32 ids", num_blocks_);
    const size_t cache = static_cast<size_t>(num_blocks_ * block_size_ * c_.num_kv_heads * c_.head_dim);
    const size_t cache_bytes = cache * static_cast<size_t>(kv_element_bytes(kv_dt_, DType::F32));
    layers_.resize(static_cast<size_t>(c_.num_layers));
    std::vector<KvScales> scales;
    if (kv_dt_ == KvCacheDtype::Fp8E4m3) {
      GPUOPT_ASSIGN_OR_RETURN(scales, kv_cache_scales(c_, ck));
    }
    for (int64_t i = 0; i < c_.num_layers; ++i) {
      Layer& L = layers_[static_cast<size_t>(i)];
      const std::string p = fmt::format("model.layers.{}.", i);
      GPUOPT_ASSIGN_OR_RETURN(L.ln1, get(p + "input_layernorm.weight"));
      GPUOPT_ASSIGN_OR_RETURN(L.ln2, get(p + "post_attention_layernorm.weight"));
      GPUOPT_ASSIGN_OR_RETURN(L.wq, get(p + "self_attn.q_proj.weight"));
      GPUOPT_ASSIGN_OR_RETURN(L.wk, get(p + "self_attn.k_proj.weight"));
      GPUOPT_ASSIGN_OR_RETURN(L.wv, get(p + "self_attn.v_proj.weight"));
      GPUOPT_ASSIGN_OR_RETURN(L.wo, get(p + "self_attn.o_proj.weight"));
      if (c_.qkv_bias) {
        GPUOPT_ASSIGN_OR_RETURN(L.bq, get(p + "self_attn.q_proj.bias"));
        GPUOPT_ASSIGN_OR_RETURN(L.bk, get(p + "self_attn.k_proj.bias"));
        GPUOPT_ASSIGN_OR_RETURN(L.bv, get(p + "self_attn.v_proj.bias"));
      }
      GPUOPT_ASSIGN_OR_RETURN(L.wg, get(p + "mlp.gate_proj.weight"));
      GPUOPT_ASSIGN_OR_RETURN(L.wu, get(p + "mlp.up_proj.weight"));
      GPUOPT_ASSIGN_OR_RETURN(L.wd, get(p + "mlp.down_proj.weight"));
      if (kv_dt_ == KvCacheDtype::Fp8E4m3) {
        L.k_scale = scales[static_cast<size_t>(i)].k;
        L.v_scale = scales[static_cast<size_t>(i)].v;
      }
      try {
        if (kv_dt_ == KvCacheDtype::Auto) {
          L.k_cache.assign(cache, 0.0f);
          L.v_cache.assign(cache, 0.0f);
        } else {
          L.k_q.assign(cache_bytes, 0);
          L.v_q.assign(cache_bytes, 0);
        }
      } catch (const std::bad_alloc&) {
        return Status::OutOfMemory("the CPU KV cache ({} blocks of {} tokens) does not fit in memory", num_blocks_,
                                   block_size_);
      }
    }
    inv_freq_ = c_.rope_inv_freq();
    return Status::Ok();
  }

  const LlmConfig& config() const override { return c_; }
  int64_t num_kv_blocks() const override { return num_blocks_; }
  int block_size() const override { return block_size_; }

  int64_t decode_bytes(int batch, int64_t context) const override {
    // Everything is f32 here.
    int64_t params = c_.num_params();
    if (!c_.tie_word_embeddings) params -= c_.vocab_size * c_.hidden_size;
    return params * 4 + static_cast<int64_t>(batch) * context * kv_cache_bytes_per_token(c_, kv_dt_, DType::F32);
  }

  Status step(const StepBatch& b, std::vector<float>* logits) override;
  Status hidden_states(const StepBatch& b, std::vector<float>* out) override;

 private:
  // Every layer, then the final norm of each sampling sequence's last token: [*n, hidden].
  Status forward(const StepBatch& b, std::vector<float>* normed, int64_t* n);
  Status check(const StepBatch& b) const;
  void attention(const Layer& L, const StepBatch& b, const std::vector<int64_t>& pos, const float* qkv,
                 float* out) const;

  LlmConfig c_;
  RunnerOptions opts_;
  int block_size_ = 16;
  int64_t num_blocks_ = 0;
  KvCacheDtype kv_dt_ = KvCacheDtype::Auto;
  std::vector<float> embed_, norm_, lm_head_;
  std::vector<Layer> layers_;
  std::vector<double> inv_freq_;
};

Status CpuRunner::check(const StepBatch& b) const {
  size_t total = 0;
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    const StepSeq& q = b.seqs[s];
    if (q.num_tokens <= 0 || q.start_pos < 0 || !q.block_table)
      return Status::InvalidArgument("step: sequence {} has {} tokens at position {}{}", s, q.num_tokens, q.start_pos,
                                     q.block_table ? "" : " and no block table");
    const int64_t end = q.start_pos + q.num_tokens;
    if (static_cast<int64_t>(q.block_table->size()) * block_size_ < end)
      return Status::InvalidArgument("step: sequence {}'s {} blocks do not cover position {}", s, q.block_table->size(),
                                     end - 1);
    for (int64_t blk = 0; blk < (end + block_size_ - 1) / block_size_; ++blk) {
      const int32_t id = (*q.block_table)[static_cast<size_t>(blk)];
      if (id < 0 || id >= num_blocks_)
        return Status::InvalidArgument("step: sequence {} names block {} of {}", s, id, num_blocks_);
    }
    total += static_cast<size_t>(q.num_tokens);
  }
  if (total != b.tokens.size())
    return Status::InvalidArgument("step: the sequences hold {} tokens but {} were given", total, b.tokens.size());
  for (int32_t t : b.tokens)
    if (t < 0 || t >= c_.vocab_size)
      return Status::InvalidArgument("step: token id {} is not in 0..{}", t, c_.vocab_size - 1);
  return Status::Ok();
}

// Causal (and, for Mistral, windowed) attention of every token of the step over its sequence's
// cached keys, GQA: head h reads kv head h / (heads / kv_heads). Softmax in f32 over the visible
// positions, as transformers' eager attention does.
void CpuRunner::attention(const Layer& L, const StepBatch& b, const std::vector<int64_t>& pos, const float* qkv,
                          float* out) const {
  const int64_t H = c_.num_heads, KV = c_.num_kv_heads, D = c_.head_dim, group = H / KV;
  const int64_t row = (H + 2 * KV) * D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::vector<std::pair<size_t, int64_t>> tok_seq;  // token index -> (seq, position)
  for (size_t s = 0, t = 0; s < b.seqs.size(); ++s)
    for (int32_t i = 0; i < b.seqs[s].num_tokens; ++i, ++t) tok_seq.push_back({s, pos[t]});
  const int64_t T = static_cast<int64_t>(tok_seq.size());
  parallel_for(T * H, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> score, kt(static_cast<size_t>(D)), vt(static_cast<size_t>(D));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / H, h = i % H, kvh = h / group;
      const auto [s, p] = tok_seq[static_cast<size_t>(t)];
      const std::vector<int32_t>& table = *b.seqs[s].block_table;
      const int64_t lo = c_.sliding_window > 0 ? std::max<int64_t>(0, p - c_.sliding_window + 1) : 0;
      const float* q = qkv + t * row + h * D;
      score.resize(static_cast<size_t>(p - lo + 1));
      float mx = -INFINITY;
      auto slot = [&](int64_t j) {
        const int64_t blk = table[static_cast<size_t>(j / block_size_)];
        return static_cast<size_t>(((blk * block_size_ + j % block_size_) * KV + kvh) * D);
      };
      for (int64_t j = lo; j <= p; ++j) {
        const float* k = kv_load(kv_dt_, L.k_cache, L.k_q, L.k_scale, slot(j), D, kt.data());
        const float v = dot(q, k, D) * scale;
        score[static_cast<size_t>(j - lo)] = v;
        mx = std::max(mx, v);
      }
      float sum = 0;
      for (float& v : score) sum += v = std::exp(v - mx);
      float* o = out + t * H * D + h * D;
      std::fill(o, o + D, 0.0f);
      for (int64_t j = lo; j <= p; ++j) {
        const float w = score[static_cast<size_t>(j - lo)] / sum;
        const float* v = kv_load(kv_dt_, L.v_cache, L.v_q, L.v_scale, slot(j), D, vt.data());
        for (int64_t d = 0; d < D; ++d) o[d] += w * v[d];
      }
    }
  });
}

Status CpuRunner::step(const StepBatch& b, std::vector<float>* logits) {
  std::vector<float> ln;
  int64_t n = 0;
  GPUOPT_RETURN_IF_ERROR(forward(b, &ln, &n));
  logits->assign(static_cast<size_t>(n * c_.vocab_size), 0.0f);
  linear(ln.data(), n, c_.hidden_size, c_.tie_word_embeddings ? embed_ : lm_head_, nullptr, c_.vocab_size,
         logits->data());
  return Status::Ok();
}

Status CpuRunner::hidden_states(const StepBatch& b, std::vector<float>* out) {
  int64_t n = 0;
  return forward(b, out, &n);
}

Status CpuRunner::forward(const StepBatch& b, std::vector<float>* normed, int64_t* n_out) {
  GPUOPT_RETURN_IF_ERROR(check(b));
  const int64_t T = static_cast<int64_t>(b.tokens.size()), Hd = c_.hidden_size, D = c_.head_dim;
  const int64_t H = c_.num_heads, KV = c_.num_kv_heads, I = c_.intermediate_size;
  const int64_t qd = H * D, kvd = KV * D, row = qd + 2 * kvd;
  std::vector<int64_t> pos;
  pos.reserve(static_cast<size_t>(T));
  for (const StepSeq& s : b.seqs)
    for (int32_t i = 0; i < s.num_tokens; ++i) pos.push_back(s.start_pos + i);

  std::vector<float> x(static_cast<size_t>(T * Hd)), xn(x.size()), qkv(static_cast<size_t>(T * row));
  std::vector<float> tmp(static_cast<size_t>(T * std::max(qd, kvd))), attn(static_cast<size_t>(T * qd));
  std::vector<float> g(static_cast<size_t>(T * I)), u(g.size()), proj(x.size());
  for (int64_t t = 0; t < T; ++t)
    std::memcpy(&x[static_cast<size_t>(t * Hd)], &embed_[static_cast<size_t>(b.tokens[static_cast<size_t>(t)] * Hd)],
                static_cast<size_t>(Hd) * 4);
  // cos/sin per token and frequency, from angles in double (transformers computes them in f32;
  // the difference is far below the f32 logits' own rounding at the positions we serve).
  const int64_t half = D / 2;
  std::vector<float> cs(static_cast<size_t>(T * half)), sn(cs.size());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(pos[static_cast<size_t>(t)]) * inv_freq_[static_cast<size_t>(i)];
      cs[static_cast<size_t>(t * half + i)] = static_cast<float>(std::cos(a));
      sn[static_cast<size_t>(t * half + i)] = static_cast<float>(std::sin(a));
    }
  auto rope = [&](float* v, int64_t t) {  // rotate_half: pairs (i, i + D/2)
    for (int64_t i = 0; i < half; ++i) {
      const float c = cs[static_cast<size_t>(t * half + i)], s = sn[static_cast<size_t>(t * half + i)];
      const float a = v[i], bb = v[i + half];
      v[i] = a * c - bb * s;
      v[i + half] = bb * c + a * s;
    }
  };
  std::vector<int64_t> slots(static_cast<size_t>(T));
  for (size_t s = 0, t = 0; s < b.seqs.size(); ++s)
    for (int32_t i = 0; i < b.seqs[s].num_tokens; ++i, ++t) {
      const int64_t p = pos[t];
      slots[t] = static_cast<int64_t>((*b.seqs[s].block_table)[static_cast<size_t>(p / block_size_)]) * block_size_ +
                 p % block_size_;
    }

  const auto& hook = opts_.activation_hook;
  for (size_t li = 0; li < layers_.size(); ++li) {
    Layer& L = layers_[li];
    const auto layer = static_cast<int64_t>(li);
    rms_norm(x.data(), T, Hd, L.ln1, c_.rms_norm_eps, xn.data());
    if (hook) hook(layer, "attn_in", xn.data(), T, Hd);
    // q | k | v per token, as the fused layout of the CUDA kernels.
    auto project = [&](const std::vector<float>& w, const std::vector<float>& bias, int64_t n, int64_t col) {
      linear(xn.data(), T, Hd, w, bias.empty() ? nullptr : &bias, n, tmp.data());
      for (int64_t t = 0; t < T; ++t)
        std::memcpy(&qkv[static_cast<size_t>(t * row + col)], &tmp[static_cast<size_t>(t * n)],
                    static_cast<size_t>(n) * 4);
    };
    project(L.wq, L.bq, qd, 0);
    project(L.wk, L.bk, kvd, qd);
    project(L.wv, L.bv, kvd, qd + kvd);
    for (int64_t t = 0; t < T; ++t) {
      float* r = &qkv[static_cast<size_t>(t * row)];
      for (int64_t h = 0; h < H + KV; ++h) rope(r + h * D, t);  // q heads then k heads
      const size_t dst = static_cast<size_t>(slots[static_cast<size_t>(t)] * kvd);
      kv_store(kv_dt_, L.k_cache, L.k_q, L.k_scale, dst, r + qd, kvd);
      kv_store(kv_dt_, L.v_cache, L.v_q, L.v_scale, dst, r + qd + kvd, kvd);
    }
    attention(L, b, pos, qkv.data(), attn.data());
    if (hook) hook(layer, "o_in", attn.data(), T, qd);
    linear(attn.data(), T, qd, L.wo, nullptr, Hd, proj.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
    rms_norm(x.data(), T, Hd, L.ln2, c_.rms_norm_eps, xn.data());
    if (hook) hook(layer, "mlp_in", xn.data(), T, Hd);
    linear(xn.data(), T, Hd, L.wg, nullptr, I, g.data());
    linear(xn.data(), T, Hd, L.wu, nullptr, I, u.data());
    for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    if (hook) hook(layer, "down_in", g.data(), T, I);
    linear(g.data(), T, I, L.wd, nullptr, Hd, proj.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
  }

  // The last token of each sampling sequence: final norm, LM head.
  std::vector<float> last;
  int64_t n = 0;
  for (size_t s = 0, t = 0; s < b.seqs.size(); t += static_cast<size_t>(b.seqs[s].num_tokens), ++s) {
    if (!b.seqs[s].sample) continue;
    const size_t r = t + static_cast<size_t>(b.seqs[s].num_tokens) - 1;
    last.insert(last.end(), x.begin() + static_cast<std::ptrdiff_t>(r * Hd),
                x.begin() + static_cast<std::ptrdiff_t>((r + 1) * Hd));
    ++n;
  }
  normed->assign(last.size(), 0.0f);
  rms_norm(last.data(), n, Hd, norm_, c_.rms_norm_eps, normed->data());
  *n_out = n;
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<ModelRunner>> make_cpu_runner(const LlmConfig& cfg, const Checkpoint& ckpt,
                                                     const RunnerOptions& opts) {
  auto r = std::make_unique<CpuRunner>(cfg, opts);
  GPUOPT_RETURN_IF_ERROR(r->init(ckpt));
  return std::unique_ptr<ModelRunner>(std::move(r));
}

}  // namespace gpuopt::llm
