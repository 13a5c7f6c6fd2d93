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
  for (auto& [cls, blocks] : free_)
    for (void* p : blocks) free_fn_(p);
}

std::shared_ptr<void> BodyPool::take(size_t bytes) {
  const size_t cls = size_class(bytes);
  void* p = nullptr;
  size_t got = 0;              // the class of the block handed out
  std::vector<void*> evicted;  // free blocks given back to make room (freed outside the lock)
  {
    std::lock_guard<std::mutex> lk(mu_);
    const bool fits = allocated_ + cls <= capacity_;
    // A free block of its own class; once the pool is at its capacity, the smallest larger one
    // (up to 4x) rather than a new allocation.
    for (auto it = free_.lower_bound(cls); it != free_.end() && it->first <= (fits ? cls : 4 * cls); ++it)
      if (!it->second.empty()) {
        p = it->second.back();
        it->second.pop_back();
        got = it->first;
        free_total_ -= got;
        break;
      }
    if (!p) {
      if (!fits) {  // room for a new block: free blocks go back, smallest first, never blocks in use
        if (capacity_ - allocated_ + free_total_ < cls) {  // in use: the caller takes ordinary memory
          ++stats_.fallbacks;
          return nullptr;
        }
        size_t room = capacity_ - allocated_;
        for (auto it = free_.begin(); it != free_.end() && room < cls; ++it)
          while (!it->second.empty() && room < cls) {
            evicted.push_back(it->second.back());
            it->second.pop_back();
            room += it->first;
            free_total_ -= it->first;
            allocated_ -= it->first;
          }
        stats_.frees += evicted.size();
      }
      allocated_ += cls;  // reserved before the allocation, so concurrent takes respect the capacity
      got = cls;
    }
    in_use_ += got;
  }
  for (void* e : evicted) free_fn_(e);
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
  free_[cls].push_back(p);
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
    // A small body is copied into its batch (or the executor's staging) anyway: malloc, so the
    // page-locked blocks (1 MiB and up) go to bodies whose copy the GPU can take from where they are.
    if (pad + size < kPinnedBodyMin) return infer_body_buffer(head, size);
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
