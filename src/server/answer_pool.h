// Helper threads for the batcher's answers. Every answer of a batch was delivered from one
// thread (the instance's answer thread), each request's callback encoding its answer and handing
// it over; for gRPC the handing over is the socket write itself (grpc++ writes on the thread that
// calls Finish), so a batch of large outputs went out one after another from that one thread
// (BERT's 393 KB a request: ~0.5 ms each, 1.9k infer/s on an H200 where the engine allowed 23k).
// A batch of many requests is now cut into chunks: the answer thread delivers the first and the
// pool's threads the others, in parallel (Batcher::deliver waits for them: fork-join).
//
//   auto pool = std::make_shared<AnswerPool>(AnswerPool::default_threads());
//   pool->post([&] { ... });   // runs on one of its threads
//   pool->stop();              // runs what is queued, joins (post() then runs tasks on the caller's thread)
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace gpuopt::server {

class AnswerPool {
 public:
  explicit AnswerPool(int threads);
  ~AnswerPool();
  AnswerPool(const AnswerPool&) = delete;
  AnswerPool& operator=(const AnswerPool&) = delete;

  // A move-only callable (it may hold the reply's tensors).
  template <typename F>
  void post(F&& f) {
    enqueue(std::make_unique<Fn<std::decay_t<F>>>(std::forward<F>(f)));
  }
  void stop();
  int threads() const { return static_cast<int>(lanes_.size()); }
  // Half the cores, at least 2 and at most 16.
  static int default_threads();

 private:
  struct Task {
    virtual ~Task() = default;
    virtual void run() = 0;
  };
  template <typename F>
  struct Fn final : Task {
    explicit Fn(F f) : f(std::move(f)) {}
    void run() override { f(); }
    F f;
  };
  struct Lane {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::unique_ptr<Task>> q;
    bool exit = false;
    std::thread thread;
  };
  void enqueue(std::unique_ptr<Task> t);
  static void loop(Lane* lane);

  std::vector<std::unique_ptr<Lane>> lanes_;
  std::atomic<size_t> next_{0};
  std::atomic<bool> stopped_{false};
};

}  // namespace gpuopt::server
