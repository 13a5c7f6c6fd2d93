// Latency primitives: what one launch, one event round trip, one allocation and a graph of many
// small kernels cost. Host-side costs use the steady clock; device-side spans use events.
#include "bench/cuda/common.h"
#include "bench/gpu.h"

#include <fmt/format.h>

#include <chrono>

namespace gpuopt::bench {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

constexpr int kGraphKernels = 100;
constexpr int kSmallElems = 1024;

// Host time of `fn` (which may enqueue work and synchronise), median of `repeat` calls of a
// batch of `batch`, per call.
template <typename F>
Result<TimingStats> host_time(int repeat, int batch, F&& fn) {
  for (int w = 0; w < 3; ++w) GPUOPT_RETURN_IF_ERROR(fn());
  std::vector<double> s;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = Clock::now();
    for (int b = 0; b < batch; ++b) GPUOPT_RETURN_IF_ERROR(fn());
    s.push_back(since(t0) / batch);
  }
  return summarize(s);
}

struct Graph {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~Graph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (g) cudaGraphDestroy(g);
  }
};

Status build_graph(float* p, cudaStream_t st, Graph* g) {
  GPUOPT_CHECK_CALL(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < kGraphKernels; ++k) cuda::launch_add_one(p, kSmallElems, st);
  GPUOPT_CHECK_CALL(cudaStreamEndCapture(st, &g->g));
  GPUOPT_CHECK_CALL(cudaGraphInstantiate(&g->exec, g->g, 0));
  return Status::Ok();
}

}  // namespace

Result<std::vector<LatencyEntry>> run_latency(int device, int repeat) {
  GPUOPT_CHECK_CALL(cudaSetDevice(device));
  cuda::Stream st;
  GPUOPT_RETURN_IF_ERROR(st.create());
  const cudaStream_t s = st.get();
  std::vector<LatencyEntry> out;

  // 1. Launch: host cost of enqueueing an empty kernel (the stream drains between batches).
  {
    constexpr int kBatch = 200;
    std::vector<double> v;
    for (int r = 0; r < repeat + 3; ++r) {
      const auto t0 = Clock::now();
      for (int b = 0; b < kBatch; ++b) cuda::launch_empty(s);
      const double dt = since(t0) / kBatch;
      GPUOPT_CHECK_CALL(cudaStreamSynchronize(s));
      if (r >= 3) v.push_back(dt);
    }
    GPUOPT_CHECK_CALL(cudaGetLastError());
    out.push_back({"launch_enqueue", "empty kernel", summarize(v), "host time of one <<<>>> launch, async"});
  }
  // 2. Launch + wait: an empty kernel's full round trip seen by the host.
  {
    GPUOPT_ASSIGN_OR_RETURN(auto t, host_time(repeat, 20, [&]() -> Status {
                              cuda::launch_empty(s);
                              GPUOPT_CHECK_CALL(cudaStreamSynchronize(s));
                              return Status::Ok();
                            }));
    out.push_back({"launch_roundtrip", "empty kernel", t, "launch then cudaStreamSynchronize"});
  }
  // 3. Back-to-back empty kernels on the device (event span / count): launch throughput.
  {
    auto op = [&](uint64_t) -> Status {
      cuda::launch_empty(s);
      return Status::Ok();
    };
    GPUOPT_ASSIGN_OR_RETURN(auto t, cuda::time_on_stream(s, repeat, op, 1e-3, 1000));
    out.push_back({"kernel_back_to_back", "empty kernel", t, "device time per kernel, 1000 queued"});
  }
  // 4. Event round trip: record on an idle stream and wait for it.
  {
    cudaEvent_t e;
    GPUOPT_CHECK_CALL(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    auto t = host_time(repeat, 20, [&]() -> Status {
      GPUOPT_CHECK_CALL(cudaEventRecord(e, s));
      GPUOPT_CHECK_CALL(cudaEventSynchronize(e));
      return Status::Ok();
    });
    cudaEventDestroy(e);
    if (!t.ok()) return t.status();
    out.push_back({"event_roundtrip", "record + synchronize", *t, "host time"});
  }
  // 5. Allocation: cudaMalloc/cudaFree against a stream-ordered pool that keeps its memory.
  cudaMemPool_t pool;
  GPUOPT_CHECK_CALL(cudaDeviceGetDefaultMemPool(&pool, device));
  uint64_t keep = UINT64_MAX;
  GPUOPT_CHECK_CALL(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  for (size_t bytes : {size_t{1} << 20, size_t{64} << 20}) {
    const std::string param = bytes == (size_t{1} << 20) ? "1 MiB" : "64 MiB";
    GPUOPT_ASSIGN_OR_RETURN(auto tm, host_time(repeat, 10, [&]() -> Status {
                              void* p = nullptr;
                              GPUOPT_CHECK_CALL(cudaMalloc(&p, bytes));
                              GPUOPT_CHECK_CALL(cudaFree(p));
                              return Status::Ok();
                            }));
    out.push_back({"cudaMalloc+cudaFree", param, tm, "host time of the pair"});
    GPUOPT_ASSIGN_OR_RETURN(auto ta, host_time(repeat, 10, [&]() -> Status {
                              void* p = nullptr;
                              GPUOPT_CHECK_CALL(cudaMallocAsync(&p, bytes, s));
                              GPUOPT_CHECK_CALL(cudaFreeAsync(p, s));
                              GPUOPT_CHECK_CALL(cudaStreamSynchronize(s));
                              return Status::Ok();
                            }));
    out.push_back({"cudaMallocAsync+cudaFreeAsync", param, ta, "pooled (release threshold: keep), incl. stream sync"});
  }
  // 6. 100 small dependent kernels: individual launches against one graph launch.
  {
    cuda::DeviceBuffer buf;
    GPUOPT_RETURN_IF_ERROR(buf.alloc(kSmallElems * sizeof(float)));
    cuda::launch_fill(cuda::FillKind::F32, buf.get(), kSmallElems, 9, s);
    auto launches = [&](uint64_t) -> Status {
      for (int k = 0; k < kGraphKernels; ++k) cuda::launch_add_one(buf.get<float>(), kSmallElems, s);
      return Status::Ok();
    };
    GPUOPT_ASSIGN_OR_RETURN(auto tl, cuda::time_on_stream(s, repeat, launches, 1e-3, 100));
    Graph g;
    GPUOPT_RETURN_IF_ERROR(build_graph(buf.get<float>(), s, &g));
    auto graph = [&](uint64_t) -> Status {
      GPUOPT_CHECK_CALL(cudaGraphLaunch(g.exec, s));
      return Status::Ok();
    };
    GPUOPT_ASSIGN_OR_RETURN(auto tg, cuda::time_on_stream(s, repeat, graph, 1e-3, 100));
    out.push_back({"100_kernel_launches", "100 x add-one (4 KiB)", tl, "device time for the 100 kernels"});
    out.push_back(
        {"cuda_graph_100_kernels", "100 x add-one (4 KiB)", tg,
         fmt::format("one graph launch; {:.2f}x faster than launches", tg.median > 0 ? tl.median / tg.median : 0)});
  }
  return out;
}

Status check_graph(int device) {
  GPUOPT_CHECK_CALL(cudaSetDevice(device));
  cuda::Stream st;
  GPUOPT_RETURN_IF_ERROR(st.create());
  cuda::DeviceBuffer a, b;
  GPUOPT_RETURN_IF_ERROR(a.alloc(kSmallElems * sizeof(float)));
  GPUOPT_RETURN_IF_ERROR(b.alloc(kSmallElems * sizeof(float)));
  cuda::launch_fill(cuda::FillKind::F32, a.get(), kSmallElems, 77, st.get());
  std::vector<float> in(kSmallElems), ga(kSmallElems), gb(kSmallElems);
  GPUOPT_CHECK_CALL(cudaStreamSynchronize(st.get()));
  GPUOPT_CHECK_CALL(cudaMemcpy(in.data(), a.get(), kSmallElems * 4, cudaMemcpyDeviceToHost));
  GPUOPT_CHECK_CALL(cudaMemcpy(b.get(), a.get(), kSmallElems * 4, cudaMemcpyDeviceToDevice));
  for (int k = 0; k < kGraphKernels; ++k) cuda::launch_add_one(a.get<float>(), kSmallElems, st.get());
  Graph g;
  GPUOPT_RETURN_IF_ERROR(build_graph(b.get<float>(), st.get(), &g));
  GPUOPT_CHECK_CALL(cudaGraphLaunch(g.exec, st.get()));
  GPUOPT_CHECK_CALL(cudaStreamSynchronize(st.get()));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  GPUOPT_CHECK_CALL(cudaMemcpy(ga.data(), a.get(), kSmallElems * 4, cudaMemcpyDeviceToHost));
  GPUOPT_CHECK_CALL(cudaMemcpy(gb.data(), b.get(), kSmallElems * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < kSmallElems; ++i) {
    float want = in[i];
    for (int k = 0; k < kGraphKernels; ++k) want += 1.0f;
    if (ga[i] != want || gb[i] != want)
      return Status::Internal("element {}: launches {} graph {} CPU {}", i, ga[i], gb[i], want);
  }
  return Status::Ok();
}

}  // namespace gpuopt::bench
