// run_conv_graph (conv_graph.h): NhwcFusedConv through a tuned cuDNN frontend graph.
#include "ops/conv/cuda/conv_graph.h"

#include "backends/cuda/plan_store.h"
#include "gpuopt/kernel_settings.h"
#include "core/log.h"
#include "ops/conv/cuda/cudnn_graph_tune.h"

#include <cuda_runtime.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

namespace gpuopt::cuda {
namespace {

namespace fe = cudnn_frontend;
using TA = fe::graph::Tensor_attributes;

enum Uid : int64_t { kX = 1, kW, kB, kZ, kY };

struct Entry {
  Status status = Status::Unimplemented("not built");
  std::unique_ptr<TunedGraph> graph;
  std::string store_key;
  mutable std::atomic<bool> failed{false}, stored{false};
};

using Key = std::tuple<int, ConvKey, bool, bool, bool>;  // device, shape, relu, bias, residual
std::mutex g_mu;
std::map<Key, std::unique_ptr<Entry>> g_graphs;

std::vector<int64_t> nhwc_strides(int64_t c, int64_t h, int64_t w) {
  return {h * w * c, 1, w * c, c};
}

std::shared_ptr<fe::graph::Graph> make_graph(const ConvKey& k, bool relu, bool has_b, bool has_z) {
  const fe::DataType_t dt = k.dt == DType::BF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(dt).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
  auto x = g->tensor(TA().set_name("X").set_uid(kX).set_dim({k.n, k.c, k.h, k.w}).set_stride(nhwc_strides(k.c, k.h, k.w))
                         .set_data_type(dt));
  auto w = g->tensor(TA().set_name("W").set_uid(kW).set_dim({k.m, k.c, k.kh, k.kw})
                         .set_stride(nhwc_strides(k.c, k.kh, k.kw)).set_data_type(dt));
  auto y = g->conv_fprop(x, w, fe::graph::Conv_fprop_attributes()
                                   .set_name("conv")
                                   .set_padding({k.ph, k.pw})
                                   .set_stride({k.sh, k.sw})
                                   .set_dilation({k.dh, k.dw})
                                   .set_compute_data_type(fe::DataType_t::FLOAT));
  y->set_data_type(fe::DataType_t::FLOAT);
  auto pw = [](fe::PointwiseMode_t mode) {
    return fe::graph::Pointwise_attributes().set_mode(mode).set_compute_data_type(fe::DataType_t::FLOAT);
  };
  if (has_b) {
    auto b = g->tensor(TA().set_name("B").set_uid(kB).set_dim({1, k.m, 1, 1}).set_stride({k.m, 1, k.m, k.m})
                           .set_data_type(dt));
    y = g->pointwise(y, b, pw(fe::PointwiseMode_t::ADD));
    y->set_data_type(fe::DataType_t::FLOAT);
  }
  if (has_z) {
    auto z = g->tensor(TA().set_name("Z").set_uid(kZ).set_dim({k.n, k.m, k.oh, k.ow})
                           .set_stride(nhwc_strides(k.m, k.oh, k.ow)).set_data_type(dt));
    y = g->pointwise(y, z, pw(fe::PointwiseMode_t::ADD));
    y->set_data_type(fe::DataType_t::FLOAT);
  }
  if (relu) {
    y = g->pointwise(y, pw(fe::PointwiseMode_t::RELU_FWD));
    y->set_data_type(fe::DataType_t::FLOAT);
  }
  y->set_output(true).set_uid(kY).set_dim({k.n, k.m, k.oh, k.ow}).set_stride(nhwc_strides(k.m, k.oh, k.ow))
      .set_data_type(dt);
  return g;
}

const Entry* find_entry(const ConvKey& k, bool relu, bool has_b, bool has_z, cudnnHandle_t h) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) cudaGetLastError();
  std::lock_guard<std::mutex> lock(g_mu);
  auto& slot = g_graphs[{device, k, relu, has_b, has_z}];
  if (slot) return slot.get();
  slot = std::make_unique<Entry>();
  Entry& e = *slot;
  e.store_key = fmt::format("convgraph {},{},{},{}", conv_key_text(k), relu ? "relu" : "id", has_b ? "b" : "nob",
                            has_z ? "z" : "noz");
  GraphTuneOptions o;
  if (auto v = PlanStore::current().find(e.store_key); v && v->rfind("engine=", 0) == 0) o.preferred = v->substr(7);
  auto t = TunedGraph::build(make_graph(k, relu, has_b, has_z), h, o, "NhwcFusedConv graph " + conv_key_text(k));
  e.status = t.status();
  if (t.ok()) e.graph = std::move(*t);
  GPUOPT_LOG(info, "NhwcFusedConv {} (GPUOPT_CONV_ENGINE=graph): {}", conv_key_text(k),
             e.status.ok() ? "cuDNN graph" : "legacy path (" + e.status.message() + ")");
  return &e;
}

}  // namespace

Status run_conv_graph(CudaKernelContext& k, const ConvKey& key, bool relu, const void* x, const void* w, const void* b,
                      const void* z, void* y) {
  if (!key.nhwc || key.group != 1 || (key.dt != DType::F16 && key.dt != DType::BF16))
    return Status::Unimplemented("not a channels-last fp16/bf16 group-1 convolution");
  GPUOPT_ASSIGN_OR_RETURN(cudnnHandle_t h, k.ctx.cudnn());
  const Entry* e = find_entry(key, relu, b != nullptr, z != nullptr, h);
  if (!e->status.ok()) return e->status;
  if (e->failed.load()) return Status::Unimplemented("the cuDNN graph failed to execute before");
  Tensor hold;
  GPUOPT_ASSIGN_OR_RETURN(void* ws, call_workspace(k.ctx, static_cast<size_t>(e->graph->workspace()), &hold));
  std::unordered_map<int64_t, void*> pack{{kX, const_cast<void*>(x)}, {kW, const_cast<void*>(w)}, {kY, y}};
  if (b) pack[kB] = const_cast<void*>(b);
  if (z) pack[kZ] = const_cast<void*>(z);
  const Status st = e->graph->execute(h, k.ctx.stream, pack, ws);
  if (!st.ok()) {
    cudaGetLastError();
    if (!e->failed.exchange(true))
      GPUOPT_LOG(warn, "{}: cuDNN graph failed to execute ({}); the legacy path runs this shape", node_label(k.node),
                 st.message());
    return Status::Unimplemented("cuDNN graph failed to execute");
  }
  if (e->graph->tuned() && e->graph->candidates() > 1 && !e->stored.exchange(true))
    PlanStore::current().put(e->store_key, "engine=" + e->graph->chosen_tag());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
