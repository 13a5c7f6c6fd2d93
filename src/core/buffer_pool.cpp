// BufferPool (buffer_pool.h).
#include "core/buffer_pool.h"

#include <algorithm>

namespace gpuopt {

std::shared_ptr<BufferPool> BufferPool::create(AllocFn alloc, FreeFn free, size_t max_idle_bytes) {
  return std::shared_ptr<BufferPool>(new BufferPool(std::move(alloc), std::move(free), max_idle_bytes));
}

BufferPool::BufferPool(AllocFn alloc, FreeFn free, size_t max_idle_bytes)
    : alloc_(std::move(alloc)), free_(std::make_shared<FreeFn>(std::move(free))), max_idle_(max_idle_bytes) {}

BufferPool::~BufferPool() {
  for (const Idle& b : idle_) (*free_)(b.p);
}

Result<std::shared_ptr<Storage>> BufferPool::acquire(size_t bytes, Device device) {
  bytes = std::max<size_t>(bytes, 1);
  void* p = nullptr;
  size_t cap = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    // Best fit, and never more than twice the size asked: a small request must not pin a batch's
    // large buffer while the next large one allocates afresh.
    auto best = idle_.end();
    for (auto it = idle_.begin(); it != idle_.end(); ++it)
      if (it->cap >= bytes && it->cap / 2 <= bytes && (best == idle_.end() || it->cap < best->cap)) best = it;
    if (best != idle_.end()) {
      p = best->p;
      cap = best->cap;
      idle_bytes_ -= cap;
      idle_.erase(best);
    } else {
      ++allocations_;
    }
  }
  if (!p) {
    p = alloc_(bytes);
    if (!p) return Status::OutOfMemory("could not allocate a host buffer of {} bytes", bytes);
    cap = bytes;
  }
  auto st = std::make_shared<Storage>();
  st->data = p;
  st->bytes = cap;
  st->device = device;
  std::weak_ptr<BufferPool> pool = weak_from_this();
  st->deleter = [pool, free = free_, cap](void* q) {
    if (auto alive = pool.lock())
      alive->give_back(q, cap);
    else
      (*free)(q);
  };
  return st;
}

void BufferPool::give_back(void* p, size_t cap) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (idle_bytes_ + cap <= max_idle_) {
      idle_.push_back({p, cap});
      idle_bytes_ += cap;
      return;
    }
  }
  (*free_)(p);
}

uint64_t BufferPool::allocations() const {
  std::lock_guard<std::mutex> lk(mu_);
  return allocations_;
}

size_t BufferPool::idle_buffers() const {
  std::lock_guard<std::mutex> lk(mu_);
  return idle_.size();
}

size_t BufferPool::idle_bytes() const {
  std::lock_guard<std::mutex> lk(mu_);
  return idle_bytes_;
}

}  // namespace gpuopt
