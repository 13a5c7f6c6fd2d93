#include "core/thread_pool.h"

#include "core/env.h"
#include "core/log.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <utility>
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

// Physical cores this process may run on: the distinct (package, core) pairs of the CPUs in its
// affinity mask (SMT siblings share a core's FMA units, so a second thread per core only adds
// contention to GEMM-bound kernels). Falls back to hardware_concurrency() without sysfs.
unsigned physical_cores() {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return hw;
  std::set<std::pair<long, long>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    auto read = [cpu](const char* what) -> long {
      std::ifstream f("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/" + what);
      long v = -1;
      return f >> v ? v : -1;
    };
    const long core = read("core_id");
    if (core < 0) return std::min<unsigned>(hw, static_cast<unsigned>(CPU_COUNT(&set)));
    cores.emplace(read("physical_package_id"), core);
  }
  return cores.empty() ? hw : static_cast<unsigned>(cores.size());
}

int threads_from_env() {
  const unsigned hw = physical_cores();
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
  parallel_for_max(n, min_chunk, cpu_threads(), f);
}

void parallel_for_max(int64_t n, int64_t min_chunk, int64_t max_chunks, const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) return;
  const int64_t by_size = (n + std::max<int64_t>(min_chunk, 1) - 1) / std::max<int64_t>(min_chunk, 1);
  const int64_t chunks = std::min<int64_t>(std::min<int64_t>(cpu_threads(), std::max<int64_t>(max_chunks, 1)), by_size);
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
