// Int8Conv (ai.gpuopt, written by fold_qdq, made channels-last by layout_nhwc) on the GPU:
// cuDNN's int8 convolution (NHWC int8 x and w, int32 accumulation on the tensor cores) through
// the frontend's graph API, with the epilogue in the same graph: conv -> * alpha[m] -> + beta[m]
// [-> Relu] -> int8 / f16 / f32 (int8_conv.h for alpha and beta). Per shape, in order, the first
// that cuDNN builds:
//   1. that fused graph (int8 in, int8 out: no int32 tensor in memory; the conv's virtual output
//      INT32, else FLOAT; heuristics A, then cuDNN's fallback list);
//   2. the convolution alone into int32, then gpuopt's epilogue kernel;
//   3. gpuopt's direct kernel (int8_conv.cu; slow, any shape).
// Plans are cached per device and shape, failures too; which one a shape got is logged at info.
// Checked on the H200 by scripts/gpu/int8_conv.sh (docs/quantization.md has its figures).
#include "ops/quant/cuda/int8_conv.h"

#include "backends/cuda/cuda_ops.h"
#include "ops/conv/cuda/cudnn_conv.h"
#include "core/cuda_check.h"
#include "core/log.h"

// The frontend's symbols come from the libcudnn gpuopt links (sdpa.cpp defines its handle).
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING 1
#include <cudnn_frontend.h>

#include <cuda_runtime.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

namespace gpuopt::cuda {
namespace {

namespace fe = cudnn_frontend;

enum Uid : int64_t { kX = 1, kW, kAlpha, kBeta, kY };

struct Plan {
  Status fused = Status::Unimplemented("not built"), conv_only = Status::Unimplemented("not built");
  std::shared_ptr<fe::graph::Graph> graph;  // the fused graph, else the int32 one
  int64_t workspace = 0;
  mutable std::atomic<bool> failed{false};  // execute failed once: the direct kernel from then on
};

using Key = std::tuple<int, ConvKey, bool, DType>;  // device, shape, relu, output dtype
std::mutex g_mu;
std::map<Key, std::unique_ptr<Plan>> g_plans;

fe::DataType_t fe_type(DType dt) {
  return dt == DType::I8 ? fe::DataType_t::INT8 : dt == DType::F16 ? fe::DataType_t::HALF : fe::DataType_t::FLOAT;
}

// NCHW dims with channels-last strides, as cuDNN names an NHWC tensor.
std::vector<int64_t> nhwc_strides(int64_t c, int64_t h, int64_t w) {
  return {h * w * c, 1, w * c, c};
}

// fused: the epilogue in the graph, with the convolution's virtual output in conv_out (INT32 as
// cuDNN's int8 ConvScaleBiasAct sample writes it, or FLOAT); else the convolution into INT32.
Result<std::shared_ptr<fe::graph::Graph>> build_graph(const ConvKey& k, bool fused, fe::DataType_t conv_out, bool relu,
                                                      DType out, cudnnHandle_t h, int64_t* workspace) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::INT8)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto x = g->tensor(fe::graph::Tensor_attributes()
                         .set_name("X")
                         .set_uid(kX)
                         .set_dim({k.n, k.c, k.h, k.w})
                         .set_stride(nhwc_strides(k.c, k.h, k.w))
                         .set_data_type(fe::DataType_t::INT8));
  auto w = g->tensor(fe::graph::Tensor_attributes()
                         .set_name("W")
                         .set_uid(kW)
                         .set_dim({k.m, k.c, k.kh, k.kw})
                         .set_stride(nhwc_strides(k.c, k.kh, k.kw))
                         .set_data_type(fe::DataType_t::INT8));
  auto opts = fe::graph::Conv_fprop_attributes()
                  .set_name("conv")
                  .set_padding({k.ph, k.pw})
                  .set_stride({k.sh, k.sw})
                  .set_dilation({k.dh, k.dw})
                  .set_compute_data_type(fe::DataType_t::INT32);
  auto y = g->conv_fprop(x, w, opts);
  y->set_data_type(fused ? conv_out : fe::DataType_t::INT32);
  if (fused) {
    auto channel = [&](const char* name, int64_t uid) {
      return g->tensor(fe::graph::Tensor_attributes()
                           .set_name(name)
                           .set_uid(uid)
                           .set_dim({1, k.m, 1, 1})
                           .set_stride({k.m, 1, k.m, k.m})
                           .set_data_type(fe::DataType_t::FLOAT));
    };
    auto pw = [](fe::PointwiseMode_t mode) {
      return fe::graph::Pointwise_attributes().set_mode(mode).set_compute_data_type(fe::DataType_t::FLOAT);
    };
    y = g->pointwise(y, channel("alpha", kAlpha), pw(fe::PointwiseMode_t::MUL));
    y->set_data_type(fe::DataType_t::FLOAT);
    y = g->pointwise(y, channel("beta", kBeta), pw(fe::PointwiseMode_t::ADD));
    y->set_data_type(fe::DataType_t::FLOAT);
    if (relu) {
      y = g->pointwise(y, pw(fe::PointwiseMode_t::RELU_FWD));
      y->set_data_type(fe::DataType_t::FLOAT);
    }
  }
  y->set_output(true)
      .set_uid(kY)
      .set_dim({k.n, k.m, k.oh, k.ow})
      .set_stride(nhwc_strides(k.m, k.oh, k.ow))
      .set_data_type(fused ? fe_type(out) : fe::DataType_t::INT32);
  fe::error_t st = g->build(h, {fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
  if (!st.is_good()) return Status::Unimplemented("cuDNN: {}", st.get_message());
  st = g->get_workspace_size(*workspace);
  if (!st.is_good()) return Status::Unimplemented("cuDNN workspace: {}", st.get_message());
  return g;
}

const Plan* find_plan(const ConvKey& k, bool relu, DType out, cudnnHandle_t h) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) cudaGetLastError();
  std::lock_guard<std::mutex> lock(g_mu);
  auto& slot = g_plans[{device, k, relu, out}];
  if (slot) return slot.get();
  slot = std::make_unique<Plan>();
  Plan& p = *slot;
  auto fused = build_graph(k, true, fe::DataType_t::INT32, relu, out, h, &p.workspace);
  if (!fused.ok()) {
    auto as_float = build_graph(k, true, fe::DataType_t::FLOAT, relu, out, h, &p.workspace);
    if (as_float.ok()) fused = std::move(as_float);
  }
  p.fused = fused.status();
  if (fused.ok()) {
    p.graph = *fused;
  } else {
    auto conv = build_graph(k, false, fe::DataType_t::INT32, relu, out, h, &p.workspace);
    p.conv_only = conv.status();
    if (conv.ok()) p.graph = *conv;
  }
  const std::string what = p.fused.ok()       ? "cuDNN int8 conv with the fused epilogue"
                           : p.conv_only.ok() ? "cuDNN int8 conv into int32, then gpuopt's epilogue"
                                              : "gpuopt's direct int8 kernel";
  GPUOPT_LOG(info, "Int8Conv {}: {}{}", conv_key_text(k), what,
             p.fused.ok() ? "" : fmt::format(" (fused graph: {})", p.fused.message()));
  return &p;
}

constexpr size_t align256(size_t v) {
  return (v + 255) / 256 * 256;
}

// alpha/beta of a node whose scales and bias are constants (their host copies are known): made
// once on the host, exactly as launch_int8_conv_prep makes them, and kept on the device by value
// (the cache key is the numbers, so it can never go stale), which spares the run that one small
// kernel per conv. Built on a shape's first (eager) run; never inside a capture (null then: the
// caller runs the prep kernel).
const float* constant_alpha_beta(const CudaKernelContext& k, int64_t m, cudaStream_t stream) {
  for (size_t i = 2; i < k.node.inputs.size() && i < 6; ++i)
    if (k.has_input(i) && !k.host[i]) return nullptr;
  auto host = [&](size_t i) -> const Tensor* { return k.has_input(i) ? k.host[i] : nullptr; };
  const Tensor* sw = host(3);
  const float inv = host(5) ? 1.0f / static_cast<float>(host(5)->get_f64(0)) : 1.0f;
  std::vector<float> ab(static_cast<size_t>(2 * m));
  for (int64_t c = 0; c < m; ++c) {
    ab[static_cast<size_t>(c)] = static_cast<float>(host(2)->get_f64(0)) *
                                 static_cast<float>(sw->get_f64(sw->numel() == 1 ? 0 : c)) * inv;
    ab[static_cast<size_t>(m + c)] = host(4) ? static_cast<float>(host(4)->get_f64(c)) * inv : 0.0f;
  }
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return nullptr;
  static std::mutex mu;
  static std::map<std::pair<int, std::vector<float>>, void*> cache;  // lives as long as the process
  std::lock_guard<std::mutex> lock(mu);
  std::pair<int, std::vector<float>> key{device, std::move(ab)};
  if (auto it = cache.find(key); it != cache.end()) return static_cast<const float*>(it->second);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone) {
    cudaGetLastError();
    return nullptr;  // no cudaMalloc inside a capture
  }
  const std::vector<float>& v = key.second;
  void* p = nullptr;
  if (cudaMalloc(&p, v.size() * sizeof(float)) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  if (cudaMemcpy(p, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess) {
    cudaGetLastError();
    cudaFree(p);
    return nullptr;
  }
  cache.emplace(std::move(key), p);
  return static_cast<const float*>(p);
}

Status run_int8_conv(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  const Tensor& w = k.in(1);
  Tensor& y = k.out(0);
  if (x.rank() != 4 || w.rank() != 4 || y.rank() != 4) return k.error("X, W and Y must be 4-D");
  const ConvKey key = forward_conv_key(k.node, x.shape(), w.shape(), y.shape(), DType::I8, /*nhwc=*/true);
  if (key.group != 1 || w.dim(3) != key.c) return k.error("W {} does not match X {} (group 1)", w.describe(), x.describe());
  if (y.numel() == 0) return Status::Ok();
  const Tensor& ws = k.in(3);
  if (ws.numel() != 1 && ws.numel() != key.m) return k.error("w_scale has {} values; expected 1 or {}", ws.numel(), key.m);
  Int8ConvScales s;
  s.dt = k.in(2).dtype();
  s.x_scale = k.in(2).raw();
  s.w_scale = ws.raw();
  s.w_per_channel = ws.numel() == key.m && key.m != 1;
  s.bias = k.has_input(4) && k.inputs[4] ? k.in(4).raw() : nullptr;
  s.y_scale = k.has_input(5) && k.inputs[5] ? k.in(5).raw() : nullptr;
  const bool relu = k.node.attr_s("activation", "") == "Relu";
  const DType out = y.dtype();
  GPUOPT_ASSIGN_OR_RETURN(cudnnHandle_t h, k.ctx.cudnn());
  const Plan* plan = find_plan(key, relu, out, h);
  const float* cached = constant_alpha_beta(k, key.m, k.ctx.stream);
  const size_t consts = cached ? 0 : align256(static_cast<size_t>(2 * key.m) * sizeof(float));
  const size_t acc_bytes = !plan->fused.ok() && plan->conv_only.ok()
                               ? align256(static_cast<size_t>(y.numel()) * sizeof(int32_t))
                               : 0;
  const size_t ws_bytes = plan->graph ? static_cast<size_t>(plan->workspace) : 0;
  Tensor hold;
  GPUOPT_ASSIGN_OR_RETURN(void* buf, call_workspace(k.ctx, consts + acc_bytes + ws_bytes, &hold));
  float* alpha = cached ? const_cast<float*>(cached) : static_cast<float*>(buf);
  float* beta = alpha + key.m;
  auto* acc = reinterpret_cast<int32_t*>(static_cast<char*>(buf) + consts);
  void* cudnn_ws = static_cast<char*>(buf) + consts + acc_bytes;
  if (!cached) GPUOPT_RETURN_IF_ERROR(launch_int8_conv_prep(s, key.m, alpha, beta, k.ctx.stream));
  if (plan->graph && !plan->failed.load()) {
    std::unordered_map<int64_t, void*> pack{{kX, const_cast<void*>(x.raw())}, {kW, const_cast<void*>(w.raw())}};
    if (plan->fused.ok()) {
      pack[kAlpha] = alpha;
      pack[kBeta] = beta;
      pack[kY] = y.raw();
    } else {
      pack[kY] = acc;
    }
    GPUOPT_CHECK_CALL(cudnnSetStream(h, k.ctx.stream));
    fe::error_t st = plan->graph->execute(h, pack, cudnn_ws);
    if (st.is_good()) {
      if (plan->fused.ok()) return Status::Ok();
      return launch_int8_conv_epilogue(key.n * key.oh * key.ow, key.m, acc, alpha, beta, relu, out, y.raw(),
                                       k.ctx.stream);
    }
    // A plan cuDNN built but cannot run (seen with some int8 engines): said once, then the
    // direct kernel for this shape, so the model still runs, and correctly.
    if (!plan->failed.exchange(true))
      GPUOPT_LOG(warn, "{}: cuDNN int8 conv execute failed ({}); gpuopt's direct kernel runs this shape",
                 node_label(k.node), st.get_message());
  }
  const Int8ConvGeom g{key.n, key.h, key.w, key.c, key.m, key.kh, key.kw, key.oh, key.ow,
                       key.ph, key.pw, key.sh, key.sw, key.dh, key.dw};
  return launch_int8_conv_direct(g, x.data<int8_t>(), w.data<int8_t>(), alpha, beta, relu, out, y.raw(),
                                 k.ctx.stream);
}

// Channels-last only (an NCHW Int8Conv, which layout_nhwc did not convert, runs on the CPU).
bool int8_conv_supported(const Node& node, const std::vector<DType>& in) {
  if (node.attr_i("channels_last", 0) != 1 || node.attr_i("group", 1) != 1 || !conv2d_attrs_supported(node))
    return false;
  if (in.size() < 4 || in[0] != DType::I8 || in[1] != DType::I8) return false;
  if ((in[2] != DType::F32 && in[2] != DType::F16) || in[3] != in[2]) return false;
  for (size_t i = 4; i < in.size(); ++i)
    if (in[i] != DType::Undefined && in[i] != in[2]) return false;
  const std::string act = node.attr_s("activation", "");
  return act.empty() || act == "Relu";
}

}  // namespace

GPUOPT_CUDA_OP(Int8Conv, &run_int8_conv, &int8_conv_supported);

}  // namespace gpuopt::cuda
