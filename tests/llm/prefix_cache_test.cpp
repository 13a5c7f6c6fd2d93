// The prefix cache alone: chained block hashes, sharing full blocks by reference count, cached
// blocks kept after their last user until evicted least recently used (hit counting: scheduler_test).
#include "llm/prefix_cache.h"

#include <gtest/gtest.h>

#include <numeric>

namespace gpuopt::llm {
namespace {

std::vector<int64_t> seq(int n, int64_t first = 1) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// A sequence that computed all of `toks`: fresh blocks for them, full ones cached.
std::vector<int32_t> compute(PrefixCache& c, const std::vector<int64_t>& toks, std::vector<uint64_t>* hashes) {
  std::vector<int32_t> table = c.match(toks, hashes);
  EXPECT_TRUE(c.grow(table, static_cast<int64_t>(toks.size())));
  c.insert(*hashes, toks, table);
  return table;
}

TEST(PrefixCache, ChainedHashesNameBlocksByTheirWholePrefix) {
  const auto a = seq(4), b = seq(4, 5);
  const uint64_t ha = PrefixCache::hash_block(0, a.data(), 4);
  EXPECT_EQ(ha, PrefixCache::hash_block(0, a.data(), 4));
  EXPECT_NE(ha, PrefixCache::hash_block(0, b.data(), 4));
  // The same tokens after a different parent are another block.
  EXPECT_NE(PrefixCache::hash_block(ha, b.data(), 4), PrefixCache::hash_block(0, b.data(), 4));
  EXPECT_NE(PrefixCache::hash_block(ha, b.data(), 4), PrefixCache::hash_block(ha, b.data(), 3));
}

TEST(PrefixCache, SharesFullBlocksAndKeepsTheLastTokenToCompute) {
  BlockAllocator alloc(8);
  PrefixCache c(alloc, 4, true);
  std::vector<uint64_t> h1, h2, h3, h4;
  auto t1 = compute(c, seq(10), &h1);  // 3 blocks; 2 full ones cached
  EXPECT_EQ(h1.size(), 2u);
  EXPECT_EQ(c.num_cached(), 2);
  EXPECT_EQ(c.num_used(), 3);
  // 12 tokens: at most 2 blocks may come from the cache, the last token is computed.
  auto t2 = c.match(seq(12), &h2);
  EXPECT_EQ(t2, std::vector<int32_t>(t1.begin(), t1.begin() + 2));
  EXPECT_EQ(h2, h1);
  // 8 tokens: one block (blocks 0-1 would leave nothing to compute).
  auto t3 = c.match(seq(8), &h3);
  EXPECT_EQ(t3, std::vector<int32_t>{t1[0]});
  // A different second block: only the first is shared.
  auto other = seq(12);
  other[5] = 99;
  auto t4 = c.match(other, &h4);
  EXPECT_EQ(t4, std::vector<int32_t>{t1[0]});
  EXPECT_EQ(c.num_used(), 3);  // sharing takes no new block
  c.release(t2);
  c.release(t3);
  c.release(t4);
  c.release(t1);
  EXPECT_EQ(c.num_used(), 0);
  EXPECT_EQ(c.num_evictable(), 2);  // the two cached blocks stay
  EXPECT_EQ(alloc.num_free(), 6);
  EXPECT_EQ(c.num_available(), 8);
  // Found again after their last user left.
  std::vector<uint64_t> h5;
  auto t5 = c.match(seq(9), &h5);
  EXPECT_EQ(t5.size(), 2u);
  EXPECT_EQ(c.num_evictable(), 0);
  EXPECT_EQ(c.num_used(), 2);
  c.release(t5);

  // Disabled: nothing is shared, every block is freed at once.
  BlockAllocator a2(4);
  PrefixCache off(a2, 4, false);
  std::vector<uint64_t> hh;
  auto u = compute(off, seq(8), &hh);
  EXPECT_TRUE(off.match(seq(9), &hh).empty());
  off.release(u);
  EXPECT_EQ(a2.num_free(), 4);
  EXPECT_EQ(off.num_cached(), 0);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedTailFirstOnlyWhenNoBlockIsFree) {
  BlockAllocator alloc(6);
  PrefixCache c(alloc, 2, true);
  std::vector<uint64_t> ha, hb;
  auto ta = compute(c, seq(4, 1), &ha);    // 2 full blocks
  auto tb = compute(c, seq(4, 100), &hb);  // 2 more
  c.release(ta);                           // a's become evictable first (its tail first)
  c.release(tb);
  EXPECT_EQ(c.num_evictable(), 4);
  EXPECT_EQ(alloc.num_free(), 2);
  // Two free blocks are used before anything is evicted.
  std::vector<int32_t> t;
  ASSERT_TRUE(c.grow(t, 4));
  EXPECT_EQ(c.num_cached(), 4);
  // The next block evicts a's last block (least recently used, tail first): a's first block is
  // still found, but not its second.
  ASSERT_TRUE(c.grow(t, 6));
  EXPECT_EQ(c.num_cached(), 3);
  std::vector<uint64_t> h;
  auto m = c.match(seq(5, 1), &h);
  EXPECT_EQ(m.size(), 1u);
  c.release(m);  // a's first block is used again: now the most recent
  auto mb = c.match(seq(5, 100), &h);
  EXPECT_EQ(mb.size(), 2u);
  c.release(mb);              // b's blocks: more recent still (tail first: b's last block is older)
  ASSERT_TRUE(c.grow(t, 8));  // evicts a's first block
  auto m2 = c.match(seq(5, 1), &h);
  EXPECT_TRUE(m2.empty());
  ASSERT_TRUE(c.grow(t, 10));  // evicts b's second block, then nothing is left to evict
  auto mb2 = c.match(seq(5, 100), &h);
  EXPECT_EQ(mb2.size(), 1u);
  EXPECT_FALSE(c.grow(t, 12));  // b's first block is in use: no block at all
  c.release(mb2);
  c.release(t);
  EXPECT_EQ(c.num_used(), 0);
  EXPECT_EQ(c.num_available(), 6);
}

}  // namespace
}  // namespace gpuopt::llm
