// Int8Conv (ai.gpuopt, written by fold_qdq, made channels-last by layout_nhwc) on the GPU:
// cuDNN's int8 convolution (NHWC int8 x and w, int32 accumulation on the tensor cores) through
// the frontend's graph API, with the epilogue in the same graph: conv -> * alpha[m] -> + beta[m]
// [-> Relu] [-> the residual: int8 steps, * res_scale + Z * z_scale [-> Relu]] -> int8 / f16 /
// f32 (int8_conv.h for alpha and beta, int8_conv_graph.h for the graphs). Per shape, in order,
// the first that cuDNN builds:
//   1. that fused graph (int8 in, int8 out: no int32 tensor in memory; the conv's virtual output
//      INT32, else FLOAT);
//   2. the convolution alone into int32, then gpuopt's epilogue kernel;
//   3. gpuopt's direct kernel (int8_conv.cu; slow, any shape).
// A residual node (fuse_int8_residual) whose residual graph cuDNN does not build runs as the
// pair it replaced: the plain conv into int8 at y_scale, then Int8Add's kernel. By default
// (GPUOPT_INT8_CONV1X1=1) a residual node whose conv is 1x1, stride 1, unpadded, with int8 output
// and constant scales runs as one CUTLASS GEMM with the add in its epilogue on a compute
// capability 9.0 GPU (int8_conv1x1.h), and every other residual node as the pair, without trying
// cuDNN's residual graph (slower than the pair on the H200); GPUOPT_INT8_CONV1X1=0 tries it.
// Each graph's plan is chosen by timing cuDNN's candidates on the shape's first eager run
// (TunedGraph, ops/conv/cuda/cudnn_graph_tune.h; GPUOPT_INT8_CONV_AUTOTUNE=0: heuristics' first
// plan, as before) and kept in the plan store ("int8conv <shape>,..." = "engine=<tag>"), so a
// warm start with --cache-dir builds that plan alone. Plans are cached per device and shape,
// failures too; which path a shape got is logged at info.
// Checked on the H200 by backend_ops test --op Int8Conv and test_cuda's Int8Conv* tests.
#include "ops/quant/cuda/int8_conv.h"

#include "backends/cuda/cuda_ops.h"
#include "core/cuda_check.h"
#include "core/log.h"
#include "gpuopt/kernel_settings.h"
#include "ops/conv/cuda/cudnn_conv.h"
#include "ops/conv/cuda/cudnn_graph_tune.h"
#include "ops/quant/cuda/int8_add.h"
#include "ops/quant/cuda/int8_conv1x1.h"
#include "ops/quant/cuda/int8_conv_graph.h"
#include "ops/quant/int8_conv_schema.h"

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
using namespace int8conv;

// What a shape's graph computes: none, the residual, the residual then Relu.
enum class Residual { kNone, kAdd, kAddRelu };

struct Plan {
  Status fused = Status::Unimplemented("not built"), conv_only = Status::Unimplemented("not built");
  std::unique_ptr<TunedGraph> graph;  // the fused graph, else the int32 one
  std::string store_key;              // the plan store's entry for graph's choice
  mutable std::atomic<bool> failed{false};  // execute failed once: the direct kernel from then on
  mutable std::atomic<bool> stored{false};  // the tuned choice is in the plan store
};

// device, shape, relu, output dtype, residual, GPUOPT_INT8_CONV_AUTOTUNE
using Key = std::tuple<int, ConvKey, bool, DType, Residual, bool>;
std::mutex g_mu;
std::map<Key, std::unique_ptr<Plan>> g_plans;

Result<std::unique_ptr<TunedGraph>> build_tuned(const Int8ConvGraphSpec& s, bool autotune, cudnnHandle_t h,
                                                std::string* store_key) {
  *store_key = fmt::format("int8conv {},{},{},{},{},{}", conv_key_text(s.key), s.relu ? "relu" : "id",
                           dtype_name(s.out), s.fused ? (s.conv_out == fe::DataType_t::INT32 ? "i32" : "f32") : "conv",
                           static_cast<int>(s.residual), static_cast<int>(s.residual_relu));
  GraphTuneOptions o;
  o.autotune = autotune;
  if (o.autotune) {
    if (auto v = PlanStore::current().find(*store_key); v && v->rfind("engine=", 0) == 0) o.preferred = v->substr(7);
  }
  return TunedGraph::build(make_int8_conv_graph(s), h, o, "Int8Conv " + conv_key_text(s.key));
}

const Plan* find_plan(const ConvKey& k, bool relu, DType out, Residual res, bool autotune, cudnnHandle_t h) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) cudaGetLastError();
  std::lock_guard<std::mutex> lock(g_mu);
  auto& slot = g_plans[{device, k, relu, out, res, autotune}];
  if (slot) return slot.get();
  slot = std::make_unique<Plan>();
  Plan& p = *slot;
  Int8ConvGraphSpec s;
  s.key = k;
  s.relu = relu;
  s.out = out;
  s.residual = res != Residual::kNone;
  s.residual_relu = res == Residual::kAddRelu;
  auto fused = build_tuned(s, autotune, h, &p.store_key);
  if (!fused.ok()) {
    s.conv_out = fe::DataType_t::FLOAT;
    auto as_float = build_tuned(s, autotune, h, &p.store_key);
    if (as_float.ok()) fused = std::move(as_float);
  }
  p.fused = fused.status();
  if (fused.ok()) {
    p.graph = std::move(*fused);
  } else if (res == Residual::kNone) {
    s.fused = false;
    auto conv = build_tuned(s, autotune, h, &p.store_key);
    p.conv_only = conv.status();
    if (conv.ok()) p.graph = std::move(*conv);
  }
  const std::string what = p.fused.ok()               ? "cuDNN int8 conv with the fused epilogue"
                           : res != Residual::kNone   ? "the plain conv, then Int8Add's kernel"
                           : p.conv_only.ok()         ? "cuDNN int8 conv into int32, then gpuopt's epilogue"
                                                      : "gpuopt's direct int8 kernel";
  GPUOPT_LOG(info, "Int8Conv {}{}: {}{}", conv_key_text(k), res == Residual::kNone ? "" : " +residual", what,
             p.fused.ok() ? "" : fmt::format(" (fused graph: {})", p.fused.message()));
  return &p;
}

constexpr size_t align256(size_t v) {
  return (v + 255) / 256 * 256;
}

// The host value of input i, where the node's input is a constant (its host copy is known).
const Tensor* host_of(const CudaKernelContext& k, size_t i) {
  return k.has_input(i) ? k.host[i] : nullptr;
}

// alpha/beta (and the residual's two scalars after them, int8_conv.h) of a node whose scales and bias are
// constants: made once on the host, exactly as launch_int8_conv_prep makes them, and kept on
// the device by value (the cache key is the numbers, so it can never go stale), which spares the
// run that one small kernel per conv. Built on a shape's first (eager) run; never inside a
// capture (null then: the caller runs the prep kernel).
const float* constant_alpha_beta(const CudaKernelContext& k, int64_t m, bool residual, cudaStream_t stream) {
  for (size_t i = kXScale; i < k.node.inputs.size() && i < kNumInputs; ++i)
    if (i != kZ && k.has_input(i) && !k.host[i]) return nullptr;
  const Tensor* sw = host_of(k, kWScale);
  const Tensor* ys = host_of(k, kYScale);
  const float inv = ys ? 1.0f / static_cast<float>(ys->get_f64(0)) : 1.0f;
  std::vector<float> ab(static_cast<size_t>(2 * m + (residual ? kResidualFloats : 0)));
  for (int64_t c = 0; c < m; ++c) {
    ab[static_cast<size_t>(c)] = static_cast<float>(host_of(k, kXScale)->get_f64(0)) *
                                 static_cast<float>(sw->get_f64(sw->numel() == 1 ? 0 : c)) * inv;
    ab[static_cast<size_t>(m + c)] = host_of(k, kBias) ? static_cast<float>(host_of(k, kBias)->get_f64(c)) * inv : 0.0f;
  }
  if (residual) {
    if (!ys || !host_of(k, kZScale)) return nullptr;
    const Tensor* os = host_of(k, kOutScale);
    const float inv_o = os ? 1.0f / static_cast<float>(os->get_f64(0)) : 1.0f;
    ab[static_cast<size_t>(2 * m)] = static_cast<float>(ys->get_f64(0)) * inv_o;
    ab[static_cast<size_t>(2 * m + 4)] = static_cast<float>(host_of(k, kZScale)->get_f64(0)) * inv_o;
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

const void* device_or_null(const CudaKernelContext& k, size_t i) {
  return k.has_input(i) && k.inputs[i] ? k.in(i).raw() : nullptr;
}

// The convolution with its epilogue into y (out: y's dtype) by the plan's path; ab: alpha[m],
// beta[m] (and the residual's scalars); buf: the plan's scratch (int32 sums, then cuDNN's
// workspace).
Status run_plan(CudaKernelContext& k, const ConvKey& key, const Plan& plan, bool residual_graph, const float* ab,
                bool relu, DType out, void* y, void* buf, size_t acc_bytes, cudnnHandle_t h) {
  const Tensor& x = k.in(kX);
  const Tensor& w = k.in(kW);
  float* alpha = const_cast<float*>(ab);
  float* beta = alpha + key.m;
  auto* acc = static_cast<int32_t*>(buf);
  void* cudnn_ws = static_cast<char*>(buf) + acc_bytes;
  if (plan.graph && !plan.failed.load()) {
    std::unordered_map<int64_t, void*> pack{{kI8X, const_cast<void*>(x.raw())}, {kI8W, const_cast<void*>(w.raw())}};
    if (plan.fused.ok()) {
      pack[kI8Alpha] = alpha;
      pack[kI8Beta] = beta;
      pack[kI8Y] = y;
      if (residual_graph) {
        pack[kI8Z] = const_cast<void*>(k.in(kZ).raw());
        pack[kI8ResScale] = beta + key.m;
        pack[kI8ZScale] = beta + key.m + 4;
      }
    } else {
      pack[kI8Y] = acc;
    }
    Status st = plan.graph->execute(h, k.ctx.stream, pack, cudnn_ws);
    if (st.ok() && plan.graph->tuned() && plan.graph->candidates() > 1 && !plan.stored.exchange(true))
      PlanStore::current().put(plan.store_key, "engine=" + plan.graph->chosen_tag());
    if (st.ok()) {
      if (plan.fused.ok()) return Status::Ok();
      return launch_int8_conv_epilogue(key.n * key.oh * key.ow, key.m, acc, alpha, beta, relu, out, y, k.ctx.stream);
    }
    // A plan cuDNN built but cannot run (seen with some int8 engines): said once, then the
    // direct kernel for this shape (a residual graph: the caller runs the pair instead), so the
    // model still runs, and correctly.
    cudaGetLastError();
    if (!plan.failed.exchange(true))
      GPUOPT_LOG(warn, "{}: cuDNN int8 conv execute failed ({}); {} runs this shape", node_label(k.node), st.message(),
                 residual_graph ? "the plain conv and Int8Add's kernel" : "gpuopt's direct kernel");
    if (residual_graph) return Status::Unavailable("residual graph failed");
  }
  const Int8ConvGeom g{key.n, key.h, key.w, key.c, key.m, key.kh, key.kw, key.oh, key.ow,
                       key.ph, key.pw, key.sh, key.sw, key.dh, key.dw};
  return launch_int8_conv_direct(g, x.data<int8_t>(), w.data<int8_t>(), alpha, beta, relu, out, y, k.ctx.stream);
}

// Scratch bytes of a plan besides the constants: int32 sums where the epilogue runs apart, and
// cuDNN's workspace.
size_t plan_scratch(const Plan& p, int64_t numel, size_t* acc_bytes) {
  *acc_bytes = !p.fused.ok() && p.conv_only.ok() ? align256(static_cast<size_t>(numel) * sizeof(int32_t)) : 0;
  return *acc_bytes + (p.graph ? align256(static_cast<size_t>(p.graph->workspace())) : 0);
}

// GPUOPT_INT8_CONV1X1: 1 (default) a 1x1 residual node runs as the CUTLASS GEMM where it
// applies and every other residual node as the pair; 0 the residual nodes try cuDNN's residual
// graph first (the form before the CUTLASS kernel, measured slower than the pairs). The
// context's KernelSettings carry it.

#if GPUOPT_HAVE_SM90A
// The residual node as one CUTLASS GEMM (int8_conv1x1.h) where it applies; Unimplemented where
// it does not (the caller goes on with cuDNN's paths).
Status run_conv1x1_residual(CudaKernelContext& k, const ConvKey& key, bool relu, bool residual_relu, const Int8ConvScales& s) {
  const Tensor* ys = host_of(k, kYScale);
  const Tensor* zs = host_of(k, kZScale);
  const Tensor* os = host_of(k, kOutScale);
  if (!k.ctx.kernels().int8_conv1x1 || key.kh != 1 || key.kw != 1 || key.sh != 1 || key.sw != 1 || key.ph != 0 || key.pw != 0 || key.oh != key.h ||
      key.ow != key.w || key.c % 16 != 0 || key.m % 16 != 0 || !ys || !zs || !os)
    return Status::Unimplemented("not a 1x1 residual conv with constant scales");
  Int8Conv1x1Residual a;
  if (cudaGetDevice(&a.device) != cudaSuccess || !int8_conv1x1_device(a.device, &a.sm_count)) {
    cudaGetLastError();
    return Status::Unimplemented("not a compute capability 9.0 GPU");
  }
  a.rows = key.n * key.h * key.w;
  a.c = key.c;
  a.m = key.m;
  a.x = k.in(kX).data<int8_t>();
  a.w = k.in(kW).data<int8_t>();
  a.z = k.in(kZ).data<int8_t>();
  a.y = k.out(0).data<int8_t>();
  a.relu = relu;
  a.residual_relu = residual_relu;
  const float inv_o = 1.0f / static_cast<float>(os->get_f64(0));  // as constant_alpha_beta
  a.res_scale = static_cast<float>(ys->get_f64(0)) * inv_o;
  a.z_scale = static_cast<float>(zs->get_f64(0)) * inv_o;
  a.workspace_bytes = int8_conv1x1_workspace(a);
  const float* cached = constant_alpha_beta(k, key.m, true, k.ctx.stream);
  const size_t consts = cached ? 0 : align256(static_cast<size_t>(2 * key.m + kResidualFloats) * sizeof(float));
  Tensor hold;
  void* buf = nullptr;
  if (consts + a.workspace_bytes > 0) {
    GPUOPT_ASSIGN_OR_RETURN(buf, call_workspace(k.ctx, consts + align256(a.workspace_bytes), &hold));
  }
  float* ab = cached ? const_cast<float*>(cached) : static_cast<float*>(buf);
  if (!cached) GPUOPT_RETURN_IF_ERROR(launch_int8_conv_prep(s, key.m, ab, ab + key.m, k.ctx.stream));
  a.alpha = ab;
  a.beta = ab + key.m;
  a.workspace = a.workspace_bytes ? static_cast<char*>(buf) + consts : nullptr;
  const Status st = launch_int8_conv1x1_residual(a, k.ctx.stream);
  static std::atomic<bool> said{false};
  if (st.ok() && !said.exchange(true))
    GPUOPT_LOG(info, "Int8Conv {} +residual: CUTLASS sm90 1x1 GEMM with the add in its epilogue (and every such conv)",
               conv_key_text(key));
  return st;
}
#endif

Status run_int8_conv(CudaKernelContext& k) {
  const Tensor& x = k.in(kX);
  const Tensor& w = k.in(kW);
  Tensor& y = k.out(0);
  if (x.rank() != 4 || w.rank() != 4 || y.rank() != 4) return k.error("X, W and Y must be 4-D");
  const ConvKey key = forward_conv_key(k.node, x.shape(), w.shape(), y.shape(), DType::I8, /*nhwc=*/true);
  if (key.group != 1 || w.dim(3) != key.c) return k.error("W {} does not match X {} (group 1)", w.describe(), x.describe());
  if (y.numel() == 0) return Status::Ok();
  const Tensor& ws = k.in(kWScale);
  if (ws.numel() != 1 && ws.numel() != key.m) return k.error("w_scale has {} values; expected 1 or {}", ws.numel(), key.m);
  const bool residual = k.has_input(kZ);
  if (residual && (k.in(kZ).shape() != y.shape() || !k.has_input(kYScale) || !k.has_input(kZScale)))
    return k.error("Z {} must have Y's shape {}, with y_scale and z_scale", k.in(kZ).describe(), y.describe());
  Int8ConvScales s;
  s.dt = k.in(kXScale).dtype();
  s.x_scale = k.in(kXScale).raw();
  s.w_scale = ws.raw();
  s.w_per_channel = ws.numel() == key.m && key.m != 1;
  s.bias = device_or_null(k, kBias);
  s.y_scale = device_or_null(k, kYScale);
  if (residual) {
    s.z_scale = device_or_null(k, kZScale);
    s.out_scale = device_or_null(k, kOutScale);
  }
  const bool relu = k.node.attr_s(kActivation, "") == "Relu";
  const Residual res = !residual ? Residual::kNone
                       : k.node.attr_s(kResidualActivation, "") == "Relu" ? Residual::kAddRelu
                                                                          : Residual::kAdd;
  const DType out = y.dtype();
#if GPUOPT_HAVE_SM90A
  if (residual && out == DType::I8) {
    const Status one = run_conv1x1_residual(k, key, relu, res == Residual::kAddRelu, s);
    if (one.code() != StatusCode::kUnimplemented) return one;
  }
#endif
  GPUOPT_ASSIGN_OR_RETURN(cudnnHandle_t h, k.ctx.cudnn());
  // The pair (the plain conv into int8 at y_scale, then Int8Add's kernel) where cuDNN's residual
  // graph is not asked for (GPUOPT_INT8_CONV1X1=0 asks), does not build or failed.
  const KernelSettings& ks = k.ctx.kernels();
  const Plan* plan = residual && ks.int8_conv1x1 ? nullptr : find_plan(key, relu, out, res, ks.int8_conv_autotune, h);
  const bool split = residual && (!plan || !plan->fused.ok() || plan->failed.load());
  if (split) plan = find_plan(key, relu, DType::I8, Residual::kNone, ks.int8_conv_autotune, h);
  const float* cached = constant_alpha_beta(k, key.m, residual, k.ctx.stream);
  const size_t consts = cached ? 0 : align256(static_cast<size_t>(2 * key.m + kResidualFloats) * sizeof(float));
  const size_t mid = split ? align256(static_cast<size_t>(y.numel())) : 0;
  size_t acc_bytes = 0;
  const size_t scratch = plan_scratch(*plan, y.numel(), &acc_bytes);
  Tensor hold;
  GPUOPT_ASSIGN_OR_RETURN(void* buf, call_workspace(k.ctx, consts + mid + scratch, &hold));
  float* ab = cached ? const_cast<float*>(cached) : static_cast<float*>(buf);
  if (!cached) GPUOPT_RETURN_IF_ERROR(launch_int8_conv_prep(s, key.m, ab, ab + key.m, k.ctx.stream));
  char* mid_buf = static_cast<char*>(buf) + consts;
  void* conv_out = split ? static_cast<void*>(mid_buf) : y.raw();
  const Status ran =
      run_plan(k, key, *plan, residual && !split, ab, relu, split ? DType::I8 : out, conv_out, mid_buf + mid, acc_bytes, h);
  if (ran.code() == StatusCode::kUnavailable && residual && !split) return run_int8_conv(k);  // now as the pair
  GPUOPT_RETURN_IF_ERROR(ran);
  if (!split) return Status::Ok();
  Int8AddArgs a;
  a.n = y.numel();
  a.a = static_cast<const int8_t*>(conv_out);
  a.b = k.in(kZ).data<int8_t>();
  a.scale_dt = s.dt;
  a.a_scale = s.y_scale;
  a.b_scale = s.z_scale;
  a.y_scale = s.out_scale;
  a.relu = res == Residual::kAddRelu;
  a.out_dt = out;
  a.y = y.raw();
  return launch_int8_add(a, k.ctx.stream);
}

// Channels-last only (an NCHW Int8Conv, which layout_nhwc did not convert, runs on the CPU).
bool int8_conv_supported(const Node& node, const std::vector<DType>& in) {
  if (node.attr_i(kChannelsLast, 0) != 1 || node.attr_i("group", 1) != 1 || !conv2d_attrs_supported(node))
    return false;
  if (in.size() < 4 || in.size() > kNumInputs || in[kX] != DType::I8 || in[kW] != DType::I8) return false;
  const DType sdt = in[kXScale];
  if ((sdt != DType::F32 && sdt != DType::F16) || in[kWScale] != sdt) return false;
  for (size_t i = kBias; i < in.size(); ++i)
    if (in[i] != DType::Undefined && in[i] != (i == kZ ? DType::I8 : sdt)) return false;
  const bool residual = in.size() > kZ && in[kZ] != DType::Undefined;
  if (residual && (in[kYScale] == DType::Undefined || in.size() <= kZScale || in[kZScale] == DType::Undefined))
    return false;
  for (const char* a : {kActivation, kResidualActivation}) {
    const std::string act = node.attr_s(a, "");
    if (!act.empty() && act != "Relu") return false;
  }
  return true;
}

}  // namespace

GPUOPT_CUDA_OP(Int8Conv, &run_int8_conv, &int8_conv_supported);

}  // namespace gpuopt::cuda
