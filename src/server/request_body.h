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
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace gpuopt::server {

// Memory for the body of `head` (its request line and headers) of `size` bytes from malloc; no
// data (the HTTP layer's default std::string body) for any other request or a malformed length.
net::BodyBuffer infer_body_buffer(const net::HttpRequest& head, size_t size);

// Blocks of a few sizes (powers of two from 1 MiB) kept for reuse: a pinned allocation costs far
// more than a malloc, and freeing one (cudaFreeHost) waits for the device. At most `capacity`
// bytes are ever allocated (in use and free together), as Triton's pinned memory pool
// (--pinned-memory-pool-byte-size): a block goes back to the pool, never to the system, when the
// last tensor viewing it is gone; a take that finds no free block of its size class allocates
// one while the capacity allows, else reuses a free block up to 4x larger, else gives free blocks
// back (smallest first) to make room, else returns nullptr and the caller uses ordinary memory.
class BodyPool : public std::enable_shared_from_this<BodyPool> {
 public:
  using Alloc = std::function<void*(size_t)>;  // nullptr: no memory
  using Free = std::function<void(void*)>;
  struct Stats {
    size_t capacity = 0, allocated = 0, in_use = 0;  // bytes
    uint64_t allocs = 0, frees = 0, fallbacks = 0;   // blocks allocated / freed, takes refused
  };
  BodyPool(Alloc alloc, Free free, size_t capacity)
      : alloc_(std::move(alloc)), free_fn_(std::move(free)), capacity_(capacity) {}
  ~BodyPool();
  // A block of at least `bytes` (rounded up to its size class), owned by the returned pointer;
  // nullptr when the capacity is taken by blocks in use (or the allocation fails).
  std::shared_ptr<void> take(size_t bytes);
  size_t free_bytes() const;
  Stats stats() const;

 private:
  void give_back(void* p, size_t cls);
  Alloc alloc_;
  Free free_fn_;
  size_t capacity_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // size class -> its free blocks
  size_t free_total_ = 0, allocated_ = 0, in_use_ = 0;
  Stats stats_;
};

// Binary bodies below this many bytes are read into malloc'd memory, not the pinned pool.
inline constexpr size_t kPinnedBodyMin = size_t{256} << 10;
// The pinned pool's capacity by default (gpuopt serve --pinned-memory-pool-byte-size).
inline constexpr size_t kDefaultPinnedPoolBytes = size_t{1} << 30;
// Sets the capacity of pinned_pool(); takes effect only before its first use (serve's start).
void set_pinned_pool_capacity(size_t bytes);

// The hook for net::ServerOptions::body_buffer: infer_body_buffer's layout in blocks of a pool,
// pinned ones when `pinned` (and the CUDA runtime gives them; else malloc'd).
std::function<net::BodyBuffer(const net::HttpRequest&, size_t)> infer_body_buffers(bool pinned);

// The process's pool of pinned blocks (set_pinned_pool_capacity; 1 GiB by default), shared by request
// bodies and batches.
std::shared_ptr<BodyPool> pinned_pool();
// BatcherOptions::batch_alloc for GPU models: a host tensor in a block of pinned_pool(); an
// undefined tensor (the batcher then uses Tensor::empty) when no pinned memory is to be had.
Tensor pinned_batch_tensor(DType dtype, const Shape& shape);

// Page-locked host memory (cudaHostAlloc, portable); nullptr without CUDA or when it fails.
void* pinned_host_alloc(size_t bytes);
void pinned_host_free(void* p);

}  // namespace gpuopt::server
