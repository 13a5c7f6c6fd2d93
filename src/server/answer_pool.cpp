#include "server/answer_pool.h"

#include <algorithm>

#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace gpuopt::server {

AnswerPool::AnswerPool(int threads) {
  for (int i = 0; i < std::max(threads, 1); ++i) lanes_.push_back(std::make_unique<Lane>());
  for (auto& l : lanes_) l->thread = std::thread(loop, l.get());
}

AnswerPool::~AnswerPool() { stop(); }

int AnswerPool::default_threads() {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(cores / 2, 2, 16);
}

void AnswerPool::enqueue(std::unique_ptr<Task> t) {
  if (stopped_.load(std::memory_order_acquire)) return t->run();
  // Round robin: a batch's answers land on every lane evenly.
  Lane& l = *lanes_[next_.fetch_add(1, std::memory_order_relaxed) % lanes_.size()];
  bool wake = false;
  {
    std::lock_guard<std::mutex> lk(l.mu);
    if (!l.exit) {  // else stop() is joining this lane: it runs here below rather than being dropped
      wake = l.q.empty();
      l.q.push_back(std::move(t));
    }
  }
  if (t) return t->run();
  if (wake) l.cv.notify_one();
}

void AnswerPool::loop(Lane* l) {
#ifdef __linux__
  prctl(PR_SET_NAME, "answer-helper", 0, 0, 0);
#endif
  std::unique_lock<std::mutex> lk(l->mu);
  for (;;) {
    l->cv.wait(lk, [&] { return l->exit || !l->q.empty(); });
    if (l->q.empty()) return;  // exiting, and everything queued has run
    std::unique_ptr<Task> t = std::move(l->q.front());
    l->q.pop_front();
    lk.unlock();
    t->run();
    t.reset();  // the reply's tensors go before the next wait
    lk.lock();
  }
}

void AnswerPool::stop() {
  if (stopped_.exchange(true)) return;
  for (auto& l : lanes_) {
    {
      std::lock_guard<std::mutex> lk(l->mu);
      l->exit = true;
    }
    l->cv.notify_all();
  }
  for (auto& l : lanes_)
    if (l->thread.joinable()) l->thread.join();
}

}  // namespace gpuopt::server
