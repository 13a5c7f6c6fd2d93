// The CUDA executor: one compiled graph on one device. Each concurrent run takes an execution
// context of its own (stream, cuBLASLt/cuDNN handles, workspace, pinned staging buffer, the CUDA
// graphs it captured), so runs of one session overlap. Every entry point that touches the GPU
// first makes the executable's device current on the calling thread (server instances run on
// batcher threads, several devices in one process).
//
//   cuda_executable.cpp   contexts, constants, the eager node-by-node run
//   cuda_graph_exec.cpp   capture of a shape's run as a CUDA graph and its replay
//   cuda_backend.cpp      the Backend (placement, compile) and its registration per device
#pragma once

#include "backends/backend.h"
#include "backends/deferred_capture.h"
#include "backends/pipelined.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/plan_store.h"
#include "backends/cuda/staging.h"
#include "core/buffer_pool.h"
#include "backends/memory_plan.h"

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

namespace gpuopt::cuda {

// One captured CUDA graph: the run for one set of input shapes, replayed on later runs with the
// same shapes. Its inputs and outputs live in buffers it owns; intermediates are the graph's own
// (allocated and freed inside it).
struct GraphEntry {
  enum class State { kWarm, kReady, kRefused };
  std::vector<std::pair<DType, Shape>> key;      // the inputs' dtypes and shapes
  State state = State::kWarm;                    // kWarm: one eager run seen, capture on the next
  std::string refused;                           // why this shape runs eager (kRefused)
  std::vector<std::pair<DType, Shape>> out_sig;  // the outputs, from the eager run
  std::vector<Tensor> in_bufs, out_bufs;
  PinnedUploads uploads;                         // shape-derived host values the graph copies up
  cudaGraphExec_t exec = nullptr;
  uint64_t last_used = 0;
  GraphEntry() = default;
  GraphEntry(const GraphEntry&) = delete;
  GraphEntry& operator=(const GraphEntry&) = delete;
  ~GraphEntry();
};

// A context keeps a few graphs (one per input shape seen most recently): a server with dynamic
// batching sees a handful of batch sizes; beyond that the least recently used one goes.
constexpr size_t kMaxGraphsPerContext = 16;

// GPUOPT_MEMORY_PLAN=static: one input shape's memory plan on one context and its arena, one
// device allocation made outside any capture; the outputs of the nodes on the GPU are views
// into it at the planned offsets, so a captured graph replays over fixed addresses. Dropped
// with the context, or (least recently used, with that shape's graph) beyond
// kMaxGraphsPerContext shapes.
struct ShapeArena {
  std::vector<std::pair<DType, Shape>> key;
  MemoryPlan plan;
  Tensor arena;  // u8 [plan.arena_bytes], from the device's pool on the context's stream
  uint64_t last_used = 0;
};

struct Context {
  ExecContext ec;
  Staging staging;
  std::vector<std::unique_ptr<GraphEntry>> graphs;
  std::vector<std::unique_ptr<ShapeArena>> arenas;
  ShapeArena* arena = nullptr;      // the current run's (static memory plan), else nullptr
  GraphEntry* capturing = nullptr;  // the graph being recorded, during capture()
  uint64_t tick = 0;
  ~Context();
};

// A context on `device` (made current on this thread first).
Result<std::unique_ptr<Context>> make_context(int device, DeviceMemory* mem);

// Ops whose result changes from run to run with the same inputs: a graph would freeze one draw.
bool nondeterministic(std::string_view op);

// Idle page-locked output buffers an executable keeps for reuse (CudaExecutable::host_pool_):
// the batches in flight at once (downloading, being answered: about four) of BERT-base's 50 MB
// output at batch 128. Only buffers that were in use at once are ever kept.
constexpr size_t kHostPoolIdleMax = size_t{256} << 20;

// The pipelined runs' state (cuda_pipeline.cpp): one context held for them, an upload and a
// download stream beside its compute stream, and kPipelineDepth slots used in turn.
struct Lane;
struct LaneDeleter {
  void operator()(Lane* l) const;
};

class CudaExecutable final : public Executable, public PipelinedExecutable, public DeferredCapture {
 public:
  CudaExecutable(Graph g, std::vector<NodePlace> place, DeviceMemory* mem, int device, bool graphs,
                 MemoryPlanMode memory_plan = MemoryPlanMode::kPool, KernelSettings settings = {});
  ~CudaExecutable() override;

  // Uploads every constant a CUDA node reads on the device.
  Status upload_constants();
  // Reads the plan cache (CompileOptions::cache_dir) into the device's plan store; each run that
  // makes a new choice writes it back.
  void open_plan_cache(const std::string& dir, const std::string& model_hash);
  // With a plan cache and CUDA graphs: the input shapes the cache lists as captured for this
  // model (backends/captured_shapes.h; entries that do not fit are skipped with a warning), which
  // capture_next_cached_shape() (DeferredCapture) runs twice on zeros each, eager then captured,
  // so those shapes replay from the first request.
  void list_cached_shapes();
  bool capture_next_cached_shape() override;
  PlanCacheStatus plan_cache() const override;
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, const RunOptions& options) override;
  // cuda_pipeline.cpp: a captured shape's runs overlapped (upload / compute / download streams).
  Status begin(const std::vector<Tensor>& inputs) override;
  Result<std::vector<Tensor>> finish() override;

 private:
  Result<Lane*> lane();
  // Queues one run of captured graph `g` in lane slot `slot`: upload, compute, download.
  Status enqueue(Lane& lane, GraphEntry& g, int slot, const std::vector<Tensor>& inputs);

  struct Slot {
    Tensor host;
    Tensor dev;
  };

  Result<std::unique_ptr<Context>> acquire();
  void release(std::unique_ptr<Context> c);

  // cuda_graph_exec.cpp: eager the first time a context sees an input shape, captured the
  // second time, replayed from then on.
  Result<std::vector<Tensor>> dispatch(Context& c, const std::vector<Tensor>& inputs, RunProfile* prof);
  GraphEntry* find_graph(Context& c, const std::vector<Tensor>& inputs);
  void add_graph(Context& c, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outs);
  // GPUOPT_MEMORY_PLAN=static: this context's arena for these input shapes (planned and
  // allocated on first use).
  Result<ShapeArena*> arena_for(Context& c, const std::vector<Tensor>& inputs);
  // The outputs' storage of a node on the GPU: its planned view of the arena when it fits.
  Result<Tensor> alloc_output(Context& c, ValueId v, const ValueInfo& vi);
  Status capture(Context& c, GraphEntry& g, const std::vector<Tensor>& inputs);
  Result<std::vector<Tensor>> replay(Context& c, GraphEntry& g, const std::vector<Tensor>& inputs, bool uploaded,
                                     RunProfile* prof);

  // cuda_executable.cpp: the eager run.
  Status to_device(Context& c, Slot& s, const std::string& name);
  Status to_host(Context& c, Slot& s);
  std::vector<Slot> init_slots() const;
  Result<std::vector<Tensor>> run_eager(Context& c, const std::vector<Tensor>& inputs, RunProfile* prof);
  Status run_nodes(Context& c, std::vector<Slot>& slots, RunProfile* prof, size_t* failed = nullptr);
  Status run_cpu_node(Context& c, const Node& node, std::vector<Slot>& slots, std::vector<const Tensor*>& in_ptrs);
  Status run_cuda_node(Context& c, const Node& node, std::vector<Slot>& slots);

  Graph graph_;
  std::vector<NodePlace> place_;
  DeviceMemory* mem_;
  int device_;
  bool graphs_;
  MemoryPlanMode memory_plan_;
  KernelSettings settings_;  // every context's ExecContext::settings points here
  std::vector<int32_t> last_use_;
  std::vector<bool> input_on_device_;  // per graph input: read by a node on the GPU
  std::mutex mu_;
  std::vector<std::unique_ptr<Context>> free_;
  std::unique_ptr<PlanCacheLink> plan_cache_;
  std::string model_hash_;  // the plan cache's key for this model's captured shapes
  std::vector<std::vector<std::pair<DType, Shape>>> cached_shapes_;  // list_cached_shapes()
  size_t next_cached_ = 0, cached_done_ = 0;                         // capture_next_cached_shape()
  double cached_ms_ = 0;
  // Page-locked buffers the outputs are downloaded into and handed out as they are (replay() and
  // the pipelined finish()): a reply is sent from the batch's buffer, which comes back here when
  // the last one is written, instead of a copy into fresh pageable memory (a 50 MB batch output:
  // its page faults and the copy took milliseconds with the GPU idle).
  std::shared_ptr<BufferPool> host_pool_;
  std::unique_ptr<Lane, LaneDeleter> lane_;  // begin()/finish(); released before the contexts
  std::vector<Tensor> dev_const_;  // declared last: released before the contexts and their streams
};

// Device time of the compute alone (inputs already on the GPU, outputs not yet copied back):
// what PyTorch's CUDA-event timings measure. Filled into RunProfile::device_us.
class DeviceSpan {
 public:
  DeviceSpan(cudaStream_t s, RunProfile* prof);
  Status stop();
  ~DeviceSpan();
  DeviceSpan(const DeviceSpan&) = delete;
  DeviceSpan& operator=(const DeviceSpan&) = delete;

 private:
  cudaStream_t s_;
  RunProfile* prof_;
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

}  // namespace gpuopt::cuda
