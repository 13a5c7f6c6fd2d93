// Pipelined runs of the CUDA executor (backends/pipelined.h): consecutive batches of a captured
// shape overlap their upload, compute and download on three streams of one context.
//
// Per run, in one of kPipelineDepth slots used in turn (each with its own pinned and device copies
// of the inputs and outputs):
//
//   host:     inputs -> the slot's pinned buffers (skipped for inputs already in pinned memory,
//             the server's batches and request bodies: those are uploaded from where they are,
//             and the slot holds them until it is refilled)
//   upload:   wait in_free[slot]   H2D pinned -> slot's device inputs      record uploaded[slot]
//   compute:  wait uploaded[slot]  D2D -> the graph's inputs  record in_free[slot]
//             graph launch         D2D the graph's outputs -> slot's device outputs  record computed[slot]
//   download: wait computed[slot]  D2H -> the slot's pinned outputs          record downloaded[slot]
//   finish(): wait downloaded[slot] on the host; the outputs are tensors over the pinned buffers.
//
// So run N+1's upload runs on its own stream while run N computes, and run N's download while
// N+1 computes; the graph's own input and output buffers are touched on the compute stream only
// (in launch order), the slots' buffers only after the slot's previous run was finished.
// A shape that is not captured yet (its first two runs) or runs eager goes through the usual
// synchronous dispatch, after the runs in flight on the compute stream.
#include "backends/cuda/cuda_executable.h"

#include "core/cuda_check.h"
#include "core/parallel_copy.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <utility>

namespace gpuopt::cuda {
namespace {

struct PinnedBuf {
  void* p = nullptr;
  size_t cap = 0;
  PinnedBuf() = default;
  PinnedBuf(const PinnedBuf&) = delete;
  PinnedBuf& operator=(const PinnedBuf&) = delete;
  PinnedBuf(PinnedBuf&& o) noexcept : p(std::exchange(o.p, nullptr)), cap(std::exchange(o.cap, 0)) {}
  ~PinnedBuf() {
    if (p) cudaFreeHost(p);
  }
  Status reserve(size_t n) {
    if (n <= cap) return Status::Ok();
    if (p) cudaFreeHost(p);
    p = nullptr;
    cap = 0;
    GPUOPT_CHECK_CALL(cudaHostAlloc(&p, n, cudaHostAllocPortable));
    cap = n;
    return Status::Ok();
  }
};

struct DevBuf {
  void* p = nullptr;
  size_t cap = 0;
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p(std::exchange(o.p, nullptr)), cap(std::exchange(o.cap, 0)) {}
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  Status reserve(size_t n) {
    if (n <= cap) return Status::Ok();
    if (p) cudaFree(p);
    p = nullptr;
    cap = 0;
    GPUOPT_CHECK_CALL(cudaMalloc(&p, n));
    cap = n;
    return Status::Ok();
  }
};

// A pinned buffer the outputs handed out by finish() view (no copy out of it): refilled when
// nothing holds it any more; while a reply is still being sent from it, the slot takes another
// from the executable's pool, and this one goes back there with its last tensor.
Status pinned_out(BufferPool& pool, std::shared_ptr<Storage>* st, size_t n) {
  if (*st && st->use_count() == 1 && (*st)->bytes >= n) return Status::Ok();
  GPUOPT_ASSIGN_OR_RETURN(*st, pool.acquire(n));
  return Status::Ok();
}

// Page-locked host memory (cudaHostAlloc'd or registered): the copy engine reads it in place.
bool pinned(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) == cudaSuccess && attr.type == cudaMemoryTypeHost) return true;
  cudaGetLastError();
  return false;
}

struct LaneSlot {
  std::vector<PinnedBuf> in_host;
  std::vector<Tensor> in_held;  // pinned inputs uploaded from where they are, held until the slot is refilled
  std::vector<std::shared_ptr<Storage>> out_host;
  std::vector<DevBuf> in_dev, out_dev;
  cudaEvent_t uploaded = nullptr, in_free = nullptr, computed = nullptr, downloaded = nullptr;
};

struct Pending {
  bool async = false;
  int slot = 0;
  Result<std::vector<Tensor>> done = std::vector<Tensor>{};  // a synchronous run's result
  std::vector<std::pair<DType, Shape>> out_sig;               // an async run's outputs
};

}  // namespace

struct Lane {
  std::unique_ptr<Context> ctx;
  cudaStream_t up = nullptr, down = nullptr;
  LaneSlot slots[kPipelineDepth];
  int next = 0;
  std::deque<Pending> pending;

  ~Lane() {
    cudaSetDevice(ctx->ec.device);
    if (up) cudaStreamSynchronize(up);
    if (down) cudaStreamSynchronize(down);
    cudaStreamSynchronize(ctx->ec.stream);
    for (LaneSlot& s : slots)
      for (cudaEvent_t e : {s.uploaded, s.in_free, s.computed, s.downloaded})
        if (e) cudaEventDestroy(e);
    if (up) cudaStreamDestroy(up);
    if (down) cudaStreamDestroy(down);
  }
};

void LaneDeleter::operator()(Lane* l) const { delete l; }

Result<Lane*> CudaExecutable::lane() {
  if (lane_) return lane_.get();
  GPUOPT_ASSIGN_OR_RETURN(std::unique_ptr<Context> ctx, acquire());  // the one the cached-shape captures warmed
  std::unique_ptr<Lane, LaneDeleter> l(new Lane());
  l->ctx = std::move(ctx);
  GPUOPT_CHECK_CALL(cudaStreamCreateWithFlags(&l->up, cudaStreamNonBlocking));
  GPUOPT_CHECK_CALL(cudaStreamCreateWithFlags(&l->down, cudaStreamNonBlocking));
  for (LaneSlot& s : l->slots)
    for (cudaEvent_t* e : {&s.uploaded, &s.in_free, &s.computed, &s.downloaded})
      GPUOPT_CHECK_CALL(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  lane_ = std::move(l);
  return lane_.get();
}

Status CudaExecutable::begin(const std::vector<Tensor>& inputs) {
  GPUOPT_CHECK_CALL(cudaSetDevice(device_));
  GPUOPT_ASSIGN_OR_RETURN(Lane * l, lane());
  if (l->pending.size() >= static_cast<size_t>(kPipelineDepth))
    return Status::FailedPrecondition("{} runs begun and not finished (the most at once)", kPipelineDepth);
  Context& c = *l->ctx;
  GraphEntry* g = graphs_ ? find_graph(c, inputs) : nullptr;
  bool strings = false;
  for (const Tensor& t : inputs) strings = strings || t.dtype() == DType::String;
  if (!g || g->state != GraphEntry::State::kReady || strings) {
    // Not captured (yet): the usual run, after those in flight (it may evict a graph they use).
    Pending p;
    const cudaError_t idle = cudaStreamSynchronize(c.ec.stream);
    p.done = idle == cudaSuccess ? dispatch(c, inputs, nullptr) : Result<std::vector<Tensor>>(GPUOPT_CALL_STATUS(idle));
    if (const cudaError_t e = cudaStreamSynchronize(c.ec.stream); e != cudaSuccess && p.done.ok())
      p.done = GPUOPT_CALL_STATUS(e);
    if (plan_cache_ && p.done.ok()) plan_cache_->save_if_changed();
    l->pending.push_back(std::move(p));
    return Status::Ok();
  }
  g->last_used = ++c.tick;
  const int k = l->next;
  if (Status st = enqueue(*l, *g, k, inputs); !st.ok()) {
    // Whatever was queued on the slot must be done before the slot is filled again.
    cudaStreamSynchronize(l->up);
    cudaStreamSynchronize(c.ec.stream);
    cudaStreamSynchronize(l->down);
    cudaGetLastError();
    return st;
  }
  Pending p;
  p.async = true;
  p.slot = k;
  p.out_sig = g->out_sig;
  l->pending.push_back(std::move(p));
  l->next = (k + 1) % kPipelineDepth;
  return Status::Ok();
}

Status CudaExecutable::enqueue(Lane& lane, GraphEntry& graph, int slot, const std::vector<Tensor>& inputs) {
  Lane* l = &lane;
  GraphEntry* g = &graph;
  Context& c = *l->ctx;
  LaneSlot& s = l->slots[slot];
  const size_t ni = inputs.size(), no = g->out_bufs.size();
  s.in_host.resize(std::max(s.in_host.size(), ni));
  s.in_dev.resize(std::max(s.in_dev.size(), ni));
  s.out_host.resize(std::max(s.out_host.size(), no));
  s.out_dev.resize(std::max(s.out_dev.size(), no));
  // The slot's previous run was finished: its buffers are idle and may be refilled or regrown
  // (grown before anything is queued: cudaMalloc/cudaFree would wait for the device).
  for (size_t o = 0; o < no; ++o) {
    GPUOPT_RETURN_IF_ERROR(s.out_dev[o].reserve(g->out_bufs[o].nbytes()));
    GPUOPT_RETURN_IF_ERROR(pinned_out(*host_pool_, &s.out_host[o], g->out_bufs[o].nbytes()));
  }
  // Its previous uploads are done too: the inputs it held may go.
  s.in_held.clear();
  std::vector<const void*> from(ni, nullptr);
  for (size_t i = 0; i < ni; ++i) {
    const size_t n = inputs[i].nbytes();
    GPUOPT_RETURN_IF_ERROR(s.in_dev[i].reserve(n));
    if (!n) continue;
    if (pinned(inputs[i].raw())) {  // a 19 MB batch is not copied once more on the host
      from[i] = inputs[i].raw();
      s.in_held.push_back(inputs[i]);
      continue;
    }
    GPUOPT_RETURN_IF_ERROR(s.in_host[i].reserve(n));
    from[i] = s.in_host[i].p;
    parallel_memcpy(s.in_host[i].p, inputs[i].raw(), n);
  }
  GPUOPT_CHECK_CALL(cudaStreamWaitEvent(l->up, s.in_free, 0));
  for (size_t i = 0; i < ni; ++i)
    if (const size_t n = inputs[i].nbytes())
      GPUOPT_CHECK_CALL(cudaMemcpyAsync(s.in_dev[i].p, from[i], n, cudaMemcpyHostToDevice, l->up));
  GPUOPT_CHECK_CALL(cudaEventRecord(s.uploaded, l->up));

  GPUOPT_CHECK_CALL(cudaStreamWaitEvent(c.ec.stream, s.uploaded, 0));
  for (size_t i = 0; i < ni; ++i)
    if (const size_t n = inputs[i].nbytes())
      GPUOPT_CHECK_CALL(cudaMemcpyAsync(g->in_bufs[i].raw(), s.in_dev[i].p, n, cudaMemcpyDeviceToDevice, c.ec.stream));
  GPUOPT_CHECK_CALL(cudaEventRecord(s.in_free, c.ec.stream));
  GPUOPT_CHECK_CALL(cudaGraphLaunch(g->exec, c.ec.stream));
  for (size_t o = 0; o < no; ++o)
    if (const size_t n = g->out_bufs[o].nbytes())
      GPUOPT_CHECK_CALL(cudaMemcpyAsync(s.out_dev[o].p, g->out_bufs[o].raw(), n, cudaMemcpyDeviceToDevice, c.ec.stream));
  GPUOPT_CHECK_CALL(cudaEventRecord(s.computed, c.ec.stream));

  GPUOPT_CHECK_CALL(cudaStreamWaitEvent(l->down, s.computed, 0));
  for (size_t o = 0; o < no; ++o)
    if (const size_t n = g->out_bufs[o].nbytes())
      GPUOPT_CHECK_CALL(cudaMemcpyAsync(s.out_host[o]->data, s.out_dev[o].p, n, cudaMemcpyDeviceToHost, l->down));
  GPUOPT_CHECK_CALL(cudaEventRecord(s.downloaded, l->down));
  return Status::Ok();
}

Result<std::vector<Tensor>> CudaExecutable::finish() {
  if (!lane_ || lane_->pending.empty()) return Status::FailedPrecondition("no run was begun");
  Pending p = std::move(lane_->pending.front());
  lane_->pending.pop_front();
  if (!p.async) return std::move(p.done);
  GPUOPT_CHECK_CALL(cudaSetDevice(device_));
  LaneSlot& s = lane_->slots[p.slot];
  GPUOPT_CHECK_CALL(cudaEventSynchronize(s.downloaded));
  // The outputs are the slot's pinned download buffers themselves (pinned_out): the server
  // encodes or sends its replies from them, no copy.
  std::vector<Tensor> out;
  for (size_t o = 0; o < p.out_sig.size(); ++o) out.push_back(Tensor::wrap(p.out_sig[o].first, p.out_sig[o].second, s.out_host[o]));
  return out;
}

}  // namespace gpuopt::cuda
