// The fast CPU backend's share of the pool: runs in flight divide cpu_threads() among themselves,
// an executable's cap holds, and a capped run's parallel loops stay on the calling thread.
#include "backends/cpu_fast/fast_kernel.h"
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>

namespace gpuopt::cpu_fast {
namespace {

std::set<std::thread::id> threads_used(int64_t n) {
  std::mutex mu;
  std::set<std::thread::id> ids;
  parallel(n, 1, [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  return ids;
}

TEST(FastCpuThreads, RunsInFlightDivideThePool) {
  const int n = cpu_threads();
  RunScope first(0);
  EXPECT_EQ(run_threads(), n);
  int second = 0;
  std::thread t([&] {
    RunScope other(0);  // a second session or server instance running at the same time
    second = run_threads();
  });
  t.join();
  EXPECT_EQ(second, std::max(1, n / 2));
}

TEST(FastCpuThreads, CapOfOneRunsOnTheCallingThread) {
  {
    RunScope one(1);
    EXPECT_EQ(run_threads(), 1);
    const std::set<std::thread::id> ids = threads_used(1000);
    ASSERT_EQ(ids.size(), 1u);
    EXPECT_EQ(*ids.begin(), std::this_thread::get_id());
  }
  RunScope all(0);
  EXPECT_LE(threads_used(1000).size(), static_cast<size_t>(cpu_threads()));
}

}  // namespace
}  // namespace gpuopt::cpu_fast
