// Memory for a large inference request body, read into it straight from the socket
// (net::ServerOptions::body_buffer): a POST to .../infer with binary tensors
// (Inference-Header-Content-Length) gets a block laid out so that the first binary tensor, right
// after the JSON header, starts 64-byte aligned. Decoding then views the tensors where they are
// (no copy, no move into alignment), and a batch of one request hands that view to the engine.
// On a host with a CUDA device the blocks are pinned (page-locked) and reused from a pool, so the
// CUDA executor copies such an input to the device straight from the body (staging.h), without
// its own pinned staging copy.
//
//   net::ServerOptions o;
//   o.body_buffer = infer_body_buffers(/*pinned=*/cuda_device_count() > 0);
#pragma once

#include "core/tensor.h"
#include "net/http.h"

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace gpuopt::server {

// Memory for the body of `head` (its request line and headers) of `size` bytes from malloc; no
// data (the HTTP layer's default std::string body) for any other request or a malformed length.
net::BodyBuffer infer_body_buffer(const net::HttpRequest& head, size_t size);

// Blocks of a few sizes kept for reuse (a pinned allocation costs far more than a malloc): a
// block goes back to the pool when the last tensor viewing its body is gone; at most
// `keep_bytes` are kept free, the rest returned.
class BodyPool : public std::enable_shared_from_this<BodyPool> {
 public:
  using Alloc = std::function<void*(size_t)>;  // nullptr: no memory
  using Free = std::function<void(void*)>;
  BodyPool(Alloc alloc, Free free, size_t keep_bytes) : alloc_(std::move(alloc)), free_(std::move(free)), keep_(keep_bytes) {}
  ~BodyPool();
  // A block of at least `bytes` (rounded up to its size class), owned by the returned pointer.
  std::shared_ptr<void> take(size_t bytes);
  size_t free_bytes() const;

 private:
  void give_back(void* p, size_t cls);
  Alloc alloc_;
  Free free_;
  size_t keep_;
  mutable std::mutex mu_;
  std::vector<std::pair<size_t, void*>> free_blocks_;  // (size class, block)
  size_t free_total_ = 0;
};

// The hook for net::ServerOptions::body_buffer: infer_body_buffer's layout in blocks of a pool,
// pinned ones when `pinned` (and the CUDA runtime gives them; else malloc'd).
std::function<net::BodyBuffer(const net::HttpRequest&, size_t)> infer_body_buffers(bool pinned);

// The process's pool of pinned blocks (256 MiB kept free), shared by request bodies and batches.
std::shared_ptr<BodyPool> pinned_pool();
// BatcherOptions::batch_alloc for GPU models: a host tensor in a block of pinned_pool(); an
// undefined tensor (the batcher then uses Tensor::empty) when no pinned memory is to be had.
Tensor pinned_batch_tensor(DType dtype, const Shape& shape);

// Page-locked host memory (cudaHostAlloc, portable); nullptr without CUDA or when it fails.
void* pinned_host_alloc(size_t bytes);
void pinned_host_free(void* p);

}  // namespace gpuopt::server
