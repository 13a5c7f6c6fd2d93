// BufferPool: a buffer comes back for reuse when the last tensor over it goes (slices included),
// reuse never hands out one buffer twice at once, sizes are matched within a factor of two, the
// idle cap frees what exceeds it, buffers outliving the pool are freed, and releases from many
// threads at once are safe (run under TSan in CI).
#include "core/buffer_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <set>
#include <thread>
#include <vector>

namespace gpuopt {
namespace {

struct Counts {
  std::atomic<int> allocs{0}, frees{0};
};

std::shared_ptr<BufferPool> make_pool(Counts* c, size_t max_idle = size_t{1} << 30) {
  return BufferPool::create(
      [c](size_t n) {
        ++c->allocs;
        return std::malloc(n);
      },
      [c](void* p) {
        ++c->frees;
        std::free(p);
      },
      max_idle);
}

TEST(BufferPool, ReusesABufferOnceItsLastTensorGoes) {
  Counts c;
  auto pool = make_pool(&c);
  void* first = nullptr;
  {
    auto st = pool->acquire(4096);
    ASSERT_TRUE(st.ok());
    first = (*st)->data;
    Tensor whole = Tensor::wrap(DType::F32, {4, 256}, *st);
    Tensor slice = Tensor::wrap(DType::F32, {1, 256}, *st, 1024);  // a request's rows, as the batcher cuts them
    st->reset();
    whole = Tensor();
    EXPECT_EQ(pool->idle_buffers(), 0u) << "a slice still refers to the buffer";
    static_cast<float*>(slice.raw())[0] = 1.f;
  }
  EXPECT_EQ(pool->idle_buffers(), 1u);
  EXPECT_EQ(pool->idle_bytes(), 4096u);
  auto again = pool->acquire(4000);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->data, first);
  EXPECT_EQ((*again)->bytes, 4096u);
  EXPECT_EQ(pool->allocations(), 1u);
  EXPECT_EQ(c.allocs.load(), 1);
  EXPECT_EQ(pool->idle_buffers(), 0u);
}

TEST(BufferPool, NeverHandsOutABufferInUse) {
  Counts c;
  auto pool = make_pool(&c);
  auto a = pool->acquire(1000), b = pool->acquire(1000);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->data, (*b)->data);
  EXPECT_EQ(pool->allocations(), 2u);
}

TEST(BufferPool, MatchesSizesWithinAFactorOfTwo) {
  Counts c;
  auto pool = make_pool(&c);
  { auto big = pool->acquire(1 << 20); }  // idle now
  auto small = pool->acquire(1000);  // must not take the 1 MB buffer
  ASSERT_TRUE(small.ok());
  EXPECT_EQ((*small)->bytes, 1000u);
  EXPECT_EQ(pool->idle_buffers(), 1u);
  auto larger = pool->acquire((1 << 20) + 1);  // does not fit the idle one
  ASSERT_TRUE(larger.ok());
  EXPECT_EQ(pool->allocations(), 3u);
  auto fits = pool->acquire(600 * 1024);  // within 2x: reused
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ((*fits)->bytes, size_t{1} << 20);
  EXPECT_EQ(pool->allocations(), 3u);
}

TEST(BufferPool, FreesWhatExceedsTheIdleCap) {
  Counts c;
  auto pool = make_pool(&c, /*max_idle=*/3000);
  {
    auto a = pool->acquire(2000), b = pool->acquire(2000);
    ASSERT_TRUE(a.ok() && b.ok());
  }
  EXPECT_EQ(pool->idle_buffers(), 1u);
  EXPECT_EQ(c.frees.load(), 1);
  pool.reset();
  EXPECT_EQ(c.frees.load(), 2);
}

TEST(BufferPool, BuffersOutlivingThePoolAreFreed) {
  Counts c;
  auto pool = make_pool(&c);
  Tensor t = Tensor::wrap(DType::U8, {64}, *pool->acquire(64));
  pool.reset();
  EXPECT_EQ(c.frees.load(), 0);
  t = Tensor();
  EXPECT_EQ(c.frees.load(), 1);
}

TEST(BufferPool, FailedAllocationIsAnError) {
  auto pool = BufferPool::create([](size_t) -> void* { return nullptr; }, [](void*) {});
  auto st = pool->acquire(100);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("100 bytes"), std::string::npos) << st.status().message();
}

TEST(BufferPool, ConcurrentAcquireAndReleaseKeepBuffersExclusive) {
  Counts c;
  auto pool = make_pool(&c);
  std::atomic<int> clashes{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        auto st = pool->acquire(256);
        ASSERT_TRUE(st.ok());
        auto* p = static_cast<unsigned char*>((*st)->data);
        for (int k = 0; k < 256; ++k) p[k] = static_cast<unsigned char>(t);
        for (int k = 0; k < 256; ++k) clashes += p[k] != static_cast<unsigned char>(t);
        // Released from another thread half the time, as replies are written by I/O threads.
        if (i % 2) std::thread([s = std::move(*st)]() mutable { s.reset(); }).join();
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(clashes.load(), 0);
  EXPECT_LE(pool->allocations(), 8u);  // reused, not one per acquire
  pool.reset();
  EXPECT_EQ(c.allocs.load(), c.frees.load());
}

}  // namespace
}  // namespace gpuopt
