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
#pragma once

#include <cstdint>
#include <vector>

namespace gpuopt::llm {

constexpr int kDefaultBlockSize = 16;

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
