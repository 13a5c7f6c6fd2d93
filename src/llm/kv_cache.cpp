// BlockAllocator: a free list plus reference counts. Blocks are handed out lowest id first so a
// fresh cache fills from the start (easier to read in dumps, and deterministic for the tests).
#include "llm/kv_cache.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/status.h"
#include "llm/quantized.h"

namespace gpuopt::llm {

BlockAllocator::BlockAllocator(int32_t num_blocks) : num_blocks_(std::max<int32_t>(num_blocks, 0)) {
  free_.reserve(static_cast<size_t>(num_blocks_));
  for (int32_t b = num_blocks_ - 1; b >= 0; --b) free_.push_back(b);  // back() is the next one
  refs_.assign(static_cast<size_t>(num_blocks_), 0);
}

int32_t BlockAllocator::allocate() {
  if (free_.empty()) return -1;
  const int32_t b = free_.back();
  free_.pop_back();
  refs_[static_cast<size_t>(b)] = 1;
  return b;
}

void BlockAllocator::add_ref(int32_t block) {
  GPUOPT_ASSERT(block >= 0 && block < num_blocks_ && refs_[static_cast<size_t>(block)] > 0,
                "add_ref of block {} that is not allocated", block);
  ++refs_[static_cast<size_t>(block)];
}

void BlockAllocator::release(int32_t block) {
  GPUOPT_ASSERT(block >= 0 && block < num_blocks_ && refs_[static_cast<size_t>(block)] > 0,
                "release of block {} that is not allocated", block);
  if (--refs_[static_cast<size_t>(block)] == 0) free_.push_back(block);
}

bool BlockAllocator::grow(std::vector<int32_t>& table, int64_t num_tokens, int block_size) {
  GPUOPT_ASSERT(block_size > 0);
  const int64_t need = (num_tokens + block_size - 1) / block_size - static_cast<int64_t>(table.size());
  if (need <= 0) return true;
  if (need > static_cast<int64_t>(free_.size())) return false;
  for (int64_t i = 0; i < need; ++i) table.push_back(allocate());
  return true;
}

void BlockAllocator::release(std::vector<int32_t>& table) {
  for (int32_t b : table) release(b);
  table.clear();
}

Result<KvCacheDtype> parse_kv_cache_dtype(const std::string& s) {
  if (s == "auto") return KvCacheDtype::Auto;
  if (s == "fp16") return KvCacheDtype::F16;
  if (s == "fp8" || s == "fp8_e4m3") return KvCacheDtype::Fp8E4m3;
  return Status::InvalidArgument("KV cache dtype '{}' is not one of auto, fp16, fp8, fp8_e4m3", s);
}

const char* kv_cache_dtype_name(KvCacheDtype d) {
  return d == KvCacheDtype::Auto ? "auto" : d == KvCacheDtype::F16 ? "fp16" : "fp8_e4m3";
}

int64_t kv_element_bytes(KvCacheDtype d, DType compute) {
  return d == KvCacheDtype::Fp8E4m3 ? 1 : d == KvCacheDtype::F16 ? 2 : static_cast<int64_t>(dtype_size(compute));
}

int64_t kv_cache_bytes_per_token(const LlmConfig& cfg, KvCacheDtype d, DType compute) {
  return 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * kv_element_bytes(d, compute);
}

Result<std::vector<KvScales>> kv_cache_scales(const LlmConfig& cfg, const Checkpoint& ck) {
  auto one = [&](const std::string& name) -> Result<float> {
    const WeightView* w = ck.find(name);
    if (!w) return 1.0f;
    const std::vector<float> v = weight_to_f32(*w);
    if (v.size() != 1 || !(v[0] > 0.0f) || !std::isfinite(v[0]))
      return Status::InvalidArgument("checkpoint: '{}' must be one positive finite scale ({} values{})", name, v.size(),
                                     v.size() == 1 ? fmt::format(", {}", v[0]) : std::string());
    return v[0];
  };
  std::vector<KvScales> out(static_cast<size_t>(cfg.num_layers));
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.self_attn.", l);
    GPUOPT_ASSIGN_OR_RETURN(out[static_cast<size_t>(l)].k, one(p + "k_scale"));
    GPUOPT_ASSIGN_OR_RETURN(out[static_cast<size_t>(l)].v, one(p + "v_scale"));
  }
  return out;
}

}  // namespace gpuopt::llm
