// infer_body_buffer, BodyPool and infer_body_buffers (request_body.h).
#include "server/request_body.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <string_view>

namespace gpuopt::server {

namespace {
constexpr size_t kAlign = 64;

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// The pad before the body so that its binary tensors (after `hlen` bytes of JSON) are aligned;
// npos when `head` is not a binary infer request.
size_t body_pad(const net::HttpRequest& head, size_t size) {
  if (head.method != "POST" || !ends_with(head.path, "/infer")) return std::string_view::npos;
  const std::string_view h = head.header("Inference-Header-Content-Length");
  size_t hlen = 0;
  if (h.empty() || std::from_chars(h.data(), h.data() + h.size(), hlen).ptr != h.data() + h.size() || hlen > size)
    return std::string_view::npos;  // JSON only, or a bad length the decoder reports
  return (kAlign - hlen % kAlign) % kAlign;  // the blobs begin at block + pad + hlen
}

size_t size_class(size_t bytes) {  // powers of two from 1 MiB: a few sizes, so blocks get reused
  size_t c = size_t{1} << 20;
  while (c < bytes) c *= 2;
  return c;
}
}  // namespace

net::BodyBuffer infer_body_buffer(const net::HttpRequest& head, size_t size) {
  const size_t pad = body_pad(head, size);
  if (pad == std::string_view::npos) return {};
  void* block = std::aligned_alloc(kAlign, (pad + size + kAlign - 1) / kAlign * kAlign);
  if (!block) return {};
  return net::BodyBuffer{static_cast<char*>(block) + pad, size, std::shared_ptr<void>(block, [](void* p) { std::free(p); })};
}

BodyPool::~BodyPool() {
  for (auto& [cls, p] : free_blocks_) free_(p);
}

std::shared_ptr<void> BodyPool::take(size_t bytes) {
  const size_t cls = size_class(bytes);
  void* p = nullptr;
  size_t got = 0;                // the class of the block handed out
  std::vector<void*> evicted;    // free blocks given back to make room (outside the lock)
  {
    std::lock_guard<std::mutex> lk(mu_);
    // The free block of the smallest class that holds `bytes`: its own class first, a larger one
    // (up to 4x) rather than a new allocation once the pool is at its capacity.
    size_t best = free_blocks_.size();
    for (size_t i = 0; i < free_blocks_.size(); ++i) {
      const size_t c = free_blocks_[i].first;
      if (c >= cls && (best == free_blocks_.size() || c < free_blocks_[best].first)) best = i;
    }
    const bool fits = allocated_ + cls <= capacity_;
    if (best < free_blocks_.size() && (free_blocks_[best].first == cls || (!fits && free_blocks_[best].first <= 4 * cls))) {
      p = free_blocks_[best].second;
      got = free_blocks_[best].first;
      free_blocks_.erase(free_blocks_.begin() + static_cast<std::ptrdiff_t>(best));
      free_total_ -= got;
    } else {
      // Room for a new block: free blocks (smallest first) go back to make it, never blocks in use.
      if (!fits) {
        std::sort(free_blocks_.begin(), free_blocks_.end());
        size_t drop = 0;
        for (size_t room = capacity_ - allocated_; drop < free_blocks_.size() && room < cls; ++drop)
          room += free_blocks_[drop].first;
        size_t freed = 0;
        for (size_t i = 0; i < drop; ++i) freed += free_blocks_[i].first;
        if (allocated_ - freed + cls > capacity_) {  // in use: the caller takes ordinary memory
          ++stats_.fallbacks;
          return nullptr;
        }
        for (size_t i = 0; i < drop; ++i) evicted.push_back(free_blocks_[i].second);
        free_blocks_.erase(free_blocks_.begin(), free_blocks_.begin() + static_cast<std::ptrdiff_t>(drop));
        free_total_ -= freed;
        allocated_ -= freed;
        stats_.frees += drop;
      }
      allocated_ += cls;  // reserved before the allocation, so concurrent takes respect the capacity
      got = cls;
    }
    in_use_ += got;
  }
  for (void* e : evicted) free_(e);
  if (!p) {
    p = alloc_(got);
    std::lock_guard<std::mutex> lk(mu_);
    if (!p) {
      allocated_ -= got;
      in_use_ -= got;
      ++stats_.fallbacks;
      return nullptr;
    }
    ++stats_.allocs;
  }
  return std::shared_ptr<void>(p, [self = shared_from_this(), got](void* q) { self->give_back(q, got); });
}

// Kept for the next take: the pool's blocks stay allocated (never more than its capacity), so
// no thread of the request path frees page-locked memory (cudaFreeHost waits for the device).
void BodyPool::give_back(void* p, size_t cls) {
  std::lock_guard<std::mutex> lk(mu_);
  free_blocks_.emplace_back(cls, p);
  free_total_ += cls;
  in_use_ -= cls;
}

size_t BodyPool::free_bytes() const {
  std::lock_guard<std::mutex> lk(mu_);
  return free_total_;
}

BodyPool::Stats BodyPool::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  Stats s = stats_;
  s.capacity = capacity_;
  s.allocated = allocated_;
  s.in_use = in_use_;
  return s;
}

namespace {
std::atomic<size_t> g_pinned_capacity{kDefaultPinnedPoolBytes};
}

void set_pinned_pool_capacity(size_t bytes) { g_pinned_capacity.store(bytes); }

std::shared_ptr<BodyPool> pinned_pool() {
  static const std::shared_ptr<BodyPool> pool =
      std::make_shared<BodyPool>(pinned_host_alloc, pinned_host_free, g_pinned_capacity.load());
  return pool;
}

Tensor pinned_batch_tensor(DType dtype, const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const size_t bytes = static_cast<size_t>(n) * dtype_size(dtype);
  std::shared_ptr<void> block = bytes ? pinned_pool()->take(bytes) : nullptr;
  if (!block) return Tensor();
  auto storage = std::make_shared<Storage>();
  storage->data = block.get();
  storage->bytes = bytes;
  storage->deleter = [block](void*) {};  // back to the pool with the last view
  return Tensor::wrap(dtype, shape, std::move(storage), 0);
}

std::function<net::BodyBuffer(const net::HttpRequest&, size_t)> infer_body_buffers(bool pinned) {
  if (!pinned) return infer_body_buffer;
  // Pinned blocks from the pool; a body the pool cannot give falls back to malloc.
  return [pool = pinned_pool()](const net::HttpRequest& head, size_t size) -> net::BodyBuffer {
    const size_t pad = body_pad(head, size);
    if (pad == std::string_view::npos) return {};
    std::shared_ptr<void> block = pool->take(pad + size);
    if (!block) return infer_body_buffer(head, size);
    return net::BodyBuffer{static_cast<char*>(block.get()) + pad, size, std::move(block)};
  };
}

#ifndef GPUOPT_HAVE_CUDA
void* pinned_host_alloc(size_t) { return nullptr; }
void pinned_host_free(void*) {}
#endif

}  // namespace gpuopt::server
