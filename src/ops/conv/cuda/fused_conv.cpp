// FusedConv (com.microsoft): y = act(conv(x, w) + bias + z) in one cudnnConvolutionBiasActivationForward
// call: the residual add and the Relu ride in the convolution's epilogue instead of two more
// kernels that each read and write the whole activation. NCHW (1-D, 2-D or 3-D) with symmetric
// pads, as Conv.
//
// cuDNN's rules: the activation is RELU or IDENTITY, and IDENTITY only with the
// IMPLICIT_PRECOMP_GEMM algorithm; bias is [1, M, 1, 1] in the data type; alpha1/alpha2 are
// floats (f32 compute for every storage type); z may be y when alpha2 = 0. A node without B gets
// a zeroed bias carved from the end of the workspace. Where cuDNN declines the fused call (no
// precomputed-GEMM algorithm for an identity, or NOT_SUPPORTED at the first call: seen for some
// dtype/algorithm pairs), or where the plain convolution plus one epilogue pass of our own
// (conv_epilogue.h: bias, z and Relu together) is faster (timed per shape), the plan runs that.
// HardSwish and Swish (ops/conv/conv_activation.h), which cuDNN's fused call does not have, always
// run as the plain convolution plus that one epilogue pass: still one pass fewer than a separate
// activation node (three fewer for Swish written as Sigmoid + Mul).
//
// NhwcFusedConv (ai.gpuopt, written by the layout_nhwc pass) is the same op channels-last: x, z,
// y [N, H, W, C], w [M, kH, kW, C/group]. It shares every line here; only the descriptors'
// format (ConvKey::nhwc) and the epilogue's channel index (i % C) differ. FusedConv of 1-D (unit
// height) and 3-D (cuDNN's N-d descriptors) convolutions takes the same route; NhwcFusedConv is
// 2-D only. Where cuDNN has no
// channels-last algorithm for a shape, that node runs the NCHW plan between transposes.
// Its depthwise shapes run our own kernel (depthwise.h). Its `input_activation` (ops/conv/conv_activation.h) is the depthwise
// kernel's prologue; any other conv that carries one (GPUOPT_DEPTHWISE_KERNEL=cudnn) reads an
// activated copy of x made by one extra pass.
// A channels-last 1x1 conv without an activation (or Relu with a bias) may run as one cuBLASLt
// GEMM with the bias, z and Relu in its epilogue (conv_gemm.h), timed against cuDNN per shape.
#include "ops/conv/cuda/conv_epilogue.h"
#include "backends/cuda/cuda_ops.h"
#include "ops/conv/cuda/conv_gemm.h"
#include "ops/conv/cuda/depthwise.h"
#include "ops/conv/cuda/conv_graph.h"
#include "ops/conv/cuda/cudnn_conv.h"
#include "ops/tensor/cuda/layout.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/plan_store.h"
#include "core/cuda_check.h"
#include "core/log.h"
#include "gpuopt/kernel_settings.h"

#include <cudnn.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <optional>
#include <vector>

namespace gpuopt::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t align_up(size_t v) {
  return (v + kAlign - 1) / kAlign * kAlign;
}

struct FusedPlan {
  Status status;
  ConvDescs d;
  cudnnActivationDescriptor_t act = nullptr;
  cudnnConvolutionFwdAlgo_t algo{};
  size_t workspace = 0;
  mutable std::atomic<bool> decomposed{false};  // run as separate cuDNN calls (see the header comment)
  mutable std::atomic<bool> timed{false};       // fused vs separate calls measured for this shape
  std::string entry;                            // its plan cache key (plan_store.h)

  FusedPlan() = default;
  FusedPlan(const FusedPlan&) = delete;
  FusedPlan& operator=(const FusedPlan&) = delete;
  ~FusedPlan() {
    if (act) cudnnDestroyActivationDescriptor(act);
  }
};

// One cache per (activation, bias present): the algorithm choice and the workspace reserve differ.
ConvPlanCache<FusedPlan> g_plans[2][2];

// The plan's algorithm and fused-or-separate decision into the plan cache.
void record_choice(const FusedPlan& p) {
  PlanStore::current().put(p.entry, fmt::format("{} decomposed={} timed={}", algo_text(p.algo, p.d.conv),
                                                p.decomposed.load() ? 1 : 0, p.timed.load() ? 1 : 0));
}

Status build(FusedPlan* p, const ConvKey& k, bool relu, size_t bias_reserve, cudnnHandle_t h, size_t ws_bytes) {
  GPUOPT_RETURN_IF_ERROR(p->d.build(k, k.m, k.c / k.group));
  GPUOPT_CHECK_CALL(cudnnCreateActivationDescriptor(&p->act));
  GPUOPT_CHECK_CALL(cudnnSetActivationDescriptor(p->act, relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                                 CUDNN_PROPAGATE_NAN, 0.0));
  if (ws_bytes < bias_reserve) return Status::Unimplemented("workspace of {} bytes cannot hold the bias", ws_bytes);
  const size_t max_ws = ws_bytes - bias_reserve;
  // The plan cache's choice for this shape (plan_store.h): the algorithm, and whether the fused
  // call or the separate calls won the timing, which then is not timed again.
  p->entry = fmt::format("fusedconv relu={} bias={} {} ws<={}", relu ? 1 : 0, bias_reserve ? 0 : 1, conv_key_text(k),
                         max_ws);
  if (const auto cached = PlanStore::current().find(p->entry)) {
    const auto dec = plan_field(*cached, "decomposed"), timed = plan_field(*cached, "timed");
    const bool ok_algo = reuse_algo(cached, k.dt, max_ws, h, p->d, &p->algo, &p->workspace);
    if (ok_algo && dec && timed && (relu || *dec || p->algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)) {
      p->decomposed = *dec != 0;
      p->timed = *timed != 0;
      return Status::Ok();
    }
  }
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int found = 0;
  GPUOPT_CHECK_CALL(cudnnGetConvolutionForwardAlgorithm_v7(h, p->d.x, p->d.w, p->d.conv, p->d.y,
                                                           CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf));
  if (!relu) {
    std::vector<cudnnConvolutionFwdAlgoPerf_t> precomp;
    for (int a = 0; a < found; ++a)
      if (perf[a].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) precomp.push_back(perf[a]);
    if (choose_algo(precomp.data(), static_cast<int>(precomp.size()), k.dt, max_ws, p->d.conv, &p->algo, &p->workspace,
                    "forward")
            .ok()) {
      record_choice(*p);
      return Status::Ok();
    }
    p->decomposed = true;  // any algorithm, bias and z added by separate calls
  }
  GPUOPT_RETURN_IF_ERROR(choose_algo(perf, found, k.dt, max_ws, p->d.conv, &p->algo, &p->workspace, "forward"));
  record_choice(*p);
  return Status::Ok();
}

// Where the separate path writes: y's dtype, element count and channel layout, and the stream.
struct Epilogue {
  DType dt;
  int64_t n, channels, spatial;
  cudaStream_t stream;
};

// The plain cuDNN convolution, then bias, z and the activation in one pass of our own over y.
Status run_decomposed(cudnnHandle_t h, const FusedPlan& p, ConvAct act, const void* x, const void* w, const void* b,
                      const void* z, void* y, void* ws, const Epilogue& e) {
  const float one = 1.f, zero = 0.f;
  const ConvDescs& d = p.d;
  GPUOPT_CHECK_CALL(cudnnConvolutionForward(h, &one, d.x, x, d.w, w, d.conv, p.algo, ws, p.workspace, &zero, d.y, y));
  if (!b && !z && act == ConvAct::kNone) return Status::Ok();
  return launch_conv_epilogue(e.dt, y, b, z, e.n, e.channels, e.spatial, act, e.stream);
}

// The fused call; cuDNN's own status, since a refusal is not an error (the caller falls back).
cudnnStatus_t run_fused(cudnnHandle_t h, const FusedPlan& p, const void* x, const void* w, const void* bias,
                        const void* z, void* y, void* ws) {
  const float alpha1 = 1.f, alpha2 = z ? 1.f : 0.f;
  const ConvDescs& d = p.d;
  return cudnnConvolutionBiasActivationForward(h, &alpha1, d.x, x, d.w, w, d.conv, p.algo, ws, p.workspace, &alpha2,
                                               d.y, z ? z : y, d.bias, bias, p.act, d.y, y);
}

// Times two ways of the same call, alternating, 5 runs each between events on `stream`: the
// best of each in ms. The first failure is returned (nothing is decided on it).
Status time_alternating(cudaStream_t stream, const std::function<Status()>& a, const std::function<Status()>& b,
                        float* best_a, float* best_b) {
  constexpr int kReps = 5;
  cudaEvent_t ev[2 * kReps + 1];
  for (auto& e : ev) GPUOPT_CHECK_CALL(cudaEventCreate(&e));
  Status st = Status::Ok();
  cudaEventRecord(ev[0], stream);
  for (int r = 0; r < kReps && st.ok(); ++r) {
    st = a();
    cudaEventRecord(ev[2 * r + 1], stream);
    if (st.ok()) st = b();
    cudaEventRecord(ev[2 * r + 2], stream);
  }
  *best_a = *best_b = 1e30f;
  if (st.ok() && cudaEventSynchronize(ev[2 * kReps]) == cudaSuccess) {
    for (int r = 0; r < kReps; ++r) {
      float ta = 0, tb = 0;
      cudaEventElapsedTime(&ta, ev[2 * r], ev[2 * r + 1]);
      cudaEventElapsedTime(&tb, ev[2 * r + 1], ev[2 * r + 2]);
      *best_a = std::min(*best_a, ta);
      *best_b = std::min(*best_b, tb);
    }
  }
  for (auto& e : ev) cudaEventDestroy(e);
  return st;
}

// cuDNN's fused kernels are not always the faster way: on the H200, ResNet-50 at batch 1 ran
// 0.77 ms as conv + separate Relu/Add kernels and 0.85 ms fused. So the first call of each shape
// (always an eager run: graphs are captured on a shape's second run) times both, alternating,
// best of five each after a warm-up, and keeps the faster. Inside a capture, or if a call fails, it keeps what the
// plan says.
Status time_fused_vs_separate(CudaKernelContext& k, cudnnHandle_t h, const FusedPlan& p, bool relu, const void* x,
                              const void* w, const void* b_or_null, const void* bias, const void* z, void* y, void* ws,
                              const Epilogue& epi) {
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(k.ctx.stream, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone) {
    cudaGetLastError();
    p.timed = false;  // measure on a later eager call
    return Status::Ok();
  }
  // Alternating, best of 5 each: the first runs of a process meet rising clocks and cold caches,
  // which a block of fused runs followed by a block of separate ones would charge to one side.
  auto fused = [&] {
    const cudnnStatus_t st = run_fused(h, p, x, w, bias, z, y, ws);
    return st == CUDNN_STATUS_SUCCESS ? Status::Ok() : Status::Unimplemented("{}", cudnnGetErrorString(st));
  };
  const ConvAct act = relu ? ConvAct::kRelu : ConvAct::kNone;
  auto separate = [&] { return run_decomposed(h, p, act, x, w, b_or_null, z, y, ws, epi); };
  Status st = fused();
  if (st.ok()) st = separate();
  float best_fused = 0, best_separate = 0;
  if (st.ok()) st = time_alternating(k.ctx.stream, fused, separate, &best_fused, &best_separate);
  if (st.ok() && best_separate < best_fused) p.decomposed = true;
  cudaGetLastError();
  // A failed call is not decided here: the real call right after handles a refusal (separate
  // calls) or reports the error.
  return Status::Ok();
}

// One call's device pointers: b and z may be null.
struct ConvArgs {
  const void *x, *w, *b, *z;
  void* y;
};

size_t bias_bytes(const ConvKey& key) {
  return static_cast<size_t>(key.m) * dtype_size(key.dt);
}
// What a plan's call takes from the workspace: cuDNN's own bytes, then a zeroed bias if B is absent.
size_t call_bytes(const FusedPlan& plan, const ConvKey& key, bool has_b) {
  return align_up(plan.workspace) + (has_b ? 0 : align_up(bias_bytes(key)));
}

// relu: the plan for cuDNN's fused call with RELU (any algorithm); false: IDENTITY (precomputed
// GEMM only, or decomposed). HardSwish/Swish take the RELU plan's algorithm and never the fused call.
const FusedPlan* find_plan(CudaKernelContext& k, cudnnHandle_t h, const ConvKey& key, bool relu, bool has_b) {
  const size_t bias_reserve = has_b ? 0 : align_up(bias_bytes(key));
  return g_plans[relu][has_b].get(
      key, [&](FusedPlan* p) { return build(p, key, relu, bias_reserve, h, conv_workspace_cap(k.ctx)); });
}

// Runs a built plan; ws holds call_bytes(plan, key, a.b != nullptr).
Status run_plan(CudaKernelContext& k, cudnnHandle_t h, const FusedPlan& plan, const ConvKey& key, ConvAct act,
                const ConvArgs& a, void* ws, int64_t y_numel) {
  const bool relu = act == ConvAct::kRelu;
  const void* bias = a.b;
  if (!a.b) {
    // Zeroed on the stream each run (a few hundred bytes): other kernels share the workspace.
    void* zb = static_cast<char*>(ws) + align_up(plan.workspace);
    GPUOPT_CHECK_CALL(cudaMemsetAsync(zb, 0, bias_bytes(key), k.ctx.stream));
    bias = zb;
  }
  // Channels-last: the channel of element i is i % M (spatial extent 1 in the epilogue's terms).
  const Epilogue epi{key.dt, y_numel, key.m, key.nhwc ? 1 : key.od * key.oh * key.ow, k.ctx.stream};
  if (act != ConvAct::kNone && !relu) return run_decomposed(h, plan, act, a.x, a.w, a.b, a.z, a.y, ws, epi);
  if (!plan.decomposed.load() && !plan.timed.exchange(true)) {
    GPUOPT_RETURN_IF_ERROR(time_fused_vs_separate(k, h, plan, relu, a.x, a.w, a.b, bias, a.z, a.y, ws, epi));
    if (plan.timed.load()) record_choice(plan);  // measured (not deferred by a capture)
  }
  if (plan.decomposed.load(std::memory_order_relaxed))
    return run_decomposed(h, plan, act, a.x, a.w, a.b, a.z, a.y, ws, epi);
  const cudnnStatus_t s = run_fused(h, plan, a.x, a.w, bias, a.z, a.y, ws);
  if (s == CUDNN_STATUS_SUCCESS) return Status::Ok();
  // cuDNN 9 codes 2xxx (BAD_PARAM_*) and 3xxx (NOT_SUPPORTED_*) are refusals checked on the host
  // before anything is queued, so the separate calls can take over for good; others are errors.
  const int family = static_cast<int>(s) / 1000;
  if (family != 2 && family != 3) GPUOPT_CHECK_CALL(s);
  if (!plan.decomposed.exchange(true)) {
    GPUOPT_LOG(info,
               "{}: cuDNN declined the fused conv-bias-activation call for this {} shape ({}); "
               "running the plain convolution and one epilogue pass instead",
               node_label(k.node), dtype_name(key.dt), cudnnGetErrorString(s));
    record_choice(plan);
  }
  return run_decomposed(h, plan, act, a.x, a.w, a.b, a.z, a.y, ws, epi);
}

// cuDNN has no channels-last algorithm for this NhwcFusedConv shape (its plan failed to build):
// the NCHW plan on transposed copies keeps the node on the GPU and correct, at the price of the
// transposes NHWC was meant to save (logged once per shape at info).
Status run_nhwc_through_nchw(CudaKernelContext& k, cudnnHandle_t h, const FusedPlan& nhwc_plan, const ConvKey& key,
                             ConvAct act, const ConvArgs& a) {
  ConvKey nchw = key;
  nchw.nhwc = false;
  const FusedPlan* plan = find_plan(k, h, nchw, act != ConvAct::kNone, a.b != nullptr);
  GPUOPT_RETURN_IF_ERROR(plan->status.with_context(node_label(k.node)));
  if (!nhwc_plan.decomposed.exchange(true))
    GPUOPT_LOG(info, "{}: no channels-last cuDNN algorithm for this {} shape ({}); running it NCHW between transposes",
               node_label(k.node), dtype_name(key.dt), nhwc_plan.status.to_string());
  const size_t es = dtype_size(key.dt);
  const Shape xs{key.n, key.h, key.w, key.c}, ws{key.m, key.kh, key.kw, key.c / key.group},
      ys{key.n, key.oh, key.ow, key.m};
  auto bytes = [es](const Shape& sh) { return align_up(static_cast<size_t>(shape_numel(sh)) * es); };
  const size_t xb = bytes(xs), wb = bytes(ws), yb = bytes(ys);
  Tensor hold;
  GPUOPT_ASSIGN_OR_RETURN(void* buf,
                          call_workspace(k.ctx, xb + wb + yb * (a.z ? 2 : 1) + call_bytes(*plan, nchw, a.b), &hold));
  char* p = static_cast<char*>(buf);
  void *x2 = p, *w2 = p + xb, *y2 = p + xb + wb, *z2 = a.z ? p + xb + wb + yb : nullptr;
  void* conv_ws = p + xb + wb + yb * (a.z ? 2 : 1);
  const std::vector<int64_t> to_nchw{0, 3, 1, 2}, to_nhwc{0, 2, 3, 1};
  cudaStream_t s = k.ctx.stream;
  GPUOPT_RETURN_IF_ERROR(launch_transpose(es, a.x, x2, xs, to_nchw, s));
  GPUOPT_RETURN_IF_ERROR(launch_transpose(es, a.w, w2, ws, to_nchw, s));
  if (a.z) GPUOPT_RETURN_IF_ERROR(launch_transpose(es, a.z, z2, ys, to_nchw, s));
  GPUOPT_RETURN_IF_ERROR(run_plan(k, h, *plan, nchw, act, {x2, w2, a.b, z2, y2}, conv_ws, shape_numel(ys)));
  return launch_transpose(es, y2, a.y, Shape{key.n, key.m, key.oh, key.ow}, to_nhwc, s);
}

// The cuDNN route of one call: the fused call or the plain conv and one epilogue pass.
Status run_cudnn_route(CudaKernelContext& k, const ConvKey& key, ConvAct act, const ConvArgs& a, int64_t y_numel) {
  GPUOPT_ASSIGN_OR_RETURN(cudnnHandle_t h, k.ctx.cudnn());
  const bool has_b = a.b != nullptr;
  const FusedPlan* plan = find_plan(k, h, key, act != ConvAct::kNone, has_b);
  if (key.nhwc && !plan->status.ok()) return run_nhwc_through_nchw(k, h, *plan, key, act, a);
  GPUOPT_RETURN_IF_ERROR(plan->status.with_context(node_label(k.node)));
  Tensor hold;
  GPUOPT_ASSIGN_OR_RETURN(void* ws, call_workspace(k.ctx, call_bytes(*plan, key, has_b), &hold));
  return run_plan(k, h, *plan, key, act, a, ws, y_numel);
}

// Whether a 1x1 channels-last conv runs as one cuBLASLt GEMM (conv_gemm.h): decided once per
// shape on its first eager run by timing both routes, alternating, best of 5 each after a run of
// each that builds its plans; the plan cache keeps the answer. Inside a capture, where z is y, or
// where the GEMM fails, cuDNN runs (undecided in the first two cases).
Result<bool> gemm_route(CudaKernelContext& k, const ConvKey& key, ConvAct act, const ConvArgs& a, int64_t y_numel) {
  if (k.ctx.kernels().conv_gemm == KernelSettings::ConvGemm::kForce) return true;
  const std::string entry = conv_gemm_entry(key, act, a.b != nullptr, a.z != nullptr);
  const ConvRoute known = conv_route(entry);
  if (known != ConvRoute::kUndecided) return known == ConvRoute::kGemm;
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  if (a.z == a.y || cudaStreamIsCapturing(k.ctx.stream, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone) {
    cudaGetLastError();
    return false;
  }
  GPUOPT_RETURN_IF_ERROR(run_cudnn_route(k, key, act, a, y_numel));
  if (!run_conv_gemm(k, key, act, a.x, a.w, a.b, a.z, a.y).ok()) {
    cudaGetLastError();
    set_conv_route(entry, ConvRoute::kCudnn);
    return false;
  }
  float best_cudnn = 0, best_gemm = 0;
  const Status st = time_alternating(
      k.ctx.stream, [&] { return run_cudnn_route(k, key, act, a, y_numel); },
      [&] { return run_conv_gemm(k, key, act, a.x, a.w, a.b, a.z, a.y); }, &best_cudnn, &best_gemm);
  cudaGetLastError();
  GPUOPT_RETURN_IF_ERROR(st);
  const bool gemm = best_gemm < best_cudnn;
  set_conv_route(entry, gemm ? ConvRoute::kGemm : ConvRoute::kCudnn);
  GPUOPT_LOG(debug, "{}: 1x1 conv {}: cuDNN {:.1f} us, cuBLASLt GEMM {:.1f} us; {} kept", node_label(k.node),
             conv_key_text(key), 1e3 * best_cudnn, 1e3 * best_gemm, gemm ? "the GEMM" : "cuDNN");
  return gemm;
}

// x through NhwcFusedConv's prologue activation, for a conv other than the depthwise kernel:
// a copy of x with the activation applied (the epilogue kernel's in-place pass), held by `hold`.
Result<const void*> activated_input(CudaKernelContext& k, ConvAct in_act, const Tensor& x, Tensor* hold) {
  if (!k.ctx.memory) return k.error("{} needs a device memory pool for its activated input", kConvInputActivation);
  GPUOPT_ASSIGN_OR_RETURN(*hold, k.ctx.memory->alloc(x.dtype(), x.shape(), k.ctx.stream, "conv input activation"));
  if (x.numel() == 0) return hold->raw();
  GPUOPT_CHECK_CALL(cudaMemcpyAsync(hold->raw(), x.raw(), static_cast<size_t>(x.numel()) * dtype_size(x.dtype()),
                                    cudaMemcpyDeviceToDevice, k.ctx.stream));
  const int64_t c = x.shape().back();
  GPUOPT_RETURN_IF_ERROR(launch_conv_epilogue(x.dtype(), hold->raw(), nullptr, nullptr, x.numel(), c, 1, in_act,
                                              k.ctx.stream));
  return static_cast<const void*>(hold->raw());
}

Status run_fused_conv_as(CudaKernelContext& k, bool nhwc) {
  const Tensor& x = k.in(0);
  const Tensor& w = k.in(1);
  Tensor& y = k.out(0);
  const bool has_b = k.inputs.size() > 2 && k.inputs[2];
  const bool has_z = k.inputs.size() > 3 && k.inputs[3];
  const std::optional<ConvAct> act = conv_act_from_name(k.node.attr_s("activation", ""));
  if (!act) return k.error("activation '{}' has no CUDA epilogue", k.node.attr_s("activation", ""));
  if (has_z && k.in(3).shape() != y.shape())
    return k.error("Z has shape {} but the convolution output is {}", shape_to_string(k.in(3).shape()),
                   shape_to_string(y.shape()));
  const std::string in_name = nhwc ? k.node.attr_s(kConvInputActivation, "") : "";
  const std::optional<ConvAct> in_act = conv_act_from_name(in_name);
  if (!in_act) return k.error("{} '{}' has no CUDA prologue", kConvInputActivation, in_name);
  const ConvKey key = forward_conv_key(k.node, x.shape(), w.shape(), y.shape(), x.dtype(), nhwc);
  ConvArgs a{x.raw(), w.raw(), has_b ? k.in(2).raw() : nullptr, has_z ? k.in(3).raw() : nullptr, y.raw()};
  // NhwcFusedConv's optional second output, the spatial mean (se_mean pass): inside the
  // depthwise kernel, or one reduction over y after cuDNN's conv.
  void* mean = nhwc && k.outputs.size() > 1 && k.outputs[1] ? k.out(1).raw() : nullptr;
  if (nhwc && depthwise_nhwc_applies(k, key))
    return run_depthwise_nhwc(k, key, *act, a.x, a.w, a.b, a.z, a.y, mean, *in_act);
  Tensor x_act;
  if (*in_act != ConvAct::kNone) {
    GPUOPT_ASSIGN_OR_RETURN(a.x, activated_input(k, *in_act, x, &x_act));
  }
  bool done = false;
  const KernelSettings& ks = k.ctx.kernels();
  if (nhwc && ks.conv_gemm != KernelSettings::ConvGemm::kOff && conv_gemm_applies(key, *act, has_b)) {
    GPUOPT_ASSIGN_OR_RETURN(const bool gemm, gemm_route(k, key, *act, a, y.numel()));
    if (gemm) {
      GPUOPT_RETURN_IF_ERROR(run_conv_gemm(k, key, *act, a.x, a.w, a.b, a.z, a.y).with_context(node_label(k.node)));
      done = true;
    }
  }
  if (!done && nhwc && *act != ConvAct::kHardSwish && *act != ConvAct::kSwish &&
      ks.conv_engine == KernelSettings::ConvEngine::kGraph) {  // A/B
    const Status g = run_conv_graph(k, key, *act == ConvAct::kRelu, a.x, a.w, a.b, a.z, a.y);
    if (g.code() != StatusCode::kUnimplemented) {
      GPUOPT_RETURN_IF_ERROR(g);
      done = true;
    }
  }
  if (!done) GPUOPT_RETURN_IF_ERROR(run_cudnn_route(k, key, *act, a, y.numel()));
  return mean ? run_spatial_mean_nhwc(k, key, a.y, mean) : Status::Ok();
}

Status run_fused_conv(CudaKernelContext& k) {
  return run_fused_conv_as(k, false);
}
Status run_nhwc_fused_conv(CudaKernelContext& k) {
  return run_fused_conv_as(k, true);
}

bool fused_conv_supported(const Node& n, const std::vector<DType>& in) {
  if (in.size() < 2 || in[0] != in[1]) return false;
  for (size_t i = 2; i < in.size() && i < 4; ++i)
    if (in[i] != DType::Undefined && in[i] != in[0]) return false;
  if (in[0] != DType::F32 && in[0] != DType::F16 && in[0] != DType::BF16) return false;
  if (!conv_act_from_name(n.attr_s("activation", ""))) return false;  // the other activations run on the CPU
  if (!conv_act_from_name(n.attr_s(kConvInputActivation, ""))) return false;
  return conv_attrs_supported(n, 3);                // the rest as Conv's CUDA kernel: 1-D, 2-D, 3-D
}

// cuDNN's channels-last convolutions are the tensor-core ones: fp16 and bf16 only (an f32
// NhwcFusedConv, which the layout pass never writes, runs on the CPU); 2-D only.
bool nhwc_fused_conv_supported(const Node& n, const std::vector<DType>& in) {
  return !in.empty() && (in[0] == DType::F16 || in[0] == DType::BF16) && fused_conv_supported(n, in) &&
         conv2d_attrs_supported(n);
}

}  // namespace

GPUOPT_CUDA_OP(FusedConv, &run_fused_conv, &fused_conv_supported);
GPUOPT_CUDA_OP(NhwcFusedConv, &run_nhwc_fused_conv, &nhwc_fused_conv_supported);

}  // namespace gpuopt::cuda
