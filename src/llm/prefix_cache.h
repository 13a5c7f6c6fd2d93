// The KV blocks of the serving engine, with prefix caching: a full block (block_size tokens whose
// K/V are written) is named by a chained hash of (its parent block's hash, its token ids), so equal
// prefixes of different requests name the same blocks and share them by reference count. The cache
// holds one reference of its own on every block it names; when no sequence uses a cached block
// any more it stays in the cache, evictable, and is reused (least recently used first) only when a
// sequence needs a block and none is free.
//
//   BlockAllocator alloc(num_blocks);
//   PrefixCache cache(alloc, block_size, /*enabled=*/true);
//   std::vector<uint64_t> hashes;                      // the sequence's full blocks' hashes
//   std::vector<int32_t> table = cache.match(tokens, &hashes);   // shared prefix (refs taken)
//   int32_t b = cache.allocate();                      // a new block (evicts when needed), -1: none
//   cache.insert(hashes, tokens, table);               // after K/V of more full blocks are written
//   cache.release(table);                              // the sequence is done or preempted
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "llm/kv_cache.h"

namespace gpuopt::llm {

class PrefixCache {
 public:
  PrefixCache(BlockAllocator& alloc, int block_size, bool enabled);
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  bool enabled() const { return enabled_; }
  int block_size() const { return block_size_; }
  // Blocks a sequence can get: free ones plus cached ones no sequence uses.
  int32_t num_available() const { return alloc_.num_free() + num_evictable(); }
  int32_t num_evictable() const { return static_cast<int32_t>(lru_.size()); }
  int32_t num_used() const { return alloc_.num_blocks() - num_available(); }  // held by sequences
  int32_t num_cached() const { return static_cast<int32_t>(by_hash_.size()); }

  // The longest prefix of `tokens` made of cached full blocks, at most (tokens.size() - 1) /
  // block_size of them so that the last token is always computed (its logits are needed). Each
  // returned block gets a reference; `hashes` receives their chained hashes (its size equals the
  // returned table's). Disabled: an empty table.
  std::vector<int32_t> match(const std::vector<int64_t>& tokens, std::vector<uint64_t>* hashes);
  // The same lookup through a callback `token(i)`, for sequences stored in two pieces.
  template <class TokenAt>
  std::vector<int32_t> match_fn(int64_t num_tokens, TokenAt token, std::vector<uint64_t>* hashes);

  // A fresh block with one reference: a free one, else the least recently used evictable one
  // (dropped from the cache); -1 when neither exists.
  int32_t allocate();
  // Grows `table` to cover `num_tokens` tokens; false (table unchanged) when too few blocks.
  bool grow(std::vector<int32_t>& table, int64_t num_tokens);

  // Names the sequence's blocks that became full: `hashes` holds the hashes of table[0 ..
  // hashes.size()); blocks hashes.size() .. num_full-1 (their tokens token(i), i < num_full *
  // block_size) are hashed, appended to `hashes` and cached unless that hash already names another
  // block (then this copy stays private to the sequence).
  template <class TokenAt>
  void insert_fn(std::vector<uint64_t>& hashes, const std::vector<int32_t>& table, int64_t num_full, TokenAt token);
  void insert(std::vector<uint64_t>& hashes, const std::vector<int64_t>& tokens, const std::vector<int32_t>& table);

  // Drops the sequence's references (the table is cleared); cached blocks left unused become
  // evictable, the table's tail first (a prefix's end is worth less than its start).
  void release(std::vector<int32_t>& table);

  // Hit accounting (vLLM's gpu_prefix_cache_queries / hits, in tokens), by the caller at admission.
  void record(int64_t queried_tokens, int64_t hit_tokens) {
    queries_ += queried_tokens;
    hits_ += hit_tokens;
  }
  int64_t queries() const { return queries_; }
  int64_t hits() const { return hits_; }

  static uint64_t hash_block(uint64_t parent, const int64_t* tokens, int n);

 private:
  struct Entry {
    int32_t block = -1;
    uint64_t parent = 0;
    std::vector<int64_t> tokens;  // checked on lookup: a hash collision never shares wrong K/V
  };
  int32_t lookup(uint64_t hash, uint64_t parent, const std::vector<int64_t>& tokens) const;
  void add(uint64_t hash, uint64_t parent, std::vector<int64_t> tokens, int32_t block);
  void use(int32_t block);  // a sequence takes a reference on a cached block

  BlockAllocator& alloc_;
  int block_size_;
  bool enabled_;
  std::unordered_map<uint64_t, Entry> by_hash_;
  std::vector<uint64_t> hash_of_;  // per block: its hash when cached
  std::vector<char> cached_;       // per block: named by the cache
  std::vector<int32_t> users_;     // per block: references held by sequences
  std::list<int32_t> lru_;         // evictable blocks, least recently used first
  std::vector<std::list<int32_t>::iterator> lru_pos_;
  int64_t queries_ = 0, hits_ = 0;
};

template <class TokenAt>
std::vector<int32_t> PrefixCache::match_fn(int64_t num_tokens, TokenAt token, std::vector<uint64_t>* hashes) {
  std::vector<int32_t> table;
  hashes->clear();
  if (!enabled_ || num_tokens <= 0) return table;
  const int64_t max_blocks = (num_tokens - 1) / block_size_;
  uint64_t parent = 0;
  std::vector<int64_t> toks(static_cast<size_t>(block_size_));
  for (int64_t b = 0; b < max_blocks; ++b) {
    for (int i = 0; i < block_size_; ++i) toks[static_cast<size_t>(i)] = token(b * block_size_ + i);
    const uint64_t h = hash_block(parent, toks.data(), block_size_);
    const int32_t blk = lookup(h, parent, toks);
    if (blk < 0) break;
    use(blk);
    table.push_back(blk);
    hashes->push_back(h);
    parent = h;
  }
  return table;
}

template <class TokenAt>
void PrefixCache::insert_fn(std::vector<uint64_t>& hashes, const std::vector<int32_t>& table, int64_t num_full,
                            TokenAt token) {
  if (!enabled_ || static_cast<int64_t>(hashes.size()) >= num_full) return;  // the common decode step
  std::vector<int64_t> toks(static_cast<size_t>(block_size_));
  for (int64_t b = static_cast<int64_t>(hashes.size()); b < num_full && b < static_cast<int64_t>(table.size()); ++b) {
    for (int i = 0; i < block_size_; ++i) toks[static_cast<size_t>(i)] = token(b * block_size_ + i);
    const uint64_t parent = b == 0 ? 0 : hashes.back();
    const uint64_t h = hash_block(parent, toks.data(), block_size_);
    hashes.push_back(h);
    const int32_t blk = table[static_cast<size_t>(b)];
    if (!cached_[static_cast<size_t>(blk)] && lookup(h, parent, toks) < 0) add(h, parent, toks, blk);
  }
}

}  // namespace gpuopt::llm
