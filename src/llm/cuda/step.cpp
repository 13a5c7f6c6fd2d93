// CudaRunner's step: metadata packing, the kernel sequence, decode graphs.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "llm/cuda/cuda_runner.h"
#include "llm/cuda/quant_gemm.h"
#include "llm/kernels/llm_kernels.h"

namespace gpuopt::llm::cuda {
namespace {

constexpr int kMinGraphWidth = 16;  // blocks: decode width buckets start at 256 tokens (bs 16)

int pow2_at_least(int n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

}  // namespace

void StepLayout::place() {
  const size_t t = static_cast<size_t>(T), s = static_cast<size_t>(S);
  tokens = 0;
  positions = t;
  slots = 2 * t;
  query_start = 3 * t;
  context_lens = query_start + s + 1;
  sample_rows = context_lens + s;
  block_tables = sample_rows + s;
  total = block_tables + s * static_cast<size_t>(W);
}

Status CudaRunner::check_batch(const StepBatch& b) const {
  if (b.seqs.empty()) return Status::InvalidArgument("step: no sequences");
  if (static_cast<int64_t>(b.seqs.size()) > opts_.max_batch)
    return Status::InvalidArgument("step: {} sequences, more than max_batch {}", b.seqs.size(), opts_.max_batch);
  int64_t T = 0;
  const int bs = opts_.block_size;
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    const StepSeq& s = b.seqs[i];
    if (s.num_tokens < 1 || s.start_pos < 0)
      return Status::InvalidArgument("step: sequence {} has {} tokens at position {}", i, s.num_tokens, s.start_pos);
    const int64_t end = s.start_pos + s.num_tokens;
    if (end > max_seq_len_)
      return Status::InvalidArgument("step: sequence {} reaches {} tokens, more than the {} this runner serves", i, end,
                                     max_seq_len_);
    const int64_t need = (end + bs - 1) / bs;
    if (!s.block_table || static_cast<int64_t>(s.block_table->size()) < need)
      return Status::InvalidArgument("step: sequence {}'s block table covers fewer than {} tokens", i, end);
    for (int64_t j = 0; j < need; ++j) {
      const int32_t blk = (*s.block_table)[static_cast<size_t>(j)];
      if (blk < 0 || blk >= num_blocks_)
        return Status::InvalidArgument("step: sequence {} names KV block {} (cache has {})", i, blk, num_blocks_);
    }
    T += s.num_tokens;
  }
  if (T != static_cast<int64_t>(b.tokens.size()))
    return Status::InvalidArgument("step: {} tokens given for {} in the sequences", b.tokens.size(), T);
  if (T > max_tokens_) return Status::InvalidArgument("step: {} tokens, more than max_step_tokens {}", T, max_tokens_);
  for (int32_t t : b.tokens)
    if (t < 0 || t >= cfg_.vocab_size)
      return Status::InvalidArgument("step: token id {} outside the vocabulary ({})", t, cfg_.vocab_size);
  return Status::Ok();
}

Status CudaRunner::pack(const StepBatch& b, StepLayout* L) {
  const int bs = opts_.block_size;
  const int S_real = static_cast<int>(b.seqs.size());
  const int64_t T_real = static_cast<int64_t>(b.tokens.size());
  L->decode = std::all_of(b.seqs.begin(), b.seqs.end(), [](const StepSeq& s) { return s.num_tokens == 1; });
  int need_w = 1, max_q = 0;
  int64_t max_ctx = 0;
  for (const StepSeq& s : b.seqs) {
    const int64_t end = s.start_pos + s.num_tokens;
    need_w = std::max(need_w, static_cast<int>((end + bs - 1) / bs));
    max_q = std::max(max_q, s.num_tokens);
    max_ctx = std::max(max_ctx, end);
  }
  if (L->decode) {
    // Padded to the buckets whether or not graphs are on: eager and graph steps then run the very
    // same launches (same GEMM shapes and algorithms) and agree to the bit.
    L->S = bucket_batch(S_real);
    L->T = L->S;
    L->W = std::min(max_width_, std::max(kMinGraphWidth, pow2_at_least(need_w)));
    L->n_sample = L->S;
    L->max_query_len = 1;
    L->max_context = static_cast<int64_t>(L->W) * bs;
  } else {
    L->S = S_real;
    L->T = T_real;
    L->W = need_w;
    L->n_sample =
        static_cast<int>(std::count_if(b.seqs.begin(), b.seqs.end(), [](const StepSeq& s) { return s.sample; }));
    L->max_query_len = max_q;
    L->max_context = max_ctx;
  }
  L->place();
  int32_t* m = meta_host_.as<int32_t>();
  int32_t* tok = m + L->tokens;
  int32_t* pos = m + L->positions;
  int32_t* slot = m + L->slots;
  int32_t* qs = m + L->query_start;
  int32_t* ctx = m + L->context_lens;
  int32_t* srow = m + L->sample_rows;
  int32_t* bt = m + L->block_tables;
  std::memcpy(tok, b.tokens.data(), static_cast<size_t>(T_real) * 4);
  int32_t t = 0;
  int ns = 0;
  for (int s = 0; s < S_real; ++s) {
    const StepSeq& q = b.seqs[static_cast<size_t>(s)];
    const std::vector<int32_t>& table = *q.block_table;
    qs[s] = t;
    for (int32_t i = 0; i < q.num_tokens; ++i, ++t) {
      const int64_t p = q.start_pos + i;
      pos[t] = static_cast<int32_t>(p);
      slot[t] = table[static_cast<size_t>(p / bs)] * bs + static_cast<int32_t>(p % bs);
    }
    ctx[s] = static_cast<int32_t>(q.start_pos + q.num_tokens);
    if (q.sample) srow[ns++] = t - 1;
    const size_t need = static_cast<size_t>((ctx[s] + bs - 1) / bs);
    int32_t* row = bt + static_cast<size_t>(s) * static_cast<size_t>(L->W);
    std::memcpy(row, table.data(), need * 4);
    std::fill(row + need, row + L->W, 0);  // never read: past the context
  }
  // Padding (decode buckets): rows owned by no sequence, slots that write nothing.
  for (int64_t i = T_real; i < L->T; ++i) {
    tok[i] = 0;
    pos[i] = 0;
    slot[i] = -1;
  }
  for (int s = S_real; s <= L->S; ++s) qs[s] = t;
  for (int s = S_real; s < L->S; ++s) {
    ctx[s] = 0;
    std::fill(bt + static_cast<size_t>(s) * static_cast<size_t>(L->W),
              bt + static_cast<size_t>(s + 1) * static_cast<size_t>(L->W), 0);
  }
  for (int i = ns; i < L->n_sample; ++i) srow[i] = 0;
  return Status::Ok();
}

Status CudaRunner::linear(const PackedLinear& q, const void* x, const void* w, const void* bias, void* y, int64_t T,
                          int64_t N, int64_t K, cudaStream_t s, bool tune) {
  if (!q.valid()) return gemm_.linear(x, w, bias, y, T, N, K, dt_, dt_, s, tune);
  if (!q.fp8()) return quant_linear(gemm_, x, q.args, bias, y, T, N, K, dt_, quant_scratch_.get(), s, &gemv_split_);
  for (int64_t t0 = 0; t0 < T; t0 += kFp8Rows) {
    Fp8LinearArgs a;
    a.T = std::min<int64_t>(kFp8Rows, T - t0);
    a.x = static_cast<const char*>(x) + t0 * K * static_cast<int64_t>(esz_);
    a.y = static_cast<char*>(y) + t0 * N * static_cast<int64_t>(esz_);
    a.w = q.fp8_w;
    a.w_scale = q.fp8_scale;
    a.per_channel = true;
    a.bias = bias;
    a.N = N;
    a.K = K;
    a.dt = dt_;
    a.xq = fp8_xq_.get();
    a.row_scale = fp8_row_scale_.as<float>();
    a.acc = fp8_acc_.as<float>();
    GPUOPT_RETURN_IF_ERROR(fp8_linear(fp8_, a, &fp8_split_, s));
  }
  return Status::Ok();
}

Status CudaRunner::forward(const StepLayout& L, bool tune) {
  const LlmConfig& c = cfg_;
  const int32_t* m = meta_.as<int32_t>();
  const int64_t T = L.T, H = c.hidden_size, I = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  cudaStream_t s = stream_;
  const bool prof = prof_.enabled() && !capturing_ && L.decode;  // decode steps only
  const int64_t es = static_cast<int64_t>(esz_);
  auto mark = [&](const char* op, int64_t bytes = 0) {
    if (prof) prof_.mark(op, s, bytes);
  };
  if (prof) prof_.begin(s);
  embedding(m + L.tokens, weights_.embed, residual_.get(), T, H, dt_, s);
  mark("embedding");
  PagedAttentionArgs a;
  a.q = qkv_.get();
  a.q_stride = qkv_dim_;
  a.out = attn_.get();
  a.query_start = m + L.query_start;
  a.context_lens = m + L.context_lens;
  a.block_tables = m + L.block_tables;
  a.num_seqs = L.S;
  a.max_blocks_per_seq = L.W;
  a.max_query_len = L.max_query_len;
  a.max_context = L.max_context;
  a.num_heads = static_cast<int>(c.num_heads);
  a.num_kv_heads = static_cast<int>(c.num_kv_heads);
  a.head_dim = static_cast<int>(c.head_dim);
  a.block_size = opts_.block_size;
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  a.sliding_window = static_cast<int>(c.sliding_window);
  a.dt = dt_;
  a.kv_dt = kv_dt_;
  a.workspace = attn_ws_.get();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = weights_.layers[static_cast<size_t>(l)];
    // Layer 0 normalizes the embedding (already the residual); later layers first add the
    // previous MLP's output into the residual.
    rms_norm(l == 0 ? residual_.get() : x_.get(), l == 0 ? nullptr : residual_.get(), w.input_norm, normed_.get(), T, H,
             eps, dt_, s);
    mark("rms_norm");
    GPUOPT_RETURN_IF_ERROR(linear(w.qkv_q, normed_.get(), w.qkv, w.qkv_bias, qkv_.get(), T, qkv_dim_, H, s, tune));
    mark("qkv_gemm", qkv_dim_ * H * es);
    rope_and_cache(qkv_.get(), m + L.positions, inv_freq_.as<float>(), m + L.slots, k_cache_[static_cast<size_t>(l)],
                   v_cache_[static_cast<size_t>(l)], T, a.num_heads, a.num_kv_heads, a.head_dim, a.block_size, dt_, kv_dt_,
                   s, kv_scales_[static_cast<size_t>(l)].k, kv_scales_[static_cast<size_t>(l)].v);
    mark("rope_cache");
    a.k_cache = k_cache_[static_cast<size_t>(l)];
    a.k_scale = kv_scales_[static_cast<size_t>(l)].k;
    a.v_scale = kv_scales_[static_cast<size_t>(l)].v;
    a.v_cache = v_cache_[static_cast<size_t>(l)];
    paged_attention(a, s);
    mark("attention");
    GPUOPT_RETURN_IF_ERROR(linear(w.o_q, attn_.get(), w.o, nullptr, x_.get(), T, H, q_dim_, s, tune));
    mark("o_gemm", H * q_dim_ * es);
    rms_norm(x_.get(), residual_.get(), w.post_norm, normed_.get(), T, H, eps, dt_, s);
    mark("rms_norm");
    GPUOPT_RETURN_IF_ERROR(linear(w.gate_up_q, normed_.get(), w.gate_up, nullptr, gate_up_.get(), T, 2 * I, H, s, tune));
    mark("gate_up_gemm", 2 * I * H * es);
    silu_mul(gate_up_.get(), act_.get(), T, I, dt_, s);
    mark("silu_mul");
    GPUOPT_RETURN_IF_ERROR(linear(w.down_q, act_.get(), w.down, nullptr, x_.get(), T, H, I, s, tune));
    mark("down_gemm", H * I * es);
  }
  if (L.n_sample > 0) {
    // Only the sampled rows go through the final norm and the LM head.
    gather_rows(x_.get(), m + L.sample_rows, gx_.get(), L.n_sample, H, dt_, s);
    gather_rows(residual_.get(), m + L.sample_rows, gres_.get(), L.n_sample, H, dt_, s);
    rms_norm(gx_.get(), gres_.get(), weights_.final_norm, gnorm_.get(), L.n_sample, H, eps, dt_, s);
    mark("final_norm");
    GPUOPT_RETURN_IF_ERROR(gemm_.linear(gnorm_.get(), weights_.lm_head, nullptr, logits_.get(), L.n_sample,
                                        c.vocab_size, H, dt_, DType::F32, s, tune));
    mark("lm_head", c.vocab_size * H * es);
  }
  if (prof) prof_.end();
  return cuda_status(cudaGetLastError(), "launching the step's kernels");
}

Status CudaRunner::run_decode_graph(const StepLayout& L) {
  const std::pair<int, int> key{L.S, L.W};
  auto it = graphs_.find(key);
  if (it != graphs_.end()) return cuda_status(cudaGraphLaunch(it->second, stream_), "replaying a decode graph");
  // First use of this bucket: an eager step (which also times the GEMM candidates) computes it;
  // the capture that follows records the same launches for the next steps.
  GPUOPT_RETURN_IF_ERROR(forward(L, true));
  GPUOPT_CUDA_RETURN(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
  Status st = forward(L, false);
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (st.ok()) st = cuda_status(end, "capturing a decode graph");
  cudaGraphExec_t exec = nullptr;
  if (st.ok()) st = cuda_status(cudaGraphInstantiate(&exec, graph, 0), "instantiating a decode graph");
  if (graph) cudaGraphDestroy(graph);
  if (!st.ok()) {
    (void)cudaGetLastError();
    return st.with_context(fmt::format("decode graph for batch {} width {}", L.S, L.W));
  }
  graphs_.emplace(key, exec);
  return Status::Ok();
}

Status CudaRunner::launch(const StepBatch& b) {
  GPUOPT_CUDA_RETURN(cudaSetDevice(opts_.device_index));
  GPUOPT_RETURN_IF_ERROR(check_batch(b));
  StepLayout L;
  GPUOPT_RETURN_IF_ERROR(pack(b, &L));
  GPUOPT_CUDA_RETURN(cudaMemcpyAsync(meta_.get(), meta_host_.get(), L.total * 4, cudaMemcpyHostToDevice, stream_));
  if (L.decode && opts_.cuda_graphs) return run_decode_graph(L);
  return forward(L, L.decode);
}

Status CudaRunner::step(const StepBatch& b, std::vector<float>* logits) {
  GPUOPT_RETURN_IF_ERROR(launch(b));
  const size_t n_out =
      static_cast<size_t>(std::count_if(b.seqs.begin(), b.seqs.end(), [](const StepSeq& s) { return s.sample; }));
  const size_t bytes = n_out * static_cast<size_t>(cfg_.vocab_size) * 4;
  if (bytes) {
    GPUOPT_CUDA_RETURN(cudaMemcpyAsync(logits_host_.get(), logits_.get(), bytes, cudaMemcpyDeviceToHost, stream_));
  }
  GPUOPT_CUDA_RETURN(cudaStreamSynchronize(stream_));
  logits->resize(n_out * static_cast<size_t>(cfg_.vocab_size));
  if (bytes) std::memcpy(logits->data(), logits_host_.get(), bytes);
  return Status::Ok();
}

Status CudaRunner::hidden_states(const StepBatch& b, std::vector<float>* out) {
  GPUOPT_RETURN_IF_ERROR(launch(b));
  // The step's final norm already wrote the sampled rows' hidden states (gnorm_, the LM head's
  // input; decode buckets put the real rows first): copied down and widened to f32.
  const size_t n = static_cast<size_t>(std::count_if(b.seqs.begin(), b.seqs.end(), [](const StepSeq& s) { return s.sample; }));
  const size_t H = static_cast<size_t>(cfg_.hidden_size);
  std::vector<unsigned char> raw(n * H * esz_);
  if (!raw.empty()) {
    GPUOPT_CUDA_RETURN(cudaMemcpyAsync(raw.data(), gnorm_.get(), raw.size(), cudaMemcpyDeviceToHost, stream_));
  }
  GPUOPT_CUDA_RETURN(cudaStreamSynchronize(stream_));
  out->resize(n * H);
  for (size_t i = 0; i < n * H; ++i) {
    if (dt_ == DType::F32) {
      std::memcpy(&(*out)[i], raw.data() + 4 * i, 4);
    } else {
      uint16_t v;
      std::memcpy(&v, raw.data() + 2 * i, 2);
      (*out)[i] = dt_ == DType::F16 ? Half::to_float(v) : BFloat16::to_float(v);
    }
  }
  return Status::Ok();
}

}  // namespace gpuopt::llm::cuda
