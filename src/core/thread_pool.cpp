#include "core/thread_pool.h"

#include "core/env.h"
#include "core/log.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace gpuopt {
namespace {

thread_local bool t_in_pool = false;  // a pool worker, or a caller inside parallel_for

class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  // Never destroyed (see pool()): workers block on the queue until the process exits.
  void push(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> l(mu_);
      queue_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void work() {
    t_in_pool = true;
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [this] { return !queue_.empty(); });
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> workers_;
};

int threads_from_env() {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const std::optional<std::string> v = env_get("GPUOPT_NUM_THREADS");
  if (!v) return static_cast<int>(hw);
  char* end = nullptr;
  const long n = std::strtol(v->c_str(), &end, 10);
  if (end == v->c_str() || *end != '\0' || n < 1 || n > 4096) {
    GPUOPT_LOG(warn, "GPUOPT_NUM_THREADS='{}' is not a thread count from 1 to 4096; using {}", *v, hw);
    return static_cast<int>(hw);
  }
  return static_cast<int>(n);
}

Pool& pool() {
  // The caller is one of the cpu_threads() threads: the pool holds the others.
  static Pool* p = new Pool(cpu_threads() - 1);
  return *p;
}

}  // namespace

int cpu_threads() {
  static const int n = threads_from_env();
  return n;
}

void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) return;
  const int64_t by_size = (n + std::max<int64_t>(min_chunk, 1) - 1) / std::max<int64_t>(min_chunk, 1);
  const int64_t chunks = std::min<int64_t>(cpu_threads(), by_size);
  if (chunks <= 1 || t_in_pool) {
    f(0, n);
    return;
  }
  auto bound = [&](int64_t c) { return n * c / chunks; };
  struct Join {
    std::mutex mu;
    std::condition_variable cv;
    int64_t left;
  } join;
  join.left = chunks - 1;
  Pool& p = pool();
  for (int64_t c = 1; c < chunks; ++c) {
    const int64_t b = bound(c), e = bound(c + 1);
    p.push([&join, &f, b, e] {
      f(b, e);
      std::lock_guard<std::mutex> l(join.mu);
      if (--join.left == 0) join.cv.notify_one();
    });
  }
  t_in_pool = true;  // a nested parallel_for inside this chunk runs inline
  f(0, bound(1));
  t_in_pool = false;
  std::unique_lock<std::mutex> l(join.mu);
  join.cv.wait(l, [&join] { return join.left == 0; });
}

}  // namespace gpuopt
