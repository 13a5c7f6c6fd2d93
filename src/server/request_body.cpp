// infer_body_buffer, BodyPool and infer_body_buffers (request_body.h).
#include "server/request_body.h"

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
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (size_t i = 0; i < free_blocks_.size(); ++i)
      if (free_blocks_[i].first == cls) {
        p = free_blocks_[i].second;
        free_blocks_.erase(free_blocks_.begin() + static_cast<std::ptrdiff_t>(i));
        free_total_ -= cls;
        break;
      }
  }
  if (!p) p = alloc_(cls);
  if (!p) return nullptr;
  return std::shared_ptr<void>(p, [self = shared_from_this(), cls](void* q) { self->give_back(q, cls); });
}

void BodyPool::give_back(void* p, size_t cls) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (free_total_ + cls <= keep_) {
      free_blocks_.emplace_back(cls, p);
      free_total_ += cls;
      return;
    }
  }
  free_(p);
}

size_t BodyPool::free_bytes() const {
  std::lock_guard<std::mutex> lk(mu_);
  return free_total_;
}

std::shared_ptr<BodyPool> pinned_pool() {
  static const std::shared_ptr<BodyPool> pool =
      std::make_shared<BodyPool>(pinned_host_alloc, pinned_host_free, size_t{256} << 20);
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
