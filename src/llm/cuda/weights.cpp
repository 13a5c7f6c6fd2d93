#include "llm/cuda/weights.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "llm/cuda/weights_packed.h"
#include "llm/quantized.h"

namespace gpuopt::llm::cuda {
namespace {

constexpr size_t kAlign = 256;
constexpr size_t kChunkBytes = 32 << 20;  // per staging buffer; two per worker
constexpr unsigned kMaxWorkers = 8;

size_t align_up(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// One tensor (or part of a fused one) to land at `dst` (elements of the compute dtype).
struct Job {
  const WeightView* src = nullptr;
  char* dst = nullptr;
};
struct Chunk {
  int job = 0;
  size_t first = 0, count = 0;  // elements
};

float load_f(const void* p, DType t, size_t i) {
  switch (t) {
    case DType::F16:
      return Half::to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::BF16:
      return BFloat16::to_float(static_cast<const uint16_t*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

// Copies elements [first, first+count) of `src` (its dtype) into `dst` (dtype dt), converting
// with round-to-nearest-even when the two differ.
void convert(const WeightView& src, size_t first, size_t count, void* dst, DType dt) {
  if (src.quant) {
    // Dequantized into the compute dtype (the baseline path; the packed form stays in the
    // checkpoint for the quantized kernels).
    std::vector<float> f(count);
    dequantize(*src.quant, first, count, f.data());
    WeightView tmp;
    tmp.dtype = DType::F32;
    tmp.data = f.data();
    convert(tmp, 0, count, dst, dt);
    return;
  }
  const size_t in_sz = dtype_size(src.dtype);
  const char* s = static_cast<const char*>(src.data) + first * in_sz;
  if (src.dtype == dt) {
    std::memcpy(dst, s, count * in_sz);
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    const float f = load_f(s, src.dtype, i);
    switch (dt) {
      case DType::F16:
        static_cast<uint16_t*>(dst)[i] = Half::from_float(f);
        break;
      case DType::BF16:
        static_cast<uint16_t*>(dst)[i] = BFloat16::from_float(f);
        break;
      default:
        static_cast<float*>(dst)[i] = f;
        break;
    }
  }
}

Result<const WeightView*> need(const Checkpoint& ckpt, const std::string& name) {
  const WeightView* w = ckpt.find(name);
  if (!w) return Status::NotFound("checkpoint has no tensor '{}'", name);
  return w;
}

size_t numel(const WeightView& w) {
  size_t n = 1;
  for (int64_t d : w.shape) n *= static_cast<size_t>(d);
  return n;
}

// The packed linears: one allocation, each tensor 256-byte aligned, copied synchronously (they
// are a quarter to an eighth of the float weights' bytes).
Status upload_packed(std::vector<std::pair<HostPacked, PackedLinear*>>& packed, ModelWeights* out) {
  if (packed.empty()) return Status::Ok();
  size_t total = 0;
  for (const auto& [h, slot] : packed)
    total += align_up(h.qweight.size() * 4) + align_up(h.qzeros.size() * 4) + align_up(h.scales.size() * 2) +
             align_up(h.fp8_w.size()) + align_up(h.fp8_scale.size() * 4) + align_up(h.g_idx.size() * 4);
  GPUOPT_RETURN_IF_ERROR(out->packed_storage.allocate(total, "the packed quantized weights"));
  out->bytes += total;
  char* base = out->packed_storage.as<char>();
  size_t off = 0;
  auto put = [&](const void* src, size_t bytes) -> Result<char*> {
    char* dst = base + off;
    GPUOPT_CUDA_RETURN(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    off += align_up(bytes);
    return dst;
  };
  for (auto& [h, slot] : packed) {
    slot->N = h.N;
    slot->K = h.K;
    if (h.fp8) {
      GPUOPT_ASSIGN_OR_RETURN(char* w, put(h.fp8_w.data(), h.fp8_w.size()));
      GPUOPT_ASSIGN_OR_RETURN(char* sc, put(h.fp8_scale.data(), h.fp8_scale.size() * 4));
      slot->fp8_w = w;
      slot->fp8_scale = reinterpret_cast<const float*>(sc);
      out->max_fp8_n = std::max(out->max_fp8_n, h.N);
      out->max_fp8_k = std::max(out->max_fp8_k, h.K);
      continue;
    }
    GPUOPT_ASSIGN_OR_RETURN(char* qw, put(h.qweight.data(), h.qweight.size() * 4));
    GPUOPT_ASSIGN_OR_RETURN(char* qz, put(h.qzeros.data(), h.qzeros.size() * 4));
    GPUOPT_ASSIGN_OR_RETURN(char* sc, put(h.scales.data(), h.scales.size() * 2));
    slot->args.qweight = reinterpret_cast<const int32_t*>(qw);
    slot->args.qzeros = reinterpret_cast<const int32_t*>(qz);
    slot->args.scales = sc;
    slot->args.g_idx = nullptr;
    if (!h.g_idx.empty()) {
      GPUOPT_ASSIGN_OR_RETURN(char* gi, put(h.g_idx.data(), h.g_idx.size() * 4));
      slot->args.g_idx = reinterpret_cast<const int32_t*>(gi);
    }
    slot->args.bits = h.bits;
    slot->args.group_size = h.group_size;
    slot->args.zero_minus_one = h.zero_minus_one;
    out->max_packed_elems = std::max(out->max_packed_elems, h.N * h.K);
  }
  return Status::Ok();
}

}  // namespace

Status upload_weights(const LlmConfig& cfg, const Checkpoint& ckpt, DType dt, const LoadProgress& progress,
                      ModelWeights* out, bool pack_quantized) {
  const size_t esz = dtype_size(dt);
  // Plan: every destination region (fused parts adjacent), then one allocation.
  struct Region {
    std::vector<const WeightView*> parts;  // concatenated along rows
    void** slot = nullptr;
  };
  std::vector<Region> regions;
  std::vector<std::pair<HostPacked, PackedLinear*>> packed;
  out->layers.assign(static_cast<size_t>(cfg.num_layers), {});
  auto add = [&](std::vector<std::string> names, void** slot, PackedLinear* pslot = nullptr) -> Status {
    Region r;
    r.slot = slot;
    for (auto& n : names) {
      GPUOPT_ASSIGN_OR_RETURN(const WeightView* w, need(ckpt, n));
      r.parts.push_back(w);
    }
    HostPacked h;
    if (pack_quantized && pslot && pack_fused(r.parts, dt, &h)) {
      packed.emplace_back(std::move(h), pslot);
      return Status::Ok();
    }
    regions.push_back(std::move(r));
    return Status::Ok();
  };
  GPUOPT_RETURN_IF_ERROR(add({"model.embed_tokens.weight"}, &out->embed));
  GPUOPT_RETURN_IF_ERROR(add({"model.norm.weight"}, &out->final_norm));
  if (!cfg.tie_word_embeddings) GPUOPT_RETURN_IF_ERROR(add({"lm_head.weight"}, &out->lm_head));
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    LayerWeights& L = out->layers[static_cast<size_t>(i)];
    GPUOPT_RETURN_IF_ERROR(add({p + "input_layernorm.weight"}, &L.input_norm));
    GPUOPT_RETURN_IF_ERROR(add({p + "post_attention_layernorm.weight"}, &L.post_norm));
    GPUOPT_RETURN_IF_ERROR(add({p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
                                p + "self_attn.v_proj.weight"},
                               &L.qkv, &L.qkv_q));
    if (cfg.qkv_bias) {
      GPUOPT_RETURN_IF_ERROR(
          add({p + "self_attn.q_proj.bias", p + "self_attn.k_proj.bias", p + "self_attn.v_proj.bias"}, &L.qkv_bias));
    }
    GPUOPT_RETURN_IF_ERROR(add({p + "self_attn.o_proj.weight"}, &L.o, &L.o_q));
    GPUOPT_RETURN_IF_ERROR(add({p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}, &L.gate_up, &L.gate_up_q));
    GPUOPT_RETURN_IF_ERROR(add({p + "mlp.down_proj.weight"}, &L.down, &L.down_q));
  }
  size_t total = 0;
  for (const Region& r : regions) {
    size_t n = 0;
    for (const WeightView* w : r.parts) n += numel(*w);
    total += align_up(n * esz);
  }
  GPUOPT_RETURN_IF_ERROR(out->storage.allocate(total, "the model's weights"));
  out->bytes = total;

  std::vector<Job> jobs;
  std::vector<Chunk> chunks;
  char* base = out->storage.as<char>();
  const size_t chunk_elems = kChunkBytes / std::max<size_t>(esz, 4);  // fits either dtype
  size_t off = 0;
  for (const Region& r : regions) {
    *r.slot = base + off;
    size_t n = 0;
    for (const WeightView* w : r.parts) {
      const int j = static_cast<int>(jobs.size());
      jobs.push_back({w, base + off + n * esz});
      const size_t e = numel(*w);
      for (size_t f = 0; f < e; f += chunk_elems) chunks.push_back({j, f, std::min(chunk_elems, e - f)});
      n += e;
    }
    off += align_up(n * esz);
  }
  if (cfg.tie_word_embeddings) out->lm_head = out->embed;

  int device = 0;
  GPUOPT_CUDA_RETURN(cudaGetDevice(&device));
  const unsigned workers =
      std::max(1u, std::min({kMaxWorkers, std::thread::hardware_concurrency(), static_cast<unsigned>(chunks.size())}));
  const size_t staging = std::min(kChunkBytes, align_up(chunk_elems * esz));
  std::atomic<size_t> next{0}, done_bytes{0};
  std::mutex err_mu;
  Status err = Status::Ok();
  auto fail = [&](Status s) {
    std::lock_guard<std::mutex> lock(err_mu);
    if (err.ok()) err = std::move(s);
    next.store(chunks.size());  // the others stop at their next chunk
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto worker = [&]() {
    if (Status s = cuda_status(cudaSetDevice(device), "cudaSetDevice"); !s.ok()) return fail(s);
    cudaStream_t stream = nullptr;
    if (Status s = cuda_status(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream"); !s.ok()) {
      return fail(s);
    }
    PinnedBuffer buf[2];
    cudaEvent_t ev[2] = {nullptr, nullptr};
    bool used[2] = {false, false};
    Status s = Status::Ok();
    for (int b = 0; b < 2 && s.ok(); ++b) {
      s = buf[b].allocate(staging, "weight staging");
      if (s.ok()) s = cuda_status(cudaEventCreateWithFlags(&ev[b], cudaEventDisableTiming), "event");
    }
    for (size_t it = 0; s.ok(); ++it) {
      const size_t c = next.fetch_add(1);
      if (c >= chunks.size()) break;
      const int b = static_cast<int>(it & 1);
      // The buffer's previous copy must have left it before it is refilled.
      if (used[b]) s = cuda_status(cudaEventSynchronize(ev[b]), "waiting for a staging copy");
      if (!s.ok()) break;
      const Chunk& ch = chunks[c];
      const Job& job = jobs[static_cast<size_t>(ch.job)];
      convert(*job.src, ch.first, ch.count, buf[b].get(), dt);
      const size_t bytes = ch.count * esz;
      s = cuda_status(cudaMemcpyAsync(job.dst + ch.first * esz, buf[b].get(), bytes, cudaMemcpyHostToDevice, stream),
                      "copying weights to the GPU");
      if (s.ok()) s = cuda_status(cudaEventRecord(ev[b], stream), "event record");
      used[b] = true;
      done_bytes.fetch_add(bytes);
    }
    if (s.ok()) s = cuda_status(cudaStreamSynchronize(stream), "finishing the weight copies");
    for (cudaEvent_t e : ev)
      if (e) cudaEventDestroy(e);
    cudaStreamDestroy(stream);
    if (!s.ok()) fail(s);
  };
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < workers; ++i) pool.emplace_back(worker);
  size_t all = 0;
  for (const Chunk& c : chunks) all += c.count * esz;
  // Progress from this thread only, so the callback needs no locking.
  for (;;) {
    const size_t d = done_bytes.load();
    if (progress) progress(d, all);
    if (d >= all || next.load() >= chunks.size()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& t : pool) t.join();
  out->upload_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!err.ok()) return err;
  GPUOPT_RETURN_IF_ERROR(upload_packed(packed, out));
  if (progress) progress(all, all);
  return Status::Ok();
}

}  // namespace gpuopt::llm::cuda
