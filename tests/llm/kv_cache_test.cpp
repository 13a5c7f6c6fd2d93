// BlockAllocator: the paged cache's free list and reference counts.
#include "llm/kv_cache.h"

#include <gtest/gtest.h>

#include <set>

namespace gpuopt::llm {
namespace {

TEST(BlockAllocator, AllocatesEveryBlockOnceThenRunsOut) {
  BlockAllocator a(4);
  std::set<int32_t> got;
  for (int i = 0; i < 4; ++i) got.insert(a.allocate());
  EXPECT_EQ(got, (std::set<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(a.num_free(), 0);
  EXPECT_EQ(a.allocate(), -1);
  a.release(2);
  EXPECT_EQ(a.num_free(), 1);
  EXPECT_EQ(a.allocate(), 2);
}

TEST(BlockAllocator, GrowCoversTokensAtBlockEdges) {
  BlockAllocator a(5);
  std::vector<int32_t> t;
  ASSERT_TRUE(a.grow(t, 0, 16));
  EXPECT_TRUE(t.empty());
  ASSERT_TRUE(a.grow(t, 1, 16));
  EXPECT_EQ(t.size(), 1u);
  ASSERT_TRUE(a.grow(t, 16, 16));  // still one block
  EXPECT_EQ(t.size(), 1u);
  ASSERT_TRUE(a.grow(t, 17, 16));
  EXPECT_EQ(t.size(), 2u);
  ASSERT_TRUE(a.grow(t, 10, 16));  // never shrinks
  EXPECT_EQ(t.size(), 2u);
  // 5 blocks of 16 hold 80 tokens; 81 does not fit and leaves the table as it was.
  EXPECT_FALSE(a.grow(t, 81, 16));
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(a.num_free(), 3);
  ASSERT_TRUE(a.grow(t, 80, 16));
  EXPECT_EQ(t.size(), 5u);
  EXPECT_EQ(a.num_free(), 0);
  a.release(t);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(a.num_free(), 5);
}

TEST(BlockAllocator, SharedBlocksFreeAtTheLastRelease) {
  BlockAllocator a(2);
  const int32_t b = a.allocate();
  a.add_ref(b);
  a.release(b);
  EXPECT_EQ(a.num_free(), 1);  // still held once
  a.release(b);
  EXPECT_EQ(a.num_free(), 2);
  EXPECT_DEATH(a.release(b), "not allocated");
}

TEST(BlockAllocator, ZeroBlocks) {
  BlockAllocator a(0);
  EXPECT_EQ(a.allocate(), -1);
  std::vector<int32_t> t;
  EXPECT_FALSE(a.grow(t, 1, 16));
  EXPECT_TRUE(a.grow(t, 0, 16));
}

}  // namespace
}  // namespace gpuopt::llm
