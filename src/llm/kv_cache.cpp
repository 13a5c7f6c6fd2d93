// BlockAllocator: a free list plus reference counts. Blocks are handed out lowest id first so a
// fresh cache fills from the start (easier to read in dumps, and deterministic for the tests).
#include "llm/kv_cache.h"

#include <algorithm>

#include "core/status.h"

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

}  // namespace gpuopt::llm
