// PrefixCache: the hash index over full blocks, the users' reference counts and the LRU list of
// cached blocks no sequence uses. The allocator's own reference count is the users' plus one while
// the cache names the block, so a block returns to the free list exactly when both let go.
#include "llm/prefix_cache.h"

#include "core/status.h"

namespace gpuopt::llm {

PrefixCache::PrefixCache(BlockAllocator& alloc, int block_size, bool enabled)
    : alloc_(alloc), block_size_(block_size), enabled_(enabled) {
  GPUOPT_ASSERT(block_size > 0);
  const auto n = static_cast<size_t>(alloc.num_blocks());
  hash_of_.assign(n, 0);
  cached_.assign(n, 0);
  users_.assign(n, 0);
  lru_pos_.assign(n, lru_.end());
}

uint64_t PrefixCache::hash_block(uint64_t parent, const int64_t* tokens, int n) {
  // 64-bit FNV-1a over the parent hash and the ids, then a final avalanche (splitmix64's): equal
  // inputs give equal hashes across runs. Lookups compare the ids too, so a collision only misses.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(parent);
  for (int i = 0; i < n; ++i) mix(static_cast<uint64_t>(tokens[i]));
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

int32_t PrefixCache::lookup(uint64_t hash, uint64_t parent, const std::vector<int64_t>& tokens) const {
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end() || it->second.parent != parent || it->second.tokens != tokens) return -1;
  return it->second.block;
}

void PrefixCache::add(uint64_t hash, uint64_t parent, std::vector<int64_t> tokens, int32_t block) {
  if (by_hash_.count(hash)) return;  // a colliding hash keeps its first block
  by_hash_.emplace(hash, Entry{block, parent, std::move(tokens)});
  hash_of_[static_cast<size_t>(block)] = hash;
  cached_[static_cast<size_t>(block)] = 1;
  alloc_.add_ref(block);  // the cache's own reference
}

void PrefixCache::use(int32_t block) {
  const auto b = static_cast<size_t>(block);
  if (users_[b] == 0 && lru_pos_[b] != lru_.end()) {
    lru_.erase(lru_pos_[b]);
    lru_pos_[b] = lru_.end();
  }
  ++users_[b];
  alloc_.add_ref(block);
}

std::vector<int32_t> PrefixCache::match(const std::vector<int64_t>& tokens, std::vector<uint64_t>* hashes) {
  return match_fn(
      static_cast<int64_t>(tokens.size()), [&](int64_t i) { return tokens[static_cast<size_t>(i)]; }, hashes);
}

int32_t PrefixCache::allocate() {
  int32_t b = alloc_.allocate();
  if (b < 0 && !lru_.empty()) {
    const int32_t victim = lru_.front();
    lru_.pop_front();
    const auto v = static_cast<size_t>(victim);
    lru_pos_[v] = lru_.end();
    by_hash_.erase(hash_of_[v]);
    cached_[v] = 0;
    alloc_.release(victim);  // the cache's reference was the last: the block is free
    b = alloc_.allocate();
  }
  if (b >= 0) users_[static_cast<size_t>(b)] = 1;
  return b;
}

bool PrefixCache::grow(std::vector<int32_t>& table, int64_t num_tokens) {
  const int64_t need = (num_tokens + block_size_ - 1) / block_size_ - static_cast<int64_t>(table.size());
  if (need <= 0) return true;
  if (need > num_available()) return false;
  for (int64_t i = 0; i < need; ++i) {
    const int32_t b = allocate();
    GPUOPT_ASSERT(b >= 0, "PrefixCache: {} blocks counted available but none could be allocated", num_available());
    table.push_back(b);
  }
  return true;
}

void PrefixCache::insert(std::vector<uint64_t>& hashes, const std::vector<int64_t>& tokens,
                         const std::vector<int32_t>& table) {
  insert_fn(hashes, table, static_cast<int64_t>(tokens.size()) / block_size_,
            [&](int64_t i) { return tokens[static_cast<size_t>(i)]; });
}

void PrefixCache::release(std::vector<int32_t>& table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    const auto b = static_cast<size_t>(*it);
    GPUOPT_ASSERT(users_[b] > 0, "PrefixCache: release of block {} that no sequence holds", *it);
    --users_[b];
    alloc_.release(*it);
    if (users_[b] == 0 && cached_[b]) lru_pos_[b] = lru_.insert(lru_.end(), *it);
  }
  table.clear();
}

}  // namespace gpuopt::llm
