// parallel_for: every index exactly once, chunks on more than one thread when the pool has them,
// nested calls inline, concurrent callers; results equal the serial loop's.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace gpuopt {
namespace {

TEST(ThreadPool, EveryIndexOnceInContiguousChunks) {
  for (int64_t n : {0, 1, 7, 1000, 100003}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    std::atomic<int64_t> chunks{0};
    parallel_for(n, 1, [&](int64_t b, int64_t e) {
      EXPECT_LT(b, e);
      ++chunks;
      for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
    EXPECT_LE(chunks.load(), std::max<int64_t>(1, cpu_threads())) << n;
  }
}

TEST(ThreadPool, ChunksRunOnOtherThreadsWhenThePoolHasThem) {
  std::mutex mu;
  std::set<std::thread::id> ids;
  parallel_for(1 << 20, 1, [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> l(mu);
    ids.insert(std::this_thread::get_id());
  });
  if (cpu_threads() >= 2) EXPECT_GE(ids.size(), 2u);
  else EXPECT_EQ(ids.size(), 1u);
}

TEST(ThreadPool, MinChunkKeepsSmallWorkOnTheCaller) {
  std::set<std::thread::id> ids;
  parallel_for(100, 1000, [&](int64_t b, int64_t e) {
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 100);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_EQ(*ids.begin(), std::this_thread::get_id());
}

TEST(ThreadPool, NestedAndConcurrentCallsFinishWithTheSerialSum) {
  const int64_t n = 20000;
  int64_t serial = 0;
  for (int64_t i = 0; i < n; ++i) serial += i * i % 7;
  std::vector<std::thread> callers;
  std::vector<int64_t> sums(4, 0);
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      std::vector<int64_t> part(static_cast<size_t>(n), 0);
      parallel_for(n / 100, 1, [&](int64_t b, int64_t e) {
        for (int64_t blk = b; blk < e; ++blk)
          parallel_for(100, 1, [&](int64_t ib, int64_t ie) {  // nested: inline
            for (int64_t i = blk * 100 + ib; i < blk * 100 + ie; ++i) part[static_cast<size_t>(i)] = i * i % 7;
          });
      });
      for (int64_t v : part) sums[static_cast<size_t>(t)] += v;
    });
  for (auto& c : callers) c.join();
  for (int64_t s : sums) EXPECT_EQ(s, serial);
}

}  // namespace
}  // namespace gpuopt
