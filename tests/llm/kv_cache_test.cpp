// BlockAllocator: the paged cache's free list and reference counts; the cache's element types
// (--kv-cache-dtype): their names, bytes per token and what that does to the CPU runner's capacity.
#include "llm/kv_cache.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "llm/runner.h"

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
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // other tests may have started the thread pool
  EXPECT_DEATH(a.release(b), "not allocated");
}

TEST(BlockAllocator, ZeroBlocks) {
  BlockAllocator a(0);
  EXPECT_EQ(a.allocate(), -1);
  std::vector<int32_t> t;
  EXPECT_FALSE(a.grow(t, 1, 16));
  EXPECT_TRUE(a.grow(t, 0, 16));
}

TEST(KvCacheDtype, NamesParseAndBadOnesAreRefused) {
  EXPECT_EQ(*parse_kv_cache_dtype("auto"), KvCacheDtype::Auto);
  EXPECT_EQ(*parse_kv_cache_dtype("fp16"), KvCacheDtype::F16);
  EXPECT_EQ(*parse_kv_cache_dtype("fp8"), KvCacheDtype::Fp8E4m3);
  EXPECT_EQ(*parse_kv_cache_dtype("fp8_e4m3"), KvCacheDtype::Fp8E4m3);
  for (const char* name : kKvCacheDtypeNames) EXPECT_TRUE(parse_kv_cache_dtype(name).ok()) << name;
  for (const char* bad : {"", "FP8", "fp8_e5m2", "int8", "bf16"}) {
    auto r = parse_kv_cache_dtype(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().to_string().find(std::string("'") + bad + "'"), std::string::npos) << r.status().to_string();
  }
}

LlmConfig small_config(int64_t max_position) {
  LlmConfig c;
  c.arch = LlmArch::Llama;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.max_position = max_position;
  return c;
}

TEST(KvCacheDtype, BytesPerTokenFollowTheElementType) {
  const LlmConfig c = small_config(128);
  const int64_t elems = 2 * 2 * 2 * 8;  // K and V, layers, kv heads, head_dim
  EXPECT_EQ(kv_cache_bytes_per_token(c, KvCacheDtype::Auto, DType::F32), elems * 4);
  EXPECT_EQ(kv_cache_bytes_per_token(c, KvCacheDtype::Auto, DType::BF16), elems * 2);
  EXPECT_EQ(kv_cache_bytes_per_token(c, KvCacheDtype::F16, DType::F32), elems * 2);
  EXPECT_EQ(kv_cache_bytes_per_token(c, KvCacheDtype::Fp8E4m3, DType::F16), elems);
  EXPECT_EQ(kv_cache_bytes_per_token(c, KvCacheDtype::Auto, DType::F32), c.kv_bytes_per_token(DType::F32));
}

// The CPU runner sized from its memory budget: the same bytes hold twice the tokens at fp8 as at
// fp16 (and fp16 twice f32's), so the engine and /metrics see twice the blocks.
TEST(KvCacheDtype, CpuRunnerCapacityDoublesAtFp8) {
  const LlmConfig c = small_config(1 << 20);  // a context long enough that the budget binds
  auto ck = random_checkpoint(c, DType::F32, 1);
  const int64_t budget = int64_t{1} << 20, per_token_f32 = kv_cache_bytes_per_token(c, KvCacheDtype::Auto, DType::F32);
  std::map<KvCacheDtype, int64_t> blocks;
  for (KvCacheDtype d : {KvCacheDtype::Auto, KvCacheDtype::F16, KvCacheDtype::Fp8E4m3}) {
    RunnerOptions o;
    o.kv_cache_dtype = d;
    o.cpu_kv_cache_bytes = budget;
    o.max_batch = 4;
    auto r = make_cpu_runner(c, *ck, o);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    blocks[d] = (*r)->num_kv_blocks();
    EXPECT_EQ((*r)->block_size(), 16);
  }
  EXPECT_EQ(blocks[KvCacheDtype::Auto], budget / (16 * per_token_f32));
  EXPECT_EQ(blocks[KvCacheDtype::F16], 2 * blocks[KvCacheDtype::Auto]);
  EXPECT_EQ(blocks[KvCacheDtype::Fp8E4m3], 2 * blocks[KvCacheDtype::F16]);
}

}  // namespace
}  // namespace gpuopt::llm
