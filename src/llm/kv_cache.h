// The paged KV cache's bookkeeping (host side; the storage lives with the runner).
//
// Layout shared by every runner: per layer, K and V each [num_blocks, block_size, num_kv_heads,
// head_dim] in the KV dtype. A sequence's token at position p lives in block
// block_table[p / block_size], slot p % block_size. Blocks are reference counted so the serving
// scheduler can share prefix blocks; block ids are int32.
//
//   BlockAllocator alloc(num_blocks);
//   std::vector<int32_t> table;
//   if (!alloc.grow(table, context_len, block_size)) /* out of blocks: queue or preempt */;
//   ...
//   alloc.release(table);
//
// The element type (--kv-cache-dtype, vLLM's names): `auto` the runner's compute dtype, `fp16`,
// or `fp8` (alias `fp8_e4m3`): e4m3 codes of K / k_scale and V / v_scale, one scale per layer
// (the checkpoint's self_attn.k_scale / v_scale when present, else 1.0).
//
//   GPUOPT_ASSIGN_OR_RETURN(KvCacheDtype kv, parse_kv_cache_dtype("fp8"));
//   int64_t per_token = kv_cache_bytes_per_token(cfg, kv, DType::F16);  // half of fp16's
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "llm/checkpoint.h"
#include "llm/config.h"

namespace gpuopt::llm {

constexpr int kDefaultBlockSize = 16;

enum class KvCacheDtype { Auto, F16, Fp8E4m3 };
// The values --kv-cache-dtype takes, for help texts and validators.
inline constexpr const char* kKvCacheDtypeNames[] = {"auto", "fp16", "fp8", "fp8_e4m3"};
// One of kKvCacheDtypeNames; anything else: InvalidArgument naming it.
Result<KvCacheDtype> parse_kv_cache_dtype(const std::string& s);
const char* kv_cache_dtype_name(KvCacheDtype d);
// Bytes of one cached K or V element (auto: the compute dtype's).
int64_t kv_element_bytes(KvCacheDtype d, DType compute);
// K and V of one token over all layers.
int64_t kv_cache_bytes_per_token(const LlmConfig& cfg, KvCacheDtype d, DType compute);
struct KvScales {
  float k = 1.0f, v = 1.0f;
};
// Per layer, the checkpoint's model.layers.N.self_attn.k_scale / v_scale (compressed-tensors'
// KV cache scales: one positive finite value each), 1.0 where absent; anything else is refused
// naming the tensor.
Result<std::vector<KvScales>> kv_cache_scales(const LlmConfig& cfg, const Checkpoint& ck);

class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);
  int32_t num_blocks() const { return num_blocks_; }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  // One block with refcount 1, or -1 when none is free.
  int32_t allocate();
  void add_ref(int32_t block);
  // Drops one reference; the block is free again at zero.
  void release(int32_t block);
  // Makes `table` hold enough blocks for `num_tokens` tokens; false (and `table` unchanged) when
  // too few blocks are free.
  bool grow(std::vector<int32_t>& table, int64_t num_tokens, int block_size);
  void release(std::vector<int32_t>& table);  // releases every block and clears the table

 private:
  int32_t num_blocks_;
  std::vector<int32_t> free_;
  std::vector<int32_t> refs_;
};

}  // namespace gpuopt::llm
